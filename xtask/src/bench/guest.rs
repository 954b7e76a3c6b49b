//! `cargo xtask bench --vm KERNEL` (issue 37 item 4): the driver's workloads
//! in a guest of the VM matrix, where the kill and stderr hooks attach by
//! fentry (this host refuses it), bare vs `tracer record` as it attaches
//! there vs `tracer record` forced onto the raw_syscalls rung, interleaved
//! by `vm/bench.sh`; then the kernel's own ns per program run of both.
//! TCG emulates the guest, so its times are not comparable with the host's:
//! only the ratios within one guest run are.
use std::{fs, time::Duration};

use anyhow::{bail, Result};

use super::{
    logs::trailer_counts,
    measure::median,
    program_time,
    workloads::{build_driver, workloads},
};
use crate::{
    build,
    vm::guest::{self, Script},
    workspace::Workspace,
};

/// The host bench's workloads at a tenth of their size: under TCG a guest
/// runs them 10–40× slower than this host.
const SCALE: f64 = 0.1;

/// The tools `vm/bench.sh` runs each workload under, in its order.
const TOOLS: [&str; 3] = ["bare", "tracer", "raw"];

pub(crate) fn run(ws: &Workspace, kernels: &[String], reps: usize, quick: bool) -> Result<()> {
    let tracer = build::run(ws, true)?;
    let scratch = ws.target_dir.join("bench");
    fs::create_dir_all(&scratch)?;
    let driver = build_driver(&scratch)?;
    let scale = if quick { SCALE / 4.0 } else { SCALE };
    let reps = if quick { 2 } else { reps.clamp(1, 3) };
    // One line per workload for the guest: its key (the driver's mode) and
    // the driver's arguments; the key names the row back here.
    let all = workloads(scale);
    let list: String = all.iter().map(|w| w.args.join(" ") + "\n").collect();
    let mut failed = Vec::new();
    for kernel in kernels {
        let lines = guest::run(
            ws,
            &Script {
                kernel,
                script: "bench.sh",
                args: vec![
                    tracer.to_string_lossy().into_owned(),
                    driver.to_string_lossy().into_owned(),
                    reps.to_string(),
                    "/vm/workloads".into(),
                ],
                programs: vec![tracer.clone(), driver.clone()],
                data: vec![("vm/workloads".into(), list.clone())],
                timeout: Duration::from_secs(3600),
            },
        )?;
        let names: Vec<(String, &str)> =
            std::iter::once(("true".to_string(), "start-up (`-- /bin/true`)"))
                .chain(all.iter().map(|w| (w.args[0].clone(), w.name)))
                .collect();
        let runs = parse(&lines);
        let text = render(kernel, &names, &runs, reps);
        println!("{text}");
        let at = scratch.join(format!("vm-{kernel}.md"));
        fs::write(&at, &text)?;
        eprintln!("xtask: results also in {}", at.display());
        if !runs.done {
            failed.push(format!("{kernel}: the guest did not finish the bench"));
        }
        failed.extend(
            runs.timed
                .iter()
                .filter(|t| t.status != 0)
                .map(|t| format!("{kernel}: {} under {} exited {}", t.key, t.tool, t.status)),
        );
    }
    if !failed.is_empty() {
        bail!("guest bench: {}", failed.join("; "));
    }
    Ok(())
}

struct Timed {
    key: String,
    tool: String,
    secs: f64,
    status: i32,
}

#[derive(Default)]
struct GuestRuns {
    kernel: Option<String>,
    timed: Vec<Timed>,
    /// (key, tool, trailer line) of the `--program-stats` runs.
    stats: Vec<(String, String, String)>,
    done: bool,
}

fn parse(lines: &[String]) -> GuestRuns {
    let mut runs = GuestRuns::default();
    for line in lines {
        let Some(rest) = line.split_once("@@tracer-vm ").map(|(_, r)| r) else {
            continue;
        };
        let mut f = rest.splitn(4, ' ');
        match (f.next(), f.next(), f.next(), f.next()) {
            (Some("kernel"), Some(k), ..) => runs.kernel = Some(k.to_string()),
            (Some("bench-done"), ..) => runs.done = true,
            (Some("bench"), Some(key), Some(tool), Some(tail)) => {
                let mut t = tail.split(' ');
                let ns: Option<u64> = t.next().and_then(|n| n.parse().ok());
                let status: Option<i32> = t.next().and_then(|n| n.parse().ok());
                if let (Some(ns), Some(status)) = (ns, status) {
                    runs.timed.push(Timed {
                        key: key.into(),
                        tool: tool.into(),
                        secs: ns as f64 / 1e9,
                        status,
                    });
                }
            }
            (Some("stats"), Some(key), Some(tool), Some(trailer)) => {
                runs.stats.push((key.into(), tool.into(), trailer.into()))
            }
            _ => {}
        }
    }
    runs
}

