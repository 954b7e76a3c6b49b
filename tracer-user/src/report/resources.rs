//! The run's resources in the reports: report.json's `resources` (the
//! curve downsampled, the largest processes, each test's growth, the last
//! minute), report.md's section (sparklines and a table), the OOM
//! certificate's "how memory got there" and a timeout's "was it starved".
use std::fmt::Write as _;

use serde::Serialize;

use super::cells::code;

use crate::{
    analysis::{wording as w, TestMemory},
    model::Model,
    resources::{
        story::{self, LastMinute, MemoryGrowth, RssSpan},
        Curve, Point,
    },
    text::markdown as md,
};

/// Processes listed by their peak RSS.
const PROCESSES: usize = 8;

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ResourcesReport {
    /// Samples in the log.
    pub samples: u64,
    /// The memory cgroup sampled (`v1:/path`, `v2:/path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_cgroup: Option<String>,
    /// The cgroup whose CPU time and throttling were sampled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_cgroup: Option<String>,
    /// Where pressure was read: `v2:/path`, or `system` (the machine's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressure_from: Option<String>,
    /// The memory limit at the last sample, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// The highest usage sampled, bytes.
    pub peak_bytes: u64,
    /// The whole run, at most 256 points (each the peak of the samples it
    /// merges).
    pub series: Vec<Point>,
    /// The largest processes by peak RSS.
    pub processes: Vec<ProcessPeak>,
    /// Each test's growth of its worker's RSS, the largest first.
    pub tests: Vec<TestMemory>,
    /// The run's last minute: throttling, CPU and pressure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_minute: Option<LastMinute>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ProcessPeak {
    /// Its pid.
    pub pid: u32,
    /// Its start time: with `pid`, its identity.
    pub start: u64,
    /// Its name (`comm`).
    pub comm: String,
    /// Its highest RSS sampled, bytes.
    pub peak_bytes: u64,
    /// When its peak was sampled (the log's `t`).
    pub peak_t: u64,
    /// Its RSS over time as `[t, bytes]`, at most 256 points.
    pub series: Vec<(u64, u64)>,
}

/// `tests`: each test's growth, as the run's analysis has it.
pub(super) fn collect(model: &Model, tests: Vec<TestMemory>) -> Option<ResourcesReport> {
    let last = model.resources.recent.back()?;
    // The command's end, or the last sample (a run still going).
    let root_end = model
        .root
        .and_then(|k| model.proc(k))
        .and_then(|p| p.end.as_ref())
        .map(|e| e.t);
    let end = root_end.unwrap_or(last.at.t).min(last.at.t);
    collect_parts(&model.resources, end, tests)
}

/// The section from its parts: the curve, the time its last minute ends
/// at, each test's growth (a daemon keeps them look by look: its reports
/// come from no model of the whole run).
pub fn collect_parts(c: &Curve, end: u64, mut tests: Vec<TestMemory>) -> Option<ResourcesReport> {
    tests.truncate(crate::analysis::test_memory::TESTS);
    let last = c.recent.back()?;
    let mut processes: Vec<ProcessPeak> = c
        .procs
        .iter()
        .map(|(k, p)| ProcessPeak {
            pid: k.pid,
            start: k.start,
            comm: p.comm.clone(),
            peak_bytes: p.peak.1,
            peak_t: p.peak.0,
            series: p.points.clone(),
        })
        .collect();
    processes.sort_by(|a, b| b.peak_bytes.cmp(&a.peak_bytes).then(a.pid.cmp(&b.pid)));
    processes.truncate(PROCESSES);
    Some(ResourcesReport {
        samples: c.samples,
        memory_cgroup: last.memory_cgroup.clone(),
        // The last sample that read CPU time: one read at the end without
        // it (the job's cgroup gone) does not unsay the curve.
        cpu_cgroup: c.recent.iter().rev().find_map(|r| r.cpu_cgroup.clone()),
        pressure_from: last.pressure_from.clone(),
        limit_bytes: last.memory.as_ref().and_then(|m| m.limit),
        peak_bytes: c.history.iter().map(|p| p.memory).max().unwrap_or(0),
        series: c.history.clone(),
        processes,
        tests,
        last_minute: story::last_minute(c, end),
    })
}

