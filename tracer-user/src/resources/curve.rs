//! A log's resource samples, kept bounded whatever the run's length: the
//! last `RECENT` samples whole (what a death's last minute is told from),
//! the whole run as at most `HISTORY` points (adjacent points merged, their
//! peaks kept, when it fills: the step doubles), and the RSS of at most
//! `PROCS` processes, each as at most `HISTORY` points likewise.
use std::collections::{BTreeMap, VecDeque};

use serde::Serialize;

use crate::eventlog::{ProcKey, Resources};

/// Ten minutes at the default cadence, 2.5 at the fine one.
pub const RECENT: usize = 600;
pub const HISTORY: usize = 256;
pub const PROCS: usize = 64;

/// One point of the run's curve: the figures of the samples it merges,
/// peaks for levels, the last value for cumulative counters.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq, Default)]
pub struct Point {
    /// The last merged sample's time, ns since boot (the log's `t`).
    pub t: u64,
    /// The highest memory usage of the merged samples, bytes.
    pub memory: u64,
    /// The memory limit, bytes, when one is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// CPU time used until `t`, µs (cumulative).
    pub cpu_us: u64,
    /// Time throttled until `t`, µs (cumulative).
    pub throttled_us: u64,
}

/// One process's RSS over time.
#[derive(Clone, Debug, Default)]
pub struct ProcCurve {
    pub comm: String,
    /// (t, rss): the highest of each merged stretch.
    pub points: Vec<(u64, u64)>,
    pub peak: (u64, u64),
    step: usize,
    pending: usize,
}

#[derive(Clone, Debug, Default)]
pub struct Curve {
    pub recent: VecDeque<Resources>,
    pub history: Vec<Point>,
    /// Samples per history point.
    step: usize,
    pending: usize,
    pub procs: BTreeMap<ProcKey, ProcCurve>,
    /// The first sample (the counters' baseline).
    pub first: Option<Resources>,
    /// Samples seen in all.
    pub samples: u64,
    /// When the limit's `max` and `high` event counts first rose, `t`.
    pub first_max: Option<u64>,
    pub first_high: Option<u64>,
}

