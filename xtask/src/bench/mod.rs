//! `cargo xtask bench`: tracer's overhead, measured side by side with the bare
//! workload (and bpftrace / `strace -f` where installed), medians over
//! repeated runs. It prints ratios; it asserts nothing. Results: BENCHMARKS.md.
//!
//! Sections:
//! 1. fixed start-up (load, attach, spawn, teardown): `tracer record -- true`;
//! 2. the workloads (fork/exec storm, signal storm, self-signal storm, long argv, stderr-heavy,
//!    Go's SIGURG preemption, a real test suite), bare vs tracer vs
//!    references, raw ratio and ratio beyond start-up; then real runners
//!    (jest, vitest, pytest-xdist: `suites`) bare vs tracer vs `tracer
//!    --tests` vs bpftrace, and the kernel time per program run of both;
//! 3. the zero-loss knee: event rate and ring-buffer size vs `lost`;
//! 4. peak RSS over a ~1M-event run, and `tracer report` on 1M-event logs;
//! 5. the resources sampler's CPU (sampling vs `--no-resources`, idle run).
//!
//! `--only SECTION` (repeatable) runs some of 2–5; the start-up always runs
//! (the ratios beyond start-up need it). `--vm KERNEL` runs the workloads in
//! a guest instead (`guest`): the fentry rung, which this host refuses,
//! against the raw_syscalls rung.
//!
//! This file runs the sections and prints their tables; what runs is in
//! `workloads` (and `suites`), the log reading in `logs`, the timing in
//! `measure`, the daemon soak in `soak`.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{bail, Result};

pub(crate) mod extra;
mod guest;
mod logs;
mod measure;
mod program_time;
mod sampler;
pub(crate) mod soak;
mod soak_cgroup;
mod suite_files;
mod suites;
mod workloads;

use self::{
    logs::{count_lines, event_span_secs, read_trailer, synthesize},
    measure::{measure, Measured, Stats},
    workloads::{build_driver, machine, workloads, Ctx, Tool, Workload},
};
use crate::{build, privilege, workspace::Workspace};

pub(crate) struct BenchOpts {
    /// Repetitions per configuration (the reference tools use at most 3).
    pub reps: usize,
    /// Workloads a quarter of their size, 2 repetitions: a smoke test of the bench.
    pub quick: bool,
    /// Skip bpftrace and strace even when installed.
    pub no_reference: bool,
    /// Only the daemon soak (`--soak`).
    pub soak: Option<soak::SoakOpts>,
    /// Only these sections (and the start-up); empty: all of them.
    pub only: Vec<Section>,
    /// Only the guest bench, on these kernels (`guest`).
    pub vm: Vec<String>,
}

/// The sections `--only` picks (the start-up runs whatever it picks).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Section {
    /// 2: the synthetic workloads (fork, signal, argv, stderr, Go, unit tests).
    Workloads,
    /// 2: real runners' suites (jest, vitest forks, pytest-xdist).
    Suites,
    /// 3: the zero-loss knee.
    Knee,
    /// 4: memory and report time on 1M-event logs.
    Memory,
    /// 5: the resources sampler's cost.
    Sampler,
}

impl BenchOpts {
    fn wants(&self, section: Section) -> bool {
        self.only.is_empty() || self.only.contains(&section)
    }
}