/// A test's RSS over its window, start → peak → end: "1.1 GiB → 3.9 GiB
/// → 2 GiB".
pub(super) fn rss_span(r: &RssSpan) -> String {
    format!(
        "{} → {} → {}",
        w::bytes(r.start_bytes),
        w::bytes(r.peak_bytes),
        w::bytes(r.end_bytes)
    )
}

/// The OOM certificate's row: "1.1 GiB → 3.9 GiB in the last 20 s (limit
/// 4 GiB; at its limit from 3 s before the kill); the largest: `x` 2.7
/// GiB (+2.5 GiB), running `test`".
pub(super) fn growth_phrase(g: &MemoryGrowth) -> String {
    let mut s = format!(
        "{} → {} in the last {} s",
        w::bytes(g.from_bytes),
        w::bytes(g.to_bytes),
        g.over_ms.div_ceil(1000)
    );
    // Well below the limit at the last sample: what killed it came after.
    if let Some(l) = g.limit_bytes.filter(|&l| g.last_bytes < l / 10 * 8) {
        let _ = write!(
            s,
            ", then a spike to its {} limit within {} (after the last sample, at {})",
            w::bytes(l),
            seconds(g.last_sample_ms),
            w::bytes(g.last_bytes)
        );
    }
    let mut facts = Vec::new();
    if let Some(l) = g.limit_bytes {
        facts.push(format!("limit {}", w::bytes(l)));
    }
    if let Some(ms) = g.first_at_limit_ms {
        facts.push(format!("at its limit from {} before the kill", seconds(ms)));
    }
    if let Some(ms) = g.first_over_high_ms {
        facts.push(format!("over memory.high from {} before", seconds(ms)));
    }
    if !facts.is_empty() {
        let _ = write!(s, " ({})", facts.join("; "));
    }
    if let Some(l) = &g.largest {
        let _ = write!(
            s,
            "; the largest: {} (pid {}) {}",
            code(&l.comm),
            l.pid,
            w::bytes(l.rss_bytes)
        );
        if l.grew_bytes > 0 {
            let _ = write!(s, " (+{})", w::bytes(l.grew_bytes));
        }
        if let Some(t) = &l.test {
            let _ = write!(s, ", running {}", code(t));
        }
    }
    s
}

fn seconds(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms} ms"),
        _ => format!("{:.1} s", ms as f64 / 1000.0),
    }
}

/// A short clause for a timeout's verdict: only when it was starved.
pub(super) fn starved_clause(m: &LastMinute) -> Option<String> {
    if !m.starved() {
        return None;
    }
    Some(match m.throttled_periods_pct {
        Some(p) if m.throttled() => format!("CPU-throttled in {p}% of its last minute"),
        _ => "under pressure in its last minute".to_string(),
    })
}

/// The last minute in one sentence: throttling, CPU used, pressure.
pub(super) fn last_minute_phrase(m: &LastMinute) -> String {
    let mut parts = Vec::new();
    match (m.throttled_periods_pct, m.throttled_ms) {
        (Some(p), Some(ms)) if p > 0 => parts.push(format!(
            "throttled in {p}% of its CPU periods ({} throttled{})",
            seconds(ms),
            m.quota_pct
                .map(|q| format!(", quota {:.2} CPU", f64::from(q) / 100.0))
                .unwrap_or_default()
        )),
        (Some(_), _) => parts.push("not throttled".into()),
        (None, _) => {}
    }
    if let Some(c) = m.cpu_pct {
        parts.push(format!("used {:.2} CPU", f64::from(c) / 100.0));
    }
    let stalls: Vec<String> = [
        ("CPU", m.cpu_pressure_pct),
        ("memory", m.memory_pressure_pct),
        ("I/O", m.io_pressure_pct),
    ]
    .iter()
    .filter_map(|(r, p)| p.map(|p| format!("{r} {p}%")))
    .collect();
    if !stalls.is_empty() {
        let whose = match m.pressure_from.as_deref() {
            Some("system") => " (the whole machine's)",
            _ => "",
        };
        parts.push(format!("stalled on {}{whose}", stalls.join(", ")));
    }
    format!(
        "over its last {}: {}",
        seconds(m.over_ms),
        if parts.is_empty() {
            "nothing sampled".to_string()
        } else {
            parts.join("; ")
        }
    )
}

