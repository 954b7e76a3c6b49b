//! Kernel time per program run (issue 37 item 4): each workload once more
//! under `tracer record --program-stats` (the kernel counts its programs'
//! runs and time only then: two clock reads per run, so never in the timed
//! runs), the figures from that run's trailer; the real suites' rows
//! (`suites`) the same way.
use std::{fs, path::Path, process::Command};

use anyhow::Result;

use super::{
    measure::measure,
    workloads::{Ctx, Workload},
};

/// The programs the table shows, in its column order: the process
/// lifecycle, signals, and both rungs of the syscall hooks (a program a
/// run did not attach or never ran shows `–`).
const COLUMNS: [&str; 11] = [
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
    "signal_generate",
    "kill_fentry_kill",
    "kill_fexit_kill",
    "stderr_fentry_write",
    "raw_sys_enter",
    "raw_sys_exit",
    "kill_exit",
    "crash_deliver",
];

/// One workload's programs: name, runs, ns.
pub(crate) type Row = (String, Vec<(String, u64, u64)>);

/// `w` once under `--program-stats`.
pub(crate) fn measure_one(cx: &mut Ctx, w: &Workload) -> Result<Row> {
    let dir = cx.tmp("stats");
    let argv = cx.argv(w);
    measure_cmd(&mut cx.stats_command(&argv, &dir), w.name, &dir)
}

/// `cmd`, a `Ctx::stats_command` writing into `dir`, run once: the row of
/// `name` (a workload's or a suite's).
pub(crate) fn measure_cmd(cmd: &mut Command, name: &str, dir: &Path) -> Result<Row> {
    measure(cmd)?;
    let stats = read(&dir.join("events.ndjson"));
    let _ = fs::remove_dir_all(dir);
    Ok((name.to_string(), stats))
}

/// The trailer's `program_stats` of the log at `path` (none when it has
/// no trailer).
pub(crate) fn read(path: &Path) -> Vec<(String, u64, u64)> {
    match super::logs::last_line(path) {
        Some(last) => of_trailer(&last),
        None => Vec::new(),
    }
}

/// The `program_stats` of a trailer line: (program, runs, run_ns).
pub(crate) fn of_trailer(last: &str) -> Vec<(String, u64, u64)> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(last) else {
        return Vec::new();
    };
    v["program_stats"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p["program"].as_str()?.to_string(),
                        p["runs"].as_u64()?,
                        p["run_ns"].as_u64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The table: ns per run of each program per workload, and its runs.
pub(crate) fn table(rows: &[Row]) -> Vec<String> {
    let mut out = vec![
        "## Kernel time per program run (`--program-stats`, one run each): ns per run (runs)"
            .to_string(),
        String::new(),
        format!("| workload | {} |", COLUMNS.join(" | ")),
        format!("| --- |{}", " --- |".repeat(COLUMNS.len())),
    ];
    for (name, stats) in rows {
        let cells: Vec<String> = COLUMNS
            .iter()
            .map(
                // The exec column is either of its programs (a kernel
                // before 5.17 runs `sched_process_exec_unrolled`).
                |c| match stats.iter().find(|(p, runs, _)| {
                    p.strip_suffix("_unrolled").unwrap_or(p) == *c && *runs > 0
                }) {
                    Some((_, runs, ns)) => format!("{} ({runs})", ns / runs),
                    None => "–".to_string(),
                },
            )
            .collect();
        out.push(format!("| {name} | {} |", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_trailers_figures_and_tabulates_ns_per_run() {
        let dir = std::env::temp_dir().join(format!("program-time-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let log = dir.join("events.ndjson");
        fs::write(
            &log,
            concat!(
                "{\"type\":\"header\"}\n",
                "{\"type\":\"trailer\",\"events\":1,\"program_stats\":[",
                "{\"program\":\"sched_process_exec\",\"runs\":4,\"run_ns\":4000,\"verified_insns\":9},",
                "{\"program\":\"raw_sys_enter\",\"runs\":10,\"run_ns\":900}]}\n"
            ),
        )
        .unwrap();
        let stats = read(&log);
        assert_eq!(stats.len(), 2);
        let t = table(&[("fork".to_string(), stats)]);
        let row = t.last().unwrap();
        assert!(row.starts_with("| fork | – | 1000 (4) | – |"), "{row}");
        assert!(row.contains("| 90 (10) |"), "{row}");
        assert!(read(&dir.join("absent")).is_empty());
        fs::remove_dir_all(&dir).unwrap();
    }
}