impl GuestRuns {
    /// The median seconds of `key` under `tool` (NaN: no successful run).
    fn median(&self, key: &str, tool: &str) -> f64 {
        let mut secs: Vec<f64> = self
            .timed
            .iter()
            .filter(|t| t.key == key && t.tool == tool && t.status == 0)
            .map(|t| t.secs)
            .collect();
        median(&mut secs)
    }

    fn trailer(&self, key: &str, tool: &str) -> Option<&str> {
        self.stats
            .iter()
            .find(|(k, t, _)| k == key && t == tool)
            .map(|(_, _, line)| line.as_str())
    }
}

/// The guest's tables: wall times and ratios, then ns per program run.
fn render(kernel: &str, names: &[(String, &str)], runs: &GuestRuns, reps: usize) -> String {
    let mut out = vec![
        format!(
            "## Guest bench: Debian {kernel} (`{}`, TCG), median of {reps}",
            runs.kernel.as_deref().unwrap_or("did not boot")
        ),
        String::new(),
        "Each workload is timed from inside the traced tree (`benchdrv time`: tracer's \
         start-up and teardown outside the clock), so its ratio is tool/bare beyond start-up; \
         the start-up row times `tracer record -- /bin/true` whole. \"as attached\": fentry \
         where the kernel takes it; \"raw_syscalls\": `--disable-hook kill_syscalls:fentry \
         --disable-hook last_words:fentry`."
            .into(),
        String::new(),
        "| workload | bare | tracer as attached | ×beyond | raw_syscalls rung | ×beyond | events | lost |"
            .into(),
        "| --- | --- | --- | --- | --- | --- | --- | --- |".into(),
    ];
    for (key, name) in names {
        let bare = runs.median(key, "bare");
        let mut cells = vec![name.to_string(), format!("{bare:.3} s")];
        for tool in &TOOLS[1..] {
            let t = runs.median(key, tool);
            cells.push(format!("{t:.3} s"));
            cells.push(match key.as_str() {
                "true" => "–".into(),
                _ => format!("{:.2}×", t / bare),
            });
        }
        let counts = runs.trailer(key, "tracer").and_then(trailer_counts);
        cells.push(counts.as_ref().map_or("–".into(), |c| c.events.to_string()));
        cells.push(counts.map_or("–".into(), |c| c.lost_total().to_string()));
        out.push(format!("| {} |", cells.join(" | ")));
    }
    let rows: Vec<program_time::Row> = names
        .iter()
        .flat_map(|(key, name)| {
            TOOLS[1..].iter().filter_map(move |tool| {
                let line = runs.trailer(key, tool)?;
                let rung = if *tool == "raw" {
                    "raw_syscalls"
                } else {
                    "as attached"
                };
                Some((format!("{name}, {rung}"), program_time::of_trailer(line)))
            })
        })
        .collect();
    out.push(String::new());
    out.extend(program_time::table(&rows));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_guests_lines_into_ratios_and_ns_per_run() {
        let trailer = r#"{"type":"trailer","events":7,"ringbuf_full":1,"program_stats":[{"program":"kill_fentry_kill","runs":10,"run_ns":500}]}"#;
        let log: Vec<String> = [
            "noise before",
            "@@tracer-vm kernel 6.12.0-test",
            "@@tracer-vm bench true bare 1000000 0",
            "@@tracer-vm bench true tracer 201000000 0",
            "@@tracer-vm bench true raw 201000000 0",
            "@@tracer-vm bench signal bare 1000000000 0",
            "@@tracer-vm bench signal tracer 1400000000 0",
            "@@tracer-vm bench signal tracer 1200000000 0",
            "@@tracer-vm bench signal tracer 9900000000 1",
            "@@tracer-vm bench signal raw 1800000000 0",
            &format!("@@tracer-vm stats signal tracer {trailer}"),
            "@@tracer-vm bench-done",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let runs = parse(&log);
        assert!(runs.done);
        assert_eq!(runs.kernel.as_deref(), Some("6.12.0-test"));
        // The failed run (status 1) is no sample.
        assert!((runs.median("signal", "tracer") - 1.3).abs() < 1e-9);
        let names = vec![
            ("true".to_string(), "start-up (`-- /bin/true`)"),
            ("signal".to_string(), "signal storm"),
        ];
        let text = render("6.12", &names, &runs, 3);
        assert!(
            text.contains("| signal storm | 1.000 s | 1.300 s | 1.30× | 1.800 s | 1.80× | 7 | 1 |"),
            "{text}"
        );
        assert!(text.contains("| signal storm, as attached |"), "{text}");
        assert!(text.contains(" 50 (10) "), "{text}");
    }
}