/// What report.md and report.html say in place of a CPU curve when no CPU
/// cgroup of the run was read (`cpu_cgroup` absent: the points' `cpu_us`
/// are 0 and mean nothing).
pub(super) const CPU_NOT_SAMPLED: &str = "CPU: not sampled (no CPU cgroup of the run was readable)";

/// report.md's section: the curve as sparklines, the largest processes,
/// the tests that grew most.
pub(super) fn section(o: &mut String, r: &ResourcesReport) {
    let _ = writeln!(o, "## Resources\n");
    let cg = r.memory_cgroup.as_deref().unwrap_or("not found");
    let limit = r.limit_bytes.map_or("none".to_string(), w::bytes);
    let _ = writeln!(
        o,
        "Memory cgroup {}: peak {}, limit {limit} ({} samples).  ",
        md::code(cg),
        w::bytes(r.peak_bytes),
        r.samples
    );
    let mem: Vec<u64> = r.series.iter().map(|p| p.memory).collect();
    let top = r.limit_bytes.unwrap_or(r.peak_bytes).max(r.peak_bytes);
    let _ = writeln!(
        o,
        "memory `{}` (scale: 0 to {})  ",
        spark(&mem, top),
        w::bytes(top)
    );
    let cpu = rates(&r.series);
    if r.cpu_cgroup.is_none() {
        // A flat line at zero would say the run used no CPU: a daemon
        // watching a v1 memory cgroup has no CPU cgroup to read (its
        // hour-long soak drew "0 to 0.00 CPU").
        let _ = writeln!(o, "{CPU_NOT_SAMPLED}.  ");
    } else if let Some(&max) = cpu.iter().max() {
        let _ = writeln!(
            o,
            "CPU `{}` (scale: 0 to {:.2} CPU)  ",
            spark(&cpu, max.max(1)),
            max as f64 / 100.0
        );
    }
    if let Some(m) = &r.last_minute {
        let _ = writeln!(o, "Last minute: {}.", md::inline(&last_minute_phrase(m)));
    }
    let _ = writeln!(o);
    if !r.processes.is_empty() {
        let _ = writeln!(o, "| process | peak RSS |\n|---|---|");
        for p in &r.processes {
            let _ = writeln!(
                o,
                "| {} (pid {}) | {} |",
                code(&p.comm),
                p.pid,
                w::bytes(p.peak_bytes)
            );
        }
        let _ = writeln!(o);
    }
    if !r.tests.is_empty() {
        let _ = writeln!(
            o,
            "| test | worker | RSS start → peak → end |\n|---|---|---|"
        );
        for t in &r.tests {
            let _ = writeln!(
                o,
                "| {} | pid {} | {} |",
                code(&t.test),
                t.pid,
                md::text(&rss_span(&t.rss))
            );
        }
        let _ = writeln!(o);
    }
}

/// CPU used between points, in hundredths of a CPU.
fn rates(series: &[Point]) -> Vec<u64> {
    series
        .windows(2)
        .map(|p| {
            let dt = p[1].t.saturating_sub(p[0].t).max(1);
            p[1].cpu_us.saturating_sub(p[0].cpu_us) * 100_000 / dt
        })
        .collect()
}

/// At most 64 characters of ▁…█, each the highest of the values it covers.
fn spark(v: &[u64], top: u64) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let per = v.len().div_ceil(64).max(1);
    v.chunks(per)
        .map(|c| {
            let m = c.iter().copied().max().unwrap_or(0);
            let i = (m.saturating_mul(7) / top.max(1)).min(7) as usize;
            BARS[i]
        })
        .collect()
}

