//! `cargo xtask bench`: tracer's overhead, measured side by side with the bare
//! workload (and bpftrace / `strace -f` where installed), medians over
//! repeated runs. It prints ratios; it asserts nothing. Results: BENCHMARKS.md.
//!
//! Sections:
//! 1. fixed start-up (load, attach, spawn, teardown): `tracer record -- true`;
//! 2. four workloads (fork/exec storm, signal storm, long argv, stderr-heavy),
//!    bare vs tracer vs references, raw ratio and ratio beyond start-up;
//! 3. the zero-loss knee: event rate and ring-buffer size vs `lost`;
//! 4. peak RSS over a ~1M-event run, and `tracer report` on 1M-event logs.
use std::{
    fs,
    io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{bail, Context, Result};

use crate::{bench_measure::*, build, cmd, privilege, workspace::Workspace};

const DRIVER_SRC: &str = include_str!("bench_driver.c");

pub struct BenchOpts {
    /// Repetitions per configuration (the reference tools use at most 3).
    pub reps: usize,
    /// Workloads a quarter of their size, 2 repetitions: a smoke test of the bench.
    pub quick: bool,
    /// Skip bpftrace and strace even when installed.
    pub no_reference: bool,
}

/// One workload: the driver's arguments, sized to run 2–3 s bare on our
/// 2-core machine.
struct Workload {
    name: &'static str,
    what: String,
    args: Vec<String>,
}

fn workloads(scale: f64) -> Vec<Workload> {
    let n = |x: f64| ((x * scale) as u64).max(10).to_string();
    vec![
        Workload {
            name: "fork storm",
            what: format!("{} × fork+exec /bin/true, 2 workers", n(1500.0)),
            args: vec!["fork".into(), n(1500.0), "2".into()],
        },
        Workload {
            name: "signal storm",
            what: format!("{} signals ping-ponged parent<->child", n(200_000.0)),
            args: vec!["signal".into(), n(200_000.0)],
        },
        Workload {
            name: "long argv",
            what: format!("{} × exec /bin/true with 64 args of 1 KiB", n(1000.0)),
            args: vec!["argv".into(), n(1000.0), "64".into(), "1024".into()],
        },
        Workload {
            name: "stderr-heavy",
            what: format!("{} processes × 2000 writes of 100 B to fd 2", n(1000.0)),
            args: vec!["stderr".into(), n(1000.0), "2000".into(), "100".into()],
        },
    ]
}

#[derive(Clone, Copy, PartialEq)]
enum Tool {
    Bare,
    Tracer,
    Bpftrace,
    Strace,
}

impl Tool {
    fn label(self) -> &'static str {
        match self {
            Tool::Bare => "bare",
            Tool::Tracer => "tracer",
            Tool::Bpftrace => "bpftrace",
            Tool::Strace => "strace -f",
        }
    }
}

/// bpftrace with the tracepoints tracer uses, scoped to the command's tree
/// like tracer is, printing one line per event (tracer writes one per event).
const BPFTRACE_SCRIPT: &str = r#"
BEGIN { @t[cpid] = 1; }
tracepoint:sched:sched_process_fork /@t[pid]/ { @t[args->child_pid] = 1; printf("fork %d %d\n", pid, args->child_pid); }
tracepoint:sched:sched_process_exec /@t[pid]/ { printf("exec %d %s\n", pid, str(args->filename)); }
tracepoint:sched:sched_process_exit /@t[pid]/ { printf("exit %d %d\n", pid, tid); if (pid == tid) { delete(@t[pid]); } }
tracepoint:signal:signal_generate /@t[pid] || @t[args->pid]/ { printf("signal %d %d %d %d\n", pid, args->pid, args->sig, args->result); }
tracepoint:syscalls:sys_exit_kill, tracepoint:syscalls:sys_exit_tkill, tracepoint:syscalls:sys_exit_tgkill /@t[pid]/ { printf("kill %d %d\n", pid, args->ret); }
tracepoint:syscalls:sys_enter_write /@t[pid] && args->fd == 2/ { @stderr_bytes[pid] = sum(args->count); }
END { clear(@t); clear(@stderr_bytes); }
"#;

