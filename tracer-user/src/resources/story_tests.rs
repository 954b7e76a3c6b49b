use super::*;
use crate::eventlog::{
    CpuSample, MemoryEvents, MemorySample, Pressure, ProcRss, Stamp, Task, Throttling,
};

const S: u64 = 1_000_000_000;
const MIB: u64 = 1 << 20;

fn at(t: u64) -> Resources {
    Resources {
        at: Stamp {
            seq: t,
            t,
            time: String::new(),
        },
        memory_cgroup: Some("v1:/job".into()),
        memory: None,
        cpu_cgroup: None,
        cpu: None,
        pressure_from: None,
        pressure: None,
        top: Vec::new(),
        unread: 0,
    }
}

fn proc(pid: u32, rss: u64) -> ProcRss {
    ProcRss {
        task: Task {
            pid,
            tid: pid,
            start: 7,
            comm: Some(format!("w{pid}")),
        },
        rss,
    }
}

/// A leak over 90 s up to a 512 MiB limit: the window is the last 60 s,
/// the largest process is named with its growth, the first limit hit
/// is timed from the kill.
#[test]
fn growth_before_a_kill() {
    let mut c = Curve::default();
    for s in 0..=90 {
        let mut r = at(s * S);
        r.memory = Some(MemorySample {
            usage: (100 + 4 * s) * MIB,
            limit: Some(512 * MIB),
            events: MemoryEvents {
                max: s.saturating_sub(85),
                ..Default::default()
            },
            ..Default::default()
        });
        r.top = vec![proc(10, (3 * s + 5) * MIB), proc(11, 20 * MIB)];
        c.push(&r);
    }
    let kill = 90 * S + S / 2;
    let g = memory_growth(&c, kill).unwrap();
    assert_eq!(
        g.from_bytes,
        (100 + 4 * 31) * MIB,
        "the window's first sample"
    );
    assert_eq!(g.to_bytes, (100 + 4 * 90) * MIB);
    assert_eq!(g.over_ms, 59_500);
    assert_eq!(g.limit_bytes, Some(512 * MIB));
    assert_eq!(g.first_at_limit_ms, Some(4_500), "max rose at 86 s");
    let l = g.largest.unwrap();
    assert_eq!((l.pid, l.comm.as_str()), (10, "w10"));
    assert_eq!(l.rss_bytes, 275 * MIB);
    assert_eq!(l.grew_bytes, (275 - 98) * MIB);
    assert_eq!(l.grew_over_ms, 59_000, "31 s to 90 s");
    // Before any sample: nothing to say.
    assert!(memory_growth(&Curve::default(), kill).is_none());
}

/// The window's first sample lists no process (as CI once saw under load,
/// why not known): the largest one's growth counts from the first sample
/// that shows it.
#[test]
fn growth_counts_from_the_first_sample_that_shows_the_process() {
    let mut c = Curve::default();
    for s in 0..=5 {
        let mut r = at(s * S);
        r.memory = Some(MemorySample {
            usage: if s == 0 { MIB / 4 } else { 20 * s * MIB },
            limit: Some(96 * MIB),
            ..Default::default()
        });
        if s > 0 {
            r.top = vec![proc(10, 18 * s * MIB)];
        }
        c.push(&r);
    }
    let g = memory_growth(&c, 5 * S + S / 10).unwrap();
    assert_eq!(
        g.from_bytes,
        MIB / 4,
        "the window still starts at its first sample"
    );
    let l = g.largest.unwrap();
    assert_eq!(l.rss_bytes, 90 * MIB);
    assert_eq!(l.grew_bytes, (90 - 18) * MIB);
    assert_eq!(
        l.grew_over_ms, 4_000,
        "from its first sample, at 1 s, to 5 s"
    );
}

/// A quota of a tenth of a CPU, throttled in every period: starved; the
/// same run without throttling or pressure is not.
#[test]
fn a_throttled_last_minute() {
    let mut c = Curve::default();
    for s in 0..=30u64 {
        let mut r = at(s * S);
        r.cpu = Some(CpuSample {
            usage_us: s * 100_000,
            throttling: Some(Throttling {
                periods: s * 10,
                throttled: s * 10,
                throttled_us: s * 850_000,
            }),
            quota_us: Some(10_000),
            period_us: Some(100_000),
        });
        r.pressure = Some(Pressure {
            cpu: Some(Stall {
                some_us: s * 900_000,
                full_us: 0,
            }),
            ..Default::default()
        });
        r.pressure_from = Some("v2:/job".into());
        c.push(&r);
    }
    let m = last_minute(&c, 30 * S).unwrap();
    assert_eq!(m.over_ms, 30_000);
    assert_eq!(m.cpu_pct, Some(10));
    assert_eq!(m.quota_pct, Some(10));
    assert_eq!(m.throttled_periods_pct, Some(100));
    assert_eq!(m.throttled_ms, Some(25_500));
    assert_eq!(m.cpu_pressure_pct, Some(90));
    assert!(m.starved());
    let idle = LastMinute {
        cpu_pct: Some(3),
        throttled_periods_pct: Some(0),
        ..Default::default()
    };
    assert!(!idle.starved());
    // Stalls over a short span (a start on a busy machine) are no verdict;
    // over ten seconds, a quarter of the time is.
    let short = LastMinute {
        over_ms: 2_000,
        cpu_pressure_pct: Some(60),
        ..Default::default()
    };
    assert!(!short.starved());
    let long = LastMinute {
        over_ms: 30_000,
        ..short.clone()
    };
    assert!(long.starved() && !long.throttled());
    let mild = LastMinute {
        cpu_pressure_pct: Some(20),
        ..long
    };
    assert!(!mild.starved());
}

/// A job that joined its quota'd cgroup after the first samples: the
/// figures are the cgroup's own, from its first sample on, not a
/// difference with the counters of the cgroup it left.
#[test]
fn a_last_minute_counts_one_cgroup() {
    let mut c = Curve::default();
    for s in 0..=10u64 {
        let (cgroup, throttled_us, periods) = match s {
            0 | 1 => ("v1:/", 900_000_000, 5_000),
            _ => ("v1:/job", s * 90_000, s * 10),
        };
        let mut r = at(s * S);
        r.cpu_cgroup = Some(cgroup.into());
        r.cpu = Some(CpuSample {
            usage_us: s * 10_000,
            throttling: Some(Throttling {
                periods,
                throttled: periods,
                throttled_us,
            }),
            quota_us: Some(10_000),
            period_us: Some(100_000),
        });
        c.push(&r);
    }
    let m = last_minute(&c, 10 * S).unwrap();
    assert_eq!(m.over_ms, 8_000);
    assert_eq!(m.throttled_ms, Some(720));
    assert_eq!(m.throttled_periods_pct, Some(100));
    assert!(m.throttled());
}

#[test]
fn a_process_span() {
    let mut c = Curve::default();
    for (s, rss) in [(1, 10), (2, 50), (3, 30), (4, 80)] {
        let mut r = at(s * S);
        r.top = vec![proc(10, rss * MIB)];
        c.push(&r);
    }
    let key = ProcKey { pid: 10, start: 7 };
    let span = rss_between(&c, key, S, 3 * S).unwrap();
    assert_eq!(
        (span.start_bytes, span.peak_bytes, span.end_bytes),
        (10 * MIB, 50 * MIB, 30 * MIB)
    );
    assert!(rss_between(&c, key, 5 * S, 6 * S).is_none());
}
