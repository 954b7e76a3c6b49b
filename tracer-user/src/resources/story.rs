//! What the curve says at one moment: how memory reached an OOM kill, and
//! whether the run was starved (throttled, or stalled on CPU, memory or
//! I/O) in a minute before a timeout. Figures only; the words are the
//! renderers' (`wording`, report/).
use serde::Serialize;

use super::Curve;
use crate::eventlog::{ProcKey, Resources, Stall};

/// The window a story looks back over, ns.
pub const WINDOW_NS: u64 = 60_000_000_000;

/// How the run's memory reached a kill at `t`.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct MemoryGrowth {
    /// The memory cgroup sampled (`v1:/path`, `v2:/path`).
    pub cgroup: String,
    /// The kill's time (the log's `t`).
    pub kill_t: u64,
    /// How long before the kill the window starts (its first sample), ms.
    pub over_ms: u64,
    /// Usage at the window's first sample, bytes.
    pub from_bytes: u64,
    /// The highest usage sampled in the window, bytes.
    pub to_bytes: u64,
    /// The limit, bytes, when one was set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// How long before the kill the cgroup first hit its limit (the limit's
    /// `max` event count rose; v1 `failcnt`), ms; absent if not seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_at_limit_ms: Option<u64>,
    /// Likewise for `memory.high` (v2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_over_high_ms: Option<u64>,
    /// Usage at the last sample before the kill, bytes: well below the
    /// limit this close to the kill, a spike the cadence did not see.
    pub last_bytes: u64,
    /// How long before the kill that sample was taken, ms.
    pub last_sample_ms: u64,
    /// The largest process of the run at the last sample before the kill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub largest: Option<Largest>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Largest {
    /// Its pid.
    pub pid: u32,
    /// Its start time (the log's `start`): with `pid`, its identity.
    pub start: u64,
    /// Its name (`comm`).
    pub comm: String,
    /// Its RSS at that sample, bytes.
    pub rss_bytes: u64,
    /// How much its RSS grew since the window's first sample that shows it,
    /// bytes (0 when it shrank, or was seen only at the last sample).
    pub grew_bytes: u64,
    /// The span `grew_bytes` covers: from that sample to the last, ms.
    pub grew_over_ms: u64,
    /// The test it was running then, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
}

/// The samples before `t` that a story reads: the window's first and
/// last, and every one between.
fn window(c: &Curve, t: u64) -> Option<(&Resources, &Resources, Vec<&Resources>)> {
    let all: Vec<&Resources> = c.between(t.saturating_sub(WINDOW_NS), t).collect();
    Some((*all.first()?, *all.last()?, all))
}

pub fn memory_growth(c: &Curve, t: u64) -> Option<MemoryGrowth> {
    let (_, last, all) = window(c, t)?;
    // Only the samples of the cgroup the kill's last sample read (a job
    // that joined a limited memcg was in another before).
    let all: Vec<&Resources> = all
        .into_iter()
        .filter(|r| r.memory.is_some() && r.memory_cgroup == last.memory_cgroup)
        .collect();
    let first = *all.first()?;
    let from = first.memory.as_ref()?.usage;
    let to = all
        .iter()
        .filter_map(|r| r.memory.as_ref().map(|m| m.usage))
        .max()?;
    let before = |at: Option<u64>| at.filter(|&a| a <= t).map(|a| (t - a) / 1_000_000);
    let largest = last.top.first().map(|p| {
        let key = p.task.key();
        // Its earliest sample in the window, not the window's first: one
        // absent from that sample still shows its growth. CI once put a
        // 100 MB leaker's growth at 0: the window's first sample, taken
        // as the cgroup held 256 KiB, listed no process.
        let then = all.iter().find_map(|r| {
            let q = r.top.iter().find(|q| q.task.key() == key)?;
            Some((r.at.t, q.rss))
        });
        Largest {
            pid: key.pid,
            start: key.start,
            comm: p.task.comm.clone().unwrap_or_default(),
            rss_bytes: p.rss,
            grew_bytes: then.map_or(0, |(_, rss)| p.rss.saturating_sub(rss)),
            grew_over_ms: then.map_or(0, |(at, _)| last.at.t.saturating_sub(at) / 1_000_000),
            test: None,
        }
    });
    Some(MemoryGrowth {
        cgroup: last.memory_cgroup.clone().unwrap_or_default(),
        kill_t: t,
        over_ms: (t - first.at.t) / 1_000_000,
        from_bytes: from,
        to_bytes: to,
        limit_bytes: last.memory.as_ref().and_then(|m| m.limit),
        last_bytes: last.memory.as_ref().map_or(0, |m| m.usage),
        last_sample_ms: (t - last.at.t) / 1_000_000,
        first_at_limit_ms: before(c.first_max),
        first_over_high_ms: before(c.first_high),
        largest,
    })
}