pub(crate) fn run(ws: &Workspace, opts: &BenchOpts) -> Result<()> {
    if !opts.vm.is_empty() {
        // The guest loads the programs; this machine only boots it.
        return guest::run(ws, &opts.vm, opts.reps, opts.quick);
    }
    if !privilege::is_root()? {
        bail!("the bench loads eBPF programs: run it as root (sudo -E cargo xtask bench)");
    }
    let started = Instant::now();
    if !opts.no_reference && opts.soak.is_none() {
        // The references are part of the comparison, not optional extras: a
        // fresh machine gets them from Debian, as the tests get theirs.
        crate::test_deps::ensure_programs(&[("bpftrace", "bpftrace"), ("strace", "strace")])?;
    }
    let tracer = build::run(ws, true)?;
    let scratch = ws.target_dir.join("bench");
    fs::create_dir_all(&scratch)?;
    if let Some(soak) = &opts.soak {
        println!("# tracer bench: daemon soak\n\n{}\n", machine());
        soak::run(&tracer, &scratch, soak)?;
        return Ok(());
    }
    let driver = build_driver(&scratch)?;
    // The release a CI job downloads, timed beside the glibc build (issue 26:
    // within 5 % on every workload).
    let tracer_static = crate::dist::build_static(ws, crate::target::Target::host()?)?;
    let go = if opts.wants(Section::Workloads) {
        extra::build_go(&scratch)
    } else {
        None
    };
    let which =
        |name: &str| crate::bootstrap::which(name, &std::env::var_os("PATH").unwrap_or_default());
    let mut cx = Ctx {
        tracer,
        tracer_static,
        driver,
        scratch: scratch.clone(),
        bpftrace: if opts.no_reference {
            None
        } else {
            which("bpftrace")
        },
        strace: if opts.no_reference {
            None
        } else {
            which("strace")
        },
        out: String::new(),
    };
    let reps = if opts.quick { 2 } else { opts.reps.max(1) };
    let ref_reps = reps.min(3);
    let scale = if opts.quick { 0.25 } else { 1.0 };

    cx.say("# tracer bench");
    cx.say("");
    cx.say(machine());
    cx.say(format!(
        "repetitions: {reps} (bpftrace: {ref_reps}, strace: 1); medians; times are wall-clock"
    ));
    let missing = [
        ("bpftrace", cx.bpftrace.is_none()),
        ("strace", cx.strace.is_none()),
    ];
    for (name, absent) in missing {
        if absent {
            let why = if opts.no_reference {
                "--no-reference"
            } else {
                "not installed (apt-get install bpftrace strace)"
            };
            cx.say(format!("{name}: skipped, {why}"));
        }
    }

    // 1. Fixed start-up.
    let mut tools = vec![Tool::Tracer, Tool::TracerStatic];
    if cx.bpftrace.is_some() {
        tools.push(Tool::Bpftrace);
    }
    if cx.strace.is_some() {
        tools.push(Tool::Strace);
    }
    let mut startup_tools = tools.clone();
    if opts.wants(Section::Suites) {
        startup_tools.insert(1, Tool::TracerTests);
    }
    cx.say("");
    cx.say("## Fixed start-up: `<tool> -- true` (load, attach, spawn, detach, reports)");
    cx.say("");
    cx.say("| tool | median | min | max | peak RSS |");
    cx.say("| --- | --- | --- | --- | --- |");
    let truecmd = vec!["/bin/true".to_string()];
    let mut startup = [0.0f64; Tool::COUNT];
    for &tool in &startup_tools {
        let tracer_itself = matches!(tool, Tool::Tracer | Tool::TracerStatic | Tool::TracerTests);
        let n = if tracer_itself { reps } else { ref_reps };
        let mut runs = Vec::new();
        for _ in 0..n {
            let dir = cx.tmp("startup");
            runs.push(measure(&mut cx.command(tool, &truecmd, &dir, None))?);
        }
        let s = Stats::of(&runs);
        startup[tool as usize] = s.median;
        cx.say(format!(
            "| {} | {:.3} s | {:.3} s | {:.3} s | {:.1} MB |",
            tool.label(),
            s.median,
            s.min,
            s.max,
            s.rss_mb
        ));
    }

    // 2. Workloads and real suites side by side (runs interleaved so drift
    // hits all tools alike).
    let mut program_rows = Vec::new();
    let mut fork_log: Option<PathBuf> = None;
    if opts.wants(Section::Workloads) {
        let mut all = workloads(scale);
        all.push(extra::preempt(scale, go.as_deref()));
        match extra::test_suite(ws) {
            Ok(w) => all.push(w),
            Err(e) => cx.say(format!("test suite workload: skipped, {e:#}")),
        }
        fork_log = workload_rows(
            &mut cx,
            all,
            &tools,
            &startup,
            (reps, ref_reps),
            &mut program_rows,
        )?;
    }
    if opts.wants(Section::Suites) {
        let mut suite_tools = vec![Tool::Bare, Tool::Tracer, Tool::TracerTests];
        if cx.bpftrace.is_some() {
            suite_tools.push(Tool::Bpftrace);
        }
        match suites::prepare(ws, &scratch, scale) {
            Ok(all) => suites::rows(
                &mut cx,
                &all,
                &suite_tools,
                &startup,
                (reps, ref_reps),
                &mut program_rows,
            )?,
            Err(e) => cx.say(format!("\nreal suites: skipped, {e:#}")),
        }
    }

    if !program_rows.is_empty() {
        cx.say("");
        for line in program_time::table(&program_rows) {
            cx.say(line);
        }
    }

    // 3. The zero-loss knee.
    if opts.wants(Section::Knee) {
        knee(&mut cx, scale)?;
    }

    // 4. Memory over a ~1M-event run, and `tracer report` on 1M events.
    if opts.wants(Section::Memory) {
        big_log(&mut cx, scale, fork_log.as_deref())?;
    }

    // 5. The resources sampler's cost.
    if opts.wants(Section::Sampler) {
        sampler::cost(&mut cx, reps, scale)?;
    }

    cx.say("");
    cx.say(format!(
        "bench finished in {:.0} s",
        started.elapsed().as_secs_f64()
    ));
    let results = scratch.join("results.md");
    fs::write(&results, &cx.out)?;
    eprintln!("xtask: results also in {}", results.display());
    Ok(())
}

