//! The text of cgroup v1 and v2 files, pressure (PSI) files and
//! /proc/PID/cgroup, read into numbers. Pure functions of the text: the
//! sampler reads the files, the tests read fixtures of both versions.
use std::path::{Path, PathBuf};

use crate::eventlog::{MemoryEvents, Stall, Throttling};

/// `key value` lines (`memory.stat`, `cpu.stat`, `memory.events`,
/// `memory.oom_control`): the value of `key`.
pub fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// One number (`memory.current`, `memory.usage_in_bytes`).
pub fn number(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// A limit: v2 writes `max` for none; v1 writes a huge number
/// (`PAGE_COUNTER_MAX` pages, rounded), anything at or past 2^62 is none.
pub fn limit(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    t.parse::<u64>().ok().filter(|&n| n < 1 << 62)
}

/// v2 `memory.events` (not `.local`: the hierarchy's, as the kernel counts
/// a limit hit in the cgroup that has the limit).
pub fn v2_events(text: &str) -> MemoryEvents {
    MemoryEvents {
        high: keyed(text, "high").unwrap_or(0),
        max: keyed(text, "max").unwrap_or(0),
        oom: keyed(text, "oom").unwrap_or(0),
        oom_kill: keyed(text, "oom_kill").unwrap_or(0),
    }
}

/// v1: `memory.failcnt` (times the usage hit the limit) and
/// `memory.oom_control` (`under_oom`, `oom_kill`).
pub fn v1_events(failcnt: &str, oom_control: &str) -> MemoryEvents {
    MemoryEvents {
        high: 0,
        max: number(failcnt).unwrap_or(0),
        oom: keyed(oom_control, "under_oom").unwrap_or(0),
        oom_kill: keyed(oom_control, "oom_kill").unwrap_or(0),
    }
}

/// Anonymous and file memory from `memory.stat`: v2 `anon`, `file`; v1
/// the hierarchical `total_rss`, `total_cache` (the cgroup and its
/// children, as `memory.usage_in_bytes` counts them).
pub fn anon_file(stat: &str, v2: bool) -> (Option<u64>, Option<u64>) {
    match v2 {
        true => (keyed(stat, "anon"), keyed(stat, "file")),
        false => (keyed(stat, "total_rss"), keyed(stat, "total_cache")),
    }
}

/// CPU time in µs and throttling from v2 `cpu.stat` (`usage_usec` always;
/// the rest only with the cpu controller enabled).
pub fn v2_cpu(stat: &str) -> (Option<u64>, Option<Throttling>) {
    let throttling = keyed(stat, "nr_periods").map(|periods| Throttling {
        periods,
        throttled: keyed(stat, "nr_throttled").unwrap_or(0),
        throttled_us: keyed(stat, "throttled_usec").unwrap_or(0),
    });
    (keyed(stat, "usage_usec"), throttling)
}

/// v1 `cpu.stat` (`throttled_time` in ns).
pub fn v1_throttling(stat: &str) -> Option<Throttling> {
    Some(Throttling {
        periods: keyed(stat, "nr_periods")?,
        throttled: keyed(stat, "nr_throttled").unwrap_or(0),
        throttled_us: keyed(stat, "throttled_time").unwrap_or(0) / 1000,
    })
}

/// v2 `cpu.max`: `QUOTA PERIOD` in µs, `max PERIOD` for none.
pub fn v2_quota(text: &str) -> (Option<u64>, Option<u64>) {
    let mut f = text.split_whitespace();
    let quota = f.next().and_then(|q| q.parse().ok());
    let period = f.next().and_then(|p| p.parse().ok());
    (quota, quota.and(period))
}

/// v1 `cpu.cfs_quota_us` (-1 for none) and `cpu.cfs_period_us`.
pub fn v1_quota(quota: &str, period: &str) -> (Option<u64>, Option<u64>) {
    let quota = quota.trim().parse::<i64>().ok().filter(|&q| q > 0);
    (quota.map(|q| q as u64), quota.and(number(period)))
}

/// A pressure file: `some … total=N` and `full … total=M`, µs.
pub fn pressure(text: &str) -> Option<Stall> {
    let total = |kind: &str| {
        text.lines()
            .find(|l| l.starts_with(kind))?
            .split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?
            .parse::<u64>()
            .ok()
    };
    Some(Stall {
        some_us: total("some ")?,
        full_us: total("full ").unwrap_or(0),
    })
}

/// Where a process's cgroups are, from /proc/PID/cgroup.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Membership {
    /// `0::/path`.
    pub v2: Option<String>,
    /// `N:…memory…:/path`, `N:…cpu…:/path`, `N:…cpuacct…:/path`.
    pub v1_memory: Option<String>,
    pub v1_cpu: Option<String>,
    pub v1_cpuacct: Option<String>,
}