struct Ctx {
    tracer: PathBuf,
    driver: PathBuf,
    scratch: PathBuf,
    bpftrace: Option<PathBuf>,
    strace: Option<PathBuf>,
    out: String,
}

impl Ctx {
    /// Print a line and keep it for results.md.
    fn say(&mut self, line: impl AsRef<str>) {
        println!("{}", line.as_ref());
        self.out.push_str(line.as_ref());
        self.out.push('\n');
    }

    fn tmp(&self, name: &str) -> PathBuf {
        let dir = self.scratch.join(name);
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// The command for `argv` under `tool`, writing into `dir`.
    fn command(&self, tool: Tool, argv: &[String], dir: &Path, ring: Option<u32>) -> Command {
        match tool {
            Tool::Bare => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
            Tool::Tracer => {
                let mut c = Command::new(&self.tracer);
                c.arg("record").arg("--output").arg(dir);
                if let Some(bytes) = ring {
                    c.arg("--ring-buffer-size").arg(bytes.to_string());
                }
                c.arg("--").args(argv);
                c
            }
            Tool::Bpftrace => {
                let _ = fs::create_dir_all(dir);
                let mut c = Command::new(self.bpftrace.as_ref().expect("bpftrace"));
                c.arg("-o")
                    .arg(dir.join("bpftrace.out"))
                    .arg("-e")
                    .arg(BPFTRACE_SCRIPT)
                    .arg("-c")
                    .arg(argv.join(" "));
                c
            }
            Tool::Strace => {
                let _ = fs::create_dir_all(dir);
                let mut c = Command::new(self.strace.as_ref().expect("strace"));
                c.args(["-f", "-qq", "-o"])
                    .arg(dir.join("strace.out"))
                    .args(argv);
                c
            }
        }
    }

    fn driver_argv(&self, args: &[String]) -> Vec<String> {
        let mut v = vec![self.driver.to_string_lossy().into_owned()];
        v.extend(args.iter().cloned());
        v
    }
}

pub fn run(ws: &Workspace, opts: &BenchOpts) -> Result<()> {
    if !privilege::is_root()? {
        bail!("the bench loads eBPF programs: run it as root (sudo -E cargo xtask bench)");
    }
    let started = Instant::now();
    let tracer = build::run(ws, true)?;
    let scratch = ws.target_dir.join("bench");
    fs::create_dir_all(&scratch)?;
    let driver = build_driver(&scratch)?;
    let which =
        |name: &str| crate::bootstrap::which(name, &std::env::var_os("PATH").unwrap_or_default());
    let mut cx = Ctx {
        tracer,
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
    let mut tools = vec![Tool::Tracer];
    if cx.bpftrace.is_some() {
        tools.push(Tool::Bpftrace);
    }
    if cx.strace.is_some() {
        tools.push(Tool::Strace);
    }
    cx.say("");
    cx.say("## Fixed start-up: `<tool> -- true` (load, attach, spawn, detach, reports)");
    cx.say("");
    cx.say("| tool | median | min | max | peak RSS |");
    cx.say("| --- | --- | --- | --- | --- |");
    let truecmd = vec!["/bin/true".to_string()];
    let mut startup = [0.0f64; 4];
    for &tool in &tools {
        let n = if tool == Tool::Tracer { reps } else { ref_reps };
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

    // 2. Workloads side by side (runs interleaved so drift hits all tools alike).
    let mut all_tools = vec![Tool::Bare];
    all_tools.extend(&tools);
    cx.say("");
    cx.say(
        "## Workloads: median wall time; ×raw = tool/bare; ×beyond = (tool − its start-up)/bare",
    );
    cx.say("");
    cx.say(
        "| workload | bare | tracer | ×raw | ×beyond | events | lost | bpftrace ×raw / ×beyond | strace -f ×raw / ×beyond |",
    );
    cx.say("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut fork_log: Option<PathBuf> = None;
    for w in workloads(scale) {
        let argv = cx.driver_argv(&w.args);
        let mut times: Vec<Vec<Measured>> = vec![Vec::new(); 4];
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
                    if w.args[0] == "fork" {
                        let keep = scratch.join("fork-storm.ndjson");
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
        let tr = Stats::of(&times[Tool::Tracer as usize]).median;
        let (events, lost) = trailer
            .as_ref()
            .map(|t| (t.events.to_string(), t.lost_summary()))
            .unwrap_or(("?".into(), "no trailer".into()));
        cx.say(format!(
            "| {} ({}) | {:.2} s | {:.2} s | {:.2}× | {:.2}× | {} | {} | {} | {} |",
            w.name,
            w.what,
            bare,
            tr,
            tr / bare,
            (tr - startup[Tool::Tracer as usize]).max(0.0) / bare,
            events,
            lost,
            ratio(Tool::Bpftrace),
            ratio(Tool::Strace),
        ));
    }

    // 3. The zero-loss knee.
    knee(&mut cx, scale)?;

    // 4. Memory over a ~1M-event run, and `tracer report` on 1M events.
    big_log(&mut cx, scale, fork_log.as_deref())?;

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
    // signal storm: one `signal` + one `kill_call` per signal.
    let argv = cx.driver_argv(&["signal".into(), (target / 2).to_string()]);
    let dir = cx.tmp("big");
    let m = measure(&mut cx.command(Tool::Tracer, &argv, &dir, None))?;
    let log = dir.join("events.ndjson");
    let t = read_trailer(&log);
    cx.say(format!(
        "| `tracer record` signal storm ({} signals) | {:.2} s | {:.1} MB | {} | {} |",
        target / 2,
        m.secs,
        m.rss_kb as f64 / 1024.0,
        t.as_ref().map_or(0, |t| t.events),
        t.as_ref().map_or("no trailer".into(), |t| t.lost_summary()),
    ));
    let mut logs = vec![("signal-storm log (real)", log.clone())];
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
    for (_, p) in logs.iter().skip(1) {
        let _ = fs::remove_file(p);
    }
    Ok(())
}

fn count_lines(path: &Path) -> u64 {
    let Ok(f) = fs::File::open(path) else {
        return 0;
    };
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut n = 0;
    loop {
        let buf = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(b) => b,
        };
        n += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let len = buf.len();
        r.consume(len);
    }
    n
}

/// A valid log of at least `target` events: the events of `src` repeated,
/// each copy's `seq` renumbered and its `start`/`t` shifted, so every copy's
/// processes are new identities (same pids, later start times: pid reuse).
fn synthesize(src: &Path, dst: &Path, target: u64) -> Result<u64> {
    let text = fs::read_to_string(src).with_context(|| format!("reading {}", src.display()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().context("empty log")?;
    let body: Vec<&str> = lines
        .filter(|l| !l.contains(r#""type":"trailer""#))
        .collect();
    if body.is_empty() {
        bail!("{} has no events", src.display());
    }
    let span = field_values(&body, "\"t\":").max().unwrap_or(0)
        - field_values(&body, "\"t\":").min().unwrap_or(0)
        + 1_000_000;
    let copies = target.div_ceil(body.len() as u64);
    let mut out = BufWriter::new(fs::File::create(dst)?);
    writeln!(out, "{header}")?;
    let mut seq = 0u64;
    for k in 0..copies {
        let shift = k * span;
        for line in &body {
            seq += 1;
            let l = set_field(line, "\"seq\":", |_| seq);
            let l = set_field(&l, "\"t\":", |v| v + shift);
            let l = set_field(&l, "\"start\":", |v| v + shift);
            writeln!(out, "{l}")?;
        }
    }
    writeln!(
        out,
        r#"{{"type":"trailer","ended_at":"2000-01-01T00:00:00Z","events":{seq},"lost":{{"ringbuf_full":0,"tracked_map_full":0,"inflight_map_full":0,"undecodable":0,"per_cpu":[]}},"command_status":{{"exited":{{"code":0}}}}}}"#
    )?;
    out.flush()?;
    Ok(seq)
}

fn field_values<'a>(lines: &'a [&str], key: &'a str) -> impl Iterator<Item = u64> + 'a {
    lines.iter().filter_map(move |l| {
        let i = l.find(key)? + key.len();
        let digits: String = l[i..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

/// Rewrite every unsigned numeric value of `key` in a JSON line.
fn set_field(line: &str, key: &str, f: impl Fn(u64) -> u64) -> String {
    let mut out = String::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(i) = rest.find(key) {
        let start = i + key.len();
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rest.len(), |e| start + e);
        match rest[start..end].parse::<u64>() {
            Ok(v) => out.push_str(&f(v).to_string()),
            Err(_) => out.push_str(&rest[start..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The trailer's counters, read from the log's last line.
pub struct TrailerCounts {
    pub events: u64,
    pub lost: [(String, u64); 4],
}

impl TrailerCounts {
    fn lost_total(&self) -> u64 {
        self.lost.iter().map(|(_, n)| n).sum()
    }
    fn lost_summary(&self) -> String {
        let parts: Vec<String> = self
            .lost
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if parts.is_empty() {
            "0".into()
        } else {
            parts.join(", ")
        }
    }
}

pub fn read_trailer(path: &Path) -> Option<TrailerCounts> {
    let mut f = fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(64 << 10))).ok()?;
    let mut tail = String::new();
    f.read_to_string(&mut tail).ok()?;
    let last = tail.lines().rev().find(|l| !l.trim().is_empty())?;
    if !last.contains(r#""type":"trailer""#) {
        return None;
    }
    let num = |key: &str| -> u64 {
        field_values(&[last], &format!("\"{key}\":"))
            .next()
            .unwrap_or(0)
    };
    let lost = [
        "ringbuf_full",
        "tracked_map_full",
        "inflight_map_full",
        "undecodable",
    ]
    .map(|k| (k.to_string(), num(k)));
    Some(TrailerCounts {
        events: num("events"),
        lost,
    })
}

/// Seconds between the log's first and last event (`t`, CLOCK_BOOTTIME ns).
fn event_span_secs(path: &Path) -> Option<f64> {
    let mut f = fs::File::open(path).ok()?;
    let mut head = vec![0u8; 64 << 10];
    let n = f.read(&mut head).ok()?;
    let head = String::from_utf8_lossy(&head[..n]).into_owned();
    let first = head.lines().nth(1)?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(64 << 10))).ok()?;
    let mut tail = String::new();
    f.read_to_string(&mut tail).ok()?;
    let last = tail
        .lines()
        .rev()
        .find(|l| l.contains("\"t\":") && !l.contains(r#""type":"trailer""#))?;
    let t = |l: &str| field_values(&[l], "\"t\":").next();
    let (a, b) = (t(first)?, t(last)?);
    (b > a).then(|| (b - a) as f64 / 1e9)
}

fn human_bytes(b: u32) -> String {
    match b {
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Compile the workload driver (C, `cc -O2`) into the scratch dir.
fn build_driver(scratch: &Path) -> Result<PathBuf> {
    let src = scratch.join("benchdrv.c");
    let bin = scratch.join("benchdrv");
    let fresh = fs::read_to_string(&src).ok().as_deref() == Some(DRIVER_SRC) && bin.exists();
    if !fresh {
        fs::write(&src, DRIVER_SRC)?;
        cmd::run(
            Command::new("cc")
                .args(["-O2", "-Wall", "-o"])
                .arg(&bin)
                .arg(&src),
        )
        .context("the bench compiles its workload driver with `cc`: install a C compiler")?;
    }
    Ok(bin)
}

/// CPU model, cores, kernel, memory.
fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem_kb: u64 = fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    format!(
        "machine: {model}, {cores} cores, kernel {}, {:.1} GiB RAM",
        kernel.trim(),
        mem_kb as f64 / 1048576.0
    )
}

/// Quiet stdio for a measured command.
pub fn quiet(c: &mut Command) -> &mut Command {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}