/// The workloads' rows (section 2): `tools` and bare interleaved, `reps`
/// runs each (bpftrace `ref_reps`, strace 1); each workload also once under
/// `--program-stats`, into `program_rows`. The fork storm's log, kept for
/// section 4.
fn workload_rows(
    cx: &mut Ctx,
    all: Vec<Workload>,
    tools: &[Tool],
    startup: &[f64; Tool::COUNT],
    (reps, ref_reps): (usize, usize),
    program_rows: &mut Vec<program_time::Row>,
) -> Result<Option<PathBuf>> {
    let mut all_tools = vec![Tool::Bare];
    all_tools.extend(tools);
    cx.say("");
    cx.say(
        "## Workloads: median wall time; ×raw = tool/bare; ×beyond = (tool − its start-up)/bare",
    );
    cx.say("");
    cx.say(
        "| workload | bare | tracer | ×raw | ×beyond | tracer peak RSS | events | lost | static release ×raw / ×beyond (static/glibc) | bpftrace ×raw / ×beyond | strace -f ×raw / ×beyond |",
    );
    cx.say("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut fork_log: Option<PathBuf> = None;
    for w in all {
        program_rows.push(program_time::measure_one(cx, &w)?);
        let argv = cx.argv(&w);
        let mut times: Vec<Vec<Measured>> = vec![Vec::new(); Tool::COUNT];
        let mut trailer = None;
        for rep in 0..reps {
            for &tool in &all_tools {
                let cap = match tool {
                    Tool::Bpftrace => ref_reps,
                    // strace -f costs up to 60× on these workloads: one run is
                    // the reference point, and keeps the bench under 15 min.
                    Tool::Strace => 1,
                    _ => reps,
                };
                if rep >= cap {
                    continue;
                }
                let dir = cx.tmp("work");
                let m = measure(&mut cx.command(tool, &argv, &dir, None))?;
                if m.code != 0 {
                    eprintln!(
                        "bench: warning: {} under {} exited {}",
                        w.name,
                        tool.label(),
                        m.code
                    );
                }
                if tool == Tool::Tracer {
                    trailer = read_trailer(&dir.join("events.ndjson"));
                    if w.program.is_none() && w.args[0] == "fork" {
                        let keep = cx.scratch.join("fork-storm.ndjson");
                        fs::rename(dir.join("events.ndjson"), &keep)?;
                        fork_log = Some(keep);
                    }
                }
                times[tool as usize].push(m);
                let _ = fs::remove_dir_all(&dir);
            }
        }
        let bare = Stats::of(&times[Tool::Bare as usize]).median;
        let ratio = |tool: Tool| -> String {
            let t = &times[tool as usize];
            if t.is_empty() {
                return "–".into();
            }
            let med = Stats::of(t).median;
            format!(
                "{:.2}× / {:.2}×",
                med / bare,
                (med - startup[tool as usize]).max(0.0) / bare
            )
        };
        let tr_stats = Stats::of(&times[Tool::Tracer as usize]);
        let tr = tr_stats.median;
        let (events, lost) = trailer
            .as_ref()
            .map(|t| (t.events.to_string(), t.lost_summary()))
            .unwrap_or(("?".into(), "no trailer".into()));
        let st = Stats::of(&times[Tool::TracerStatic as usize]).median;
        cx.say(format!(
            "| {} ({}) | {:.2} s | {:.2} s | {:.2}× | {:.2}× | {:.1} MB | {} | {} | {} ({:.2}×) | {} | {} |",
            w.name,
            w.what,
            bare,
            tr,
            tr / bare,
            (tr - startup[Tool::Tracer as usize]).max(0.0) / bare,
            tr_stats.rss_mb,
            events,
            lost,
            ratio(Tool::TracerStatic),
            st / tr,
            ratio(Tool::Bpftrace),
            ratio(Tool::Strace),
        ));
    }

    Ok(fork_log)
}

/// Push the event rate up (parallel fork storms, the signal storm) and the
/// ring buffer down until the trailer's `lost` counters go non-zero.
fn knee(cx: &mut Ctx, scale: f64) -> Result<()> {
    let n = |x: f64| ((x * scale) as u64).max(10).to_string();
    let loads: Vec<(&str, Vec<String>)> = vec![
        ("fork ×2", vec!["fork".into(), n(1000.0), "2".into()]),
        ("fork ×8", vec!["fork".into(), n(1000.0), "8".into()]),
        ("signal", vec!["signal".into(), n(100_000.0)]),
    ];
    let rings: [u32; 6] = [16 << 20, 1 << 20, 256 << 10, 64 << 10, 16 << 10, 8 << 10];
    cx.say("");
    cx.say(
        "## Zero-loss knee: events/s = events / (last event's t − first event's t), one run each",
    );
    cx.say("");
    cx.say("| load | ring buffer | wall | events | events/s | lost |");
    cx.say("| --- | --- | --- | --- | --- | --- |");
    let mut best_rate: (f64, String) = (0.0, String::new());
    let mut smallest_clean: Vec<String> = Vec::new();
    for (name, args) in &loads {
        let argv = cx.driver_argv(args);
        let mut clean_ring = None;
        for &ring in &rings {
            let dir = cx.tmp("knee");
            let m = measure(&mut cx.command(Tool::Tracer, &argv, &dir, Some(ring)))?;
            let t = read_trailer(&dir.join("events.ndjson"));
            let span = event_span_secs(&dir.join("events.ndjson"));
            let _ = fs::remove_dir_all(&dir);
            let (events, lost, summary) = match &t {
                Some(t) => (t.events, t.lost_total(), t.lost_summary()),
                None => (0, u64::MAX, "no trailer".into()),
            };
            let rate = events as f64 / span.unwrap_or(m.secs).max(1e-3);
            if lost == 0 {
                clean_ring = Some(ring);
                if rate > best_rate.0 {
                    best_rate = (rate, format!("{name}, ring {}", human_bytes(ring)));
                }
            }
            cx.say(format!(
                "| {name} | {} | {:.2} s | {events} | {:.0} | {summary} |",
                human_bytes(ring),
                m.secs,
                rate,
            ));
        }
        smallest_clean.push(format!(
            "{name}: {}",
            clean_ring.map_or("none".into(), human_bytes)
        ));
    }
    cx.say("");
    cx.say(format!(
        "knee: highest zero-loss rate {:.0} events/s ({}); smallest zero-loss ring: {}",
        best_rate.0,
        best_rate.1,
        smallest_clean.join("; ")
    ));
    Ok(())
}

/// Peak RSS of `tracer record` over a ~1M-event run (signal storm), then
/// `tracer report` on that log and on a synthesized fork-heavy 1M-event log.
fn big_log(cx: &mut Ctx, scale: f64, fork_log: Option<&Path>) -> Result<()> {
    let target = (1_000_000.0 * scale) as u64;
    cx.say("");
    cx.say(format!(
        "## Memory and report time on {target}-event logs (peak RSS: getrusage of the child)"
    ));
    cx.say("");
    cx.say("| what | wall | peak RSS | events | lost |");
    cx.say("| --- | --- | --- | --- | --- |");
    // The signal storm as a user runs it: the flood of deliveries and the
    // calls that sent them are counted in the kernel, a few records in all.
    let argv = cx.driver_argv(&["signal".into(), target.to_string()]);
    let dir = cx.tmp("big");
    let m = measure(&mut cx.command(Tool::Tracer, &argv, &dir, None))?;
    big_record_row(cx, &format!("signal storm ({target} signals)"), &m, &dir);
    // And with `--all-signals`, every delivery and call logged (a `signal`
    // and a `kill_call` per signal): the real 1M-event log `report` reads.
    let half = target / 2;
    let all = cx.tmp("big-all");
    let mut c = Command::new(&cx.tracer);
    c.arg("record").arg("--output").arg(&all);
    c.args(["--user", "root", "--all-signals", "--"]);
    c.args(cx.driver_argv(&["signal".into(), half.to_string()]));
    let m = measure(&mut c)?;
    big_record_row(
        cx,
        &format!("signal storm, `--all-signals` ({half} signals)"),
        &m,
        &all,
    );
    let mut logs = vec![(
        "signal-storm log, `--all-signals` (real)",
        all.join("events.ndjson"),
    )];
    if let Some(fork) = fork_log {
        let synth = cx.scratch.join("synth-1m.ndjson");
        let n = synthesize(fork, &synth, target)?;
        eprintln!("bench: synthesized {n} events into {}", synth.display());
        logs.push(("fork-storm log ×k (synthesized)", synth));
    }
    for (name, path) in &logs {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let mut runs = Vec::new();
        for _ in 0..2 {
            let out = cx.tmp("report");
            let mut c = Command::new(&cx.tracer);
            c.arg("report").arg(path).arg("--output").arg(&out);
            runs.push(measure(&mut c)?);
        }
        let s = Stats::of(&runs);
        let ok = runs.iter().all(|r| r.code == 0);
        cx.say(format!(
            "| `tracer report` {name}, {:.0} MB{} | {:.2} s | {:.1} MB | {} | |",
            size as f64 / 1e6,
            if ok { "" } else { " (FAILED)" },
            s.median,
            s.rss_mb,
            count_lines(path).saturating_sub(2)
        ));
    }
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&all);
    for (_, p) in logs.iter().skip(1) {
        let _ = fs::remove_file(p);
    }
    Ok(())
}

/// A `tracer record` row of the memory table: its log's trailer read back.
fn big_record_row(cx: &mut Ctx, what: &str, m: &Measured, dir: &Path) {
    let t = read_trailer(&dir.join("events.ndjson"));
    cx.say(format!(
        "| `tracer record` {what} | {:.2} s | {:.1} MB | {} | {} |",
        m.secs,
        m.rss_kb as f64 / 1024.0,
        t.as_ref().map_or(0, |t| t.events),
        t.as_ref().map_or("no trailer".into(), |t| t.lost_summary()),
    ));
}

fn human_bytes(b: u32) -> String {
    match b {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}