/// Was the run starved in the window before `t`?
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
pub struct LastMinute {
    /// The span the figures cover (first to last sample), ms.
    pub over_ms: u64,
    /// CPU time the cgroup used over the span, as a share of one CPU, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_pct: Option<u32>,
    /// The CPU quota, in CPUs ×100 (50 = half a CPU), when one is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quota_pct: Option<u32>,
    /// Of the quota's enforcement periods in the span, the share throttled, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled_periods_pct: Option<u32>,
    /// Time throttled in the span, ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttled_ms: Option<u64>,
    /// Share of the span some task waited for CPU, memory, I/O (PSI), %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_pressure_pct: Option<u32>,
    /// Likewise, waiting for memory (reclaim, swap-in, refaults).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_pressure_pct: Option<u32>,
    /// Likewise, waiting for I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_pressure_pct: Option<u32>,
    /// Where the pressure figures come from (`v2:/path`, or `system`: the
    /// whole machine's, not the run's alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pressure_from: Option<String>,
}

/// Throttled in at least this share of its quota's periods: starved. A
/// quota hit that often is the cgroup's own limit, whatever the span.
pub const STARVED_PCT: u32 = 10;
/// Stalled (PSI) at least this share of a span at least `STALL_SPAN_MS`
/// long: under pressure. Shorter spans are mostly the run's own start on
/// a busy machine (a 2 s hang test on a loaded 2-core host measured 10-30 %
/// CPU stall while its one process sat blocked on a socket).
pub const STALLED_PCT: u32 = 25;
pub const STALL_SPAN_MS: u64 = 10_000;

impl LastMinute {
    /// Throttled, or under pressure long enough, to name in a verdict.
    pub fn starved(&self) -> bool {
        self.throttled() || self.stalled()
    }

    pub fn throttled(&self) -> bool {
        self.throttled_periods_pct.is_some_and(|p| p >= STARVED_PCT)
    }

    pub fn stalled(&self) -> bool {
        let over = |p: Option<u32>| p.is_some_and(|p| p >= STALLED_PCT);
        self.over_ms >= STALL_SPAN_MS
            && (over(self.cpu_pressure_pct)
                || over(self.memory_pressure_pct)
                || over(self.io_pressure_pct))
    }
}

pub fn last_minute(c: &Curve, t: u64) -> Option<LastMinute> {
    let (_, b, all) = window(c, t)?;
    // Counters of one cgroup only, as the last sample read them: a job
    // that joined a quota'd cgroup was in another at its first samples,
    // whose counters are not these.
    let a = *all
        .iter()
        .find(|r| r.cpu_cgroup == b.cpu_cgroup && r.pressure_from == b.pressure_from)?;
    let span_ns = b.at.t.checked_sub(a.at.t).filter(|&s| s > 0)?;
    let span_us = span_ns / 1000;
    let pct =
        |num: u64, den: u64| (den > 0).then(|| (num.saturating_mul(100) / den).min(100) as u32);
    let (ca, cb) = (a.cpu.as_ref(), b.cpu.as_ref());
    let cpu_pct = ca
        .zip(cb)
        .map(|(x, y)| (y.usage_us.saturating_sub(x.usage_us).saturating_mul(100) / span_us) as u32);
    let throttle = ca
        .and_then(|x| x.throttling.as_ref())
        .zip(cb.and_then(|y| y.throttling.as_ref()));
    let quota_pct = cb.and_then(|y| Some((y.quota_us? * 100 / y.period_us?.max(1)) as u32));
    let stall = |f: fn(&crate::eventlog::Pressure) -> Option<Stall>| {
        let x = f(a.pressure.as_ref()?)?;
        let y = f(b.pressure.as_ref()?)?;
        pct(y.some_us.saturating_sub(x.some_us), span_us)
    };
    Some(LastMinute {
        over_ms: span_ns / 1_000_000,
        cpu_pct,
        quota_pct,
        throttled_periods_pct: throttle.and_then(|(x, y)| {
            pct(
                y.throttled.saturating_sub(x.throttled),
                y.periods.saturating_sub(x.periods),
            )
        }),
        throttled_ms: throttle.map(|(x, y)| y.throttled_us.saturating_sub(x.throttled_us) / 1000),
        cpu_pressure_pct: stall(|p| p.cpu),
        memory_pressure_pct: stall(|p| p.memory),
        io_pressure_pct: stall(|p| p.io),
        pressure_from: b.pressure.as_ref().and(b.pressure_from.clone()),
    })
}

/// A process's RSS between `from` and `to` (`t`): at the first point in
/// it, the highest, and at the last (the curve's points, each the highest
/// of what it merges).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct RssSpan {
    /// At the first sample in the span, bytes.
    pub start_bytes: u64,
    /// The highest sampled in it, bytes.
    pub peak_bytes: u64,
    /// At the last sample in it, bytes.
    pub end_bytes: u64,
}

pub fn rss_between(c: &Curve, key: ProcKey, from: u64, to: u64) -> Option<RssSpan> {
    let p = c.procs.get(&key)?;
    let pts: Vec<u64> = p
        .points
        .iter()
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, r)| *r)
        .collect();
    Some(RssSpan {
        start_bytes: *pts.first()?,
        peak_bytes: *pts.iter().max()?,
        end_bytes: *pts.last()?,
    })
}

#[cfg(test)]
#[path = "story_tests.rs"]
mod tests;