#[cfg(test)]
pub(in crate::report) mod tests {
    use super::*;

    #[test]
    fn sparklines_scale_to_the_top() {
        assert_eq!(spark(&[0, 50, 100], 100), "▁▄█");
        assert_eq!(spark(&[], 100), "");
        assert_eq!(spark(&vec![1; 300], 1).chars().count(), 60);
    }

    /// A report of two points 1 s apart, the second after half a CPU
    /// second, with `cpu_cgroup` as given.
    pub(in crate::report) fn two_points(cpu_cgroup: Option<&str>) -> ResourcesReport {
        let point = |t: u64, cpu_us: u64| Point {
            t,
            memory: 1 << 20,
            limit: None,
            cpu_us,
            throttled_us: 0,
        };
        ResourcesReport {
            samples: 2,
            memory_cgroup: Some("v1:/job".into()),
            cpu_cgroup: cpu_cgroup.map(Into::into),
            pressure_from: None,
            limit_bytes: None,
            peak_bytes: 1 << 20,
            series: vec![point(1_000_000_000, 0), point(2_000_000_000, 500_000)],
            processes: Vec::new(),
            tests: Vec::new(),
            last_minute: None,
        }
    }

    /// A run whose CPU cgroup could not be read gets no CPU line at zero,
    /// but words saying so.
    #[test]
    fn cpu_not_sampled_is_said_not_drawn_at_zero() {
        let mut md = String::new();
        section(&mut md, &two_points(None));
        assert!(md.contains("CPU: not sampled"), "{md}");
        assert!(!md.contains("CPU `"), "{md}");
        let mut md = String::new();
        section(&mut md, &two_points(Some("v2:/job")));
        assert!(md.contains("CPU `█` (scale: 0 to 0.50 CPU)"), "{md}");
        assert!(!md.contains("not sampled"), "{md}");
    }

    /// The CPU cgroup is the last one a sample read CPU time from: a last
    /// sample without it (the job's cgroup gone) keeps the curve's label;
    /// a curve that never read CPU time has none.
    #[test]
    fn the_cpu_cgroup_is_the_last_that_read_cpu_time() {
        let sample = |t: u64, cpu: bool| crate::eventlog::Resources {
            at: crate::eventlog::Stamp {
                t,
                ..Default::default()
            },
            memory_cgroup: Some("v1:/job".into()),
            memory: Some(Default::default()),
            cpu_cgroup: cpu.then(|| "v2:/job".into()),
            cpu: cpu.then(Default::default),
            pressure_from: None,
            pressure: None,
            top: Vec::new(),
            unread: 0,
        };
        let curve = |cpu: [bool; 3]| {
            let mut c = Curve::default();
            for (i, cpu) in cpu.into_iter().enumerate() {
                c.push(&sample(i as u64 * 1_000_000_000, cpu));
            }
            c
        };
        let got = |cpu| {
            collect_parts(&curve(cpu), 2_000_000_000, Vec::new())
                .unwrap()
                .cpu_cgroup
        };
        assert_eq!(got([true, true, false]).as_deref(), Some("v2:/job"));
        assert_eq!(got([false, false, false]), None);
    }

    #[test]
    fn a_starved_minute_in_words() {
        let m = LastMinute {
            over_ms: 30_000,
            cpu_pct: Some(10),
            quota_pct: Some(10),
            throttled_periods_pct: Some(97),
            throttled_ms: Some(25_500),
            ..Default::default()
        };
        assert_eq!(
            last_minute_phrase(&m),
            "over its last 30.0 s: throttled in 97% of its CPU periods (25.5 s throttled, \
             quota 0.10 CPU); used 0.10 CPU"
        );
        assert_eq!(
            starved_clause(&m).as_deref(),
            Some("CPU-throttled in 97% of its last minute")
        );
    }
}