pub fn membership(text: &str) -> Membership {
    let mut m = Membership::default();
    for l in text.lines() {
        let mut f = l.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if id == "0" && ctrls.is_empty() {
            m.v2 = Some(path.to_string());
        }
        for c in ctrls.split(',') {
            let slot = match c {
                "memory" => &mut m.v1_memory,
                "cpu" => &mut m.v1_cpu,
                "cpuacct" => &mut m.v1_cpuacct,
                _ => continue,
            };
            *slot = Some(path.to_string());
        }
    }
    m
}

/// A cgroup hierarchy mounted here: its mount point and the cgroup path
/// its root shows.
#[derive(Debug, Clone, PartialEq)]
pub struct Mount {
    pub root: String,
    pub dir: PathBuf,
}

/// The mounts of cgroup2 and of the v1 hierarchies of `memory`, `cpu`
/// and `cpuacct`, from /proc/self/mountinfo (the first of each).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Mounts {
    pub v2: Option<Mount>,
    pub memory: Option<Mount>,
    pub cpu: Option<Mount>,
    pub cpuacct: Option<Mount>,
}

pub fn mounts(mountinfo: &str) -> Mounts {
    let mut m = Mounts::default();
    for line in mountinfo.lines() {
        // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPEROPTS"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(dir), Some(fstype)) = (l.get(3), l.get(4), r.first()) else {
            continue;
        };
        // mountinfo escapes spaces as \040: such paths are skipped, not guessed.
        if root.contains('\\') || dir.contains('\\') {
            continue;
        }
        let mount = Mount {
            root: root.to_string(),
            dir: PathBuf::from(dir),
        };
        let opts: Vec<&str> = r.get(2).map_or(Vec::new(), |o| o.split(',').collect());
        let slots = match *fstype {
            "cgroup2" => vec![&mut m.v2],
            "cgroup" => {
                let mut s = Vec::new();
                let has = |c: &str| opts.contains(&c);
                let (mem, cpu, acct) = (has("memory"), has("cpu"), has("cpuacct"));
                if mem {
                    s.push(&mut m.memory);
                }
                if cpu {
                    s.push(&mut m.cpu);
                }
                if acct {
                    s.push(&mut m.cpuacct);
                }
                s
            }
            _ => continue,
        };
        for slot in slots {
            slot.get_or_insert_with(|| mount.clone());
        }
    }
    m
}

impl Mount {
    /// The directory of cgroup `path` in this mount, if the mount shows it.
    pub fn dir_of(&self, path: &str) -> Option<PathBuf> {
        under_mount(&self.root, &self.dir, path)
    }
}

/// The directory of cgroup `path` in a mount of `root` at `mnt`.
pub fn under_mount(root: &str, mnt: &Path, path: &str) -> Option<PathBuf> {
    let rel = if root == "/" {
        path
    } else {
        path.strip_prefix(root)?
    };
    // A path that climbs (it never should) is not followed.
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(mnt.join(rel.trim_start_matches('/')))
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