impl Curve {
    pub fn push(&mut self, r: &Resources) {
        self.samples += 1;
        if let (Some(prev), Some(now)) = (
            self.recent.back().and_then(|p| p.memory.as_ref()),
            r.memory.as_ref(),
        ) {
            if now.events.max > prev.events.max {
                self.first_max.get_or_insert(r.at.t);
            }
            if now.events.high > prev.events.high {
                self.first_high.get_or_insert(r.at.t);
            }
        }
        self.point(r);
        for p in &r.top {
            self.proc_rss(
                p.task.key(),
                p.task.comm.as_deref().unwrap_or(""),
                r.at.t,
                p.rss,
            );
        }
        if self.first.is_none() {
            self.first = Some(r.clone());
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(r.clone());
    }

    fn point(&mut self, r: &Resources) {
        let p = Point {
            t: r.at.t,
            memory: r.memory.as_ref().map_or(0, |m| m.usage),
            limit: r.memory.as_ref().and_then(|m| m.limit),
            cpu_us: r.cpu.as_ref().map_or(0, |c| c.usage_us),
            throttled_us: r
                .cpu
                .as_ref()
                .and_then(|c| c.throttling.as_ref())
                .map_or(0, |t| t.throttled_us),
        };
        let step = self.step.max(1);
        match self.history.last_mut() {
            Some(last) if self.pending < step => {
                *last = Point {
                    memory: last.memory.max(p.memory),
                    ..p
                };
            }
            _ => {
                self.history.push(p);
                self.pending = 0;
            }
        }
        self.pending += 1;
        if self.history.len() > HISTORY {
            self.history = halve(std::mem::take(&mut self.history), |a, b| Point {
                memory: a.memory.max(b.memory),
                ..b.clone()
            });
            self.step = step * 2;
            self.pending = self.step;
        }
    }

    fn proc_rss(&mut self, key: ProcKey, comm: &str, t: u64, rss: u64) {
        if !self.procs.contains_key(&key) && self.procs.len() >= PROCS {
            // Full: a larger process replaces the smallest peak.
            let smallest = self
                .procs
                .iter()
                .min_by_key(|(_, c)| c.peak.1)
                .map(|(k, c)| (*k, c.peak.1));
            match smallest {
                Some((k, peak)) if peak < rss => {
                    self.procs.remove(&k);
                }
                _ => return,
            }
        }
        let c = self.procs.entry(key).or_default();
        if c.comm.is_empty() {
            c.comm = comm.to_string();
        }
        if rss > c.peak.1 {
            c.peak = (t, rss);
        }
        let step = c.step.max(1);
        match c.points.last_mut() {
            Some(last) if c.pending < step => *last = (t, last.1.max(rss)),
            _ => {
                c.points.push((t, rss));
                c.pending = 0;
            }
        }
        c.pending += 1;
        if c.points.len() > HISTORY {
            c.points = halve(std::mem::take(&mut c.points), |a, b| (b.0, a.1.max(b.1)));
            c.step = step * 2;
            c.pending = c.step;
        }
    }

    /// The samples whole from `from` to `to` (both `t`), oldest first.
    pub fn between(&self, from: u64, to: u64) -> impl Iterator<Item = &Resources> {
        self.recent
            .iter()
            .filter(move |r| r.at.t >= from && r.at.t <= to)
    }
}

fn halve<T: Clone>(v: Vec<T>, merge: impl Fn(&T, &T) -> T) -> Vec<T> {
    v.chunks(2)
        .map(|c| match c {
            [a, b] => merge(a, b),
            [a] => a.clone(),
            _ => unreachable!("chunks of two"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventlog::{MemorySample, ProcRss, Stamp, Task};

    fn sample(t: u64, usage: u64, rss: &[(u32, u64)]) -> Resources {
        Resources {
            at: Stamp {
                seq: t,
                t,
                time: String::new(),
            },
            memory_cgroup: None,
            memory: Some(MemorySample {
                usage,
                ..Default::default()
            }),
            cpu_cgroup: None,
            cpu: None,
            pressure_from: None,
            pressure: None,
            top: rss
                .iter()
                .map(|&(pid, rss)| ProcRss {
                    task: Task {
                        pid,
                        tid: pid,
                        start: 1,
                        comm: Some(format!("p{pid}")),
                    },
                    rss,
                })
                .collect(),
            unread: 0,
        }
    }

    /// A day at one sample a second stays within its bounds, and the
    /// peak of the whole run survives the merging.
    #[test]
    fn bounded_whatever_the_length() {
        let mut c = Curve::default();
        for i in 0..86_400u64 {
            let usage = if i == 40_000 { 9_999 } else { i % 100 };
            c.push(&sample(i, usage, &[((i % 200) as u32 + 1, i % 1000)]));
        }
        assert_eq!(c.recent.len(), RECENT);
        assert!(c.history.len() <= HISTORY && c.history.len() > HISTORY / 2);
        assert!(c.procs.len() <= PROCS);
        assert!(c.procs.values().all(|p| p.points.len() <= HISTORY));
        assert_eq!(c.history.iter().map(|p| p.memory).max(), Some(9_999));
        assert_eq!(c.history.last().unwrap().t, 86_399);
        // Points stay in time order.
        assert!(c.history.windows(2).all(|w| w[0].t < w[1].t));
    }

    #[test]
    fn first_limit_hit() {
        let mut c = Curve::default();
        let mut s = sample(1, 10, &[]);
        c.push(&s);
        s.at.t = 2;
        c.push(&s);
        s.at.t = 3;
        s.memory.as_mut().unwrap().events.max = 4;
        c.push(&s);
        s.at.t = 4;
        s.memory.as_mut().unwrap().events.max = 9;
        c.push(&s);
        assert_eq!((c.first_max, c.first_high), (Some(3), None));
    }
}
