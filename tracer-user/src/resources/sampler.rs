//! One sample of the run's resources, read from the kernel's own counters:
//! the memory cgroup the command is in (v2, else v1), its CPU time and
//! throttling, pressure (the cgroup's own on v2, else the machine's), and
//! the largest processes of the run. A fixed handful of small sysfs reads
//! plus one /proc/PID/stat per process of the run (at most `MAX_READ`): no
//! walk of /proc, no thread. The runtime calls it from its event loop.
use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use super::cgroup::{self, Membership, Mounts};
use crate::eventlog::{
    CpuSample, MemorySample, Pressure, ProcKey, ProcRss, Resources, Stamp, Task, MAX_READ,
    TOP_PROCESSES,
};

/// The cadence: once a second, four times a second once the cgroup's
/// usage is within `NEAR` of its limit (the last seconds before an OOM
/// kill are where the curve turns).
pub const EVERY: Duration = Duration::from_secs(1);
pub const NEAR_EVERY: Duration = Duration::from_millis(250);
const NEAR: f64 = 0.8;
/// Limits are re-read up the hierarchy every this many samples.
const LIMIT_WALK_EVERY: u32 = 10;

/// What the sampler follows: the command's cgroups (it may move itself,
/// as a job joining a limited memcg does), or a daemon's watched cgroup.
#[derive(Debug, Clone)]
pub enum Follow {
    /// A child of tracer's own, not yet reaped: its pid is its own.
    Process(u32),
    Dir(PathBuf),
}

#[derive(Debug, Clone, Default)]
struct Where {
    dir: Option<PathBuf>,
    label: Option<String>,
    v2: bool,
}

pub struct Sampler {
    follow: Follow,
    mounts: Mounts,
    membership: Option<Membership>,
    memory: Where,
    /// The ancestor (or itself) holding the lowest limit, and its label.
    limit_at: Option<(PathBuf, String)>,
    cpu_usage: Where,
    throttle: Where,
    pressure: Where,
    samples: u32,
    /// The followed process was reaped: its pid is no longer its own.
    gone: bool,
    near: bool,
    page: u64,
}

impl Sampler {
    pub fn new(follow: Follow) -> Sampler {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        Self::with_mounts(follow, cgroup::mounts(&mountinfo))
    }

    /// A sampler of the hierarchies `mounts` names (a test's tree).
    pub fn with_mounts(follow: Follow, mounts: Mounts) -> Sampler {
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
            .ok()
            .flatten()
            .map_or(4096, |p| p as u64);
        Sampler {
            follow,
            mounts,
            membership: None,
            memory: Where::default(),
            limit_at: None,
            cpu_usage: Where::default(),
            throttle: Where::default(),
            pressure: Where::default(),
            samples: 0,
            gone: false,
            near: false,
            page,
        }
    }

    /// The followed process was reaped: its pid may be another's now, so
    /// its cgroups are not read again (what it was in stays the run's).
    pub fn gone(&mut self) {
        self.gone = true;
    }

    /// When to sample next.
    pub fn interval(&self) -> Duration {
        if self.near {
            NEAR_EVERY
        } else {
            EVERY
        }
    }

    /// A sample now (its stamp left for the log writer), `tracked` being
    /// the run's processes.
    pub fn sample(&mut self, tracked: &[ProcKey]) -> Resources {
        self.resolve();
        if self.samples.is_multiple_of(LIMIT_WALK_EVERY) {
            self.limit_at = self
                .memory
                .dir
                .as_deref()
                .and_then(|d| self.lowest_limit(d));
        }
        self.samples = self.samples.wrapping_add(1);
        let memory = self.memory();
        self.near = memory
            .as_ref()
            .and_then(|m| Some(m.usage as f64 >= NEAR * m.limit? as f64))
            .unwrap_or(false);
        let (top, unread) = self.top(tracked);
        let cpu = self.cpu();
        Resources {
            at: Stamp::default(),
            memory_cgroup: memory.as_ref().and(self.memory.label.clone()),
            memory,
            // Named only when CPU time was read: a throttling cgroup with
            // no readable usage once labelled a sample whose CPU was never
            // read, and the reports drew its zeros as a flat CPU line.
            cpu_cgroup: cpu.as_ref().and(
                self.throttle
                    .label
                    .clone()
                    .or_else(|| self.cpu_usage.label.clone()),
            ),
            cpu,
            pressure_from: self.pressure.label.clone(),
            pressure: self.pressure(),
            top,
            unread,
        }
    }

    /// Where each figure is read, again when the followed process moved.
    fn resolve(&mut self) {
        if self.gone {
            return;
        }
        let membership = match &self.follow {
            // Gone or exiting: what it was in is still the run's. On a v1
            // hierarchy an exiting task reads as in the root cgroup
            // (kernel/cgroup/cgroup.c, proc_cgroup_show: "all zombie tasks
            // show up as belonging to the root cgroup"), so a sample
            // between an OOM kill and the reap once moved the run to
            // `v1:/` (CI's run, at load). Its flags are read after its
            // cgroups: PF_EXITING is set before the kernel shows the root,
            // and stays.
            Follow::Process(pid) => match fs::read_to_string(format!("/proc/{pid}/cgroup")) {
                Ok(text) if !exiting(*pid) => cgroup::membership(&text),
                _ => return,
            },
            Follow::Dir(dir) => self.membership_of(dir),
        };
        if self.membership.as_ref() == Some(&membership) {
            return;
        }
        let m = &self.mounts;
        let v2 = at(m.v2.as_ref(), membership.v2.as_deref(), "v2", true);
        let has = |w: &Where, f: &str| w.dir.as_ref().is_some_and(|d| d.join(f).exists());
        let v1 = |mount, path: &Option<String>| at(mount, path.as_deref(), "v1", false);
        self.memory = match has(&v2, "memory.current") {
            true => v2.clone(),
            false => v1(m.memory.as_ref(), &membership.v1_memory),
        };
        self.cpu_usage = match has(&v2, "cpu.stat") {
            true => v2.clone(),
            false => v1(m.cpuacct.as_ref(), &membership.v1_cpuacct),
        };
        self.throttle = match has(&v2, "cpu.max") {
            true => v2.clone(),
            false => v1(m.cpu.as_ref(), &membership.v1_cpu),
        };
        self.pressure = match has(&v2, "memory.pressure") {
            true => v2,
            false => Where {
                dir: Some(PathBuf::from("/proc/pressure")),
                label: Some("system".into()),
                v2: true,
            },
        };
        self.limit_at = self
            .memory
            .dir
            .as_deref()
            .and_then(|d| self.lowest_limit(d));
        self.membership = Some(membership);
    }

    /// A watched directory as a membership: the hierarchy whose mount it
    /// is under.
    fn membership_of(&self, dir: &Path) -> Membership {
        let rel = |mount: Option<&cgroup::Mount>| {
            let mount = mount?;
            let rest = dir.strip_prefix(&mount.dir).ok()?;
            let root = mount.root.trim_end_matches('/');
            Some(format!("{root}/{}", rest.display()))
        };
        Membership {
            v2: rel(self.mounts.v2.as_ref()),
            v1_memory: rel(self.mounts.memory.as_ref()),
            v1_cpu: rel(self.mounts.cpu.as_ref()),
            v1_cpuacct: rel(self.mounts.cpuacct.as_ref()),
        }
    }

    /// The ancestor of `dir` (or itself) with the lowest hard limit, up
    /// to its mount (at most 32 levels).
    fn lowest_limit(&self, dir: &Path) -> Option<(PathBuf, String)> {
        let file = if self.memory.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        let mut best: Option<(u64, &Path)> = None;
        for d in dir.ancestors().take(32) {
            let Some(l) = read(d, file).and_then(|t| cgroup::limit(&t)) else {
                if !d.join(file).exists() {
                    break;
                }
                continue;
            };
            if best.is_none_or(|(b, _)| l < b) {
                best = Some((l, d));
            }
        }
        let (_, d) = best?;
        let own = self.memory.dir.as_deref() == Some(d);
        let label = match own {
            true => self.memory.label.clone()?,
            false => label_of(d, &self.memory)?,
        };
        Some((d.to_path_buf(), label))
    }

    fn memory(&self) -> Option<MemorySample> {
        let dir = self.memory.dir.as_deref()?;
        let v2 = self.memory.v2;
        let usage = read(dir, pick(v2, "memory.current", "memory.usage_in_bytes"))
            .and_then(|t| cgroup::number(&t))?;
        let stat = read(dir, "memory.stat").unwrap_or_default();
        let (anon, file) = cgroup::anon_file(&stat, v2);
        let swap = match v2 {
            true => read(dir, "memory.swap.current").and_then(|t| cgroup::number(&t)),
            false => read(dir, "memory.memsw.usage_in_bytes")
                .and_then(|t| cgroup::number(&t))
                .map(|sw| sw.saturating_sub(usage)),
        };
        let (limit_dir, limit_at) = match &self.limit_at {
            Some((d, label)) => (d.as_path(), Some(label.clone())),
            None => (dir, None),
        };
        let limit = limit_at.as_ref().and(
            read(limit_dir, pick(v2, "memory.max", "memory.limit_in_bytes"))
                .and_then(|t| cgroup::limit(&t)),
        );
        let events = match v2 {
            true => cgroup::v2_events(&read(limit_dir, "memory.events").unwrap_or_default()),
            false => cgroup::v1_events(
                &read(limit_dir, "memory.failcnt").unwrap_or_default(),
                &read(limit_dir, "memory.oom_control").unwrap_or_default(),
            ),
        };
        Some(MemorySample {
            usage,
            limit,
            limit_at: limit_at.filter(|l| Some(l) != self.memory.label.as_ref()),
            high: v2
                .then(|| read(dir, "memory.high").and_then(|t| cgroup::limit(&t)))
                .flatten(),
            anon,
            file,
            swap,
            events,
        })
    }

    fn cpu(&self) -> Option<CpuSample> {
        let usage_us = match (&self.cpu_usage.dir, self.cpu_usage.v2) {
            (Some(d), true) => cgroup::v2_cpu(&read(d, "cpu.stat")?).0?,
            (Some(d), false) => read(d, "cpuacct.usage").and_then(|t| cgroup::number(&t))? / 1000,
            (None, _) => return None,
        };
        let mut cpu = CpuSample {
            usage_us,
            ..Default::default()
        };
        if let Some(d) = &self.throttle.dir {
            let stat = read(d, "cpu.stat").unwrap_or_default();
            (cpu.throttling, (cpu.quota_us, cpu.period_us)) = match self.throttle.v2 {
                true => (
                    cgroup::v2_cpu(&stat).1,
                    cgroup::v2_quota(&read(d, "cpu.max").unwrap_or_default()),
                ),
                false => (
                    cgroup::v1_throttling(&stat),
                    cgroup::v1_quota(
                        &read(d, "cpu.cfs_quota_us").unwrap_or_default(),
                        &read(d, "cpu.cfs_period_us").unwrap_or_default(),
                    ),
                ),
            };
        }
        Some(cpu)
    }

    fn pressure(&self) -> Option<Pressure> {
        let d = self.pressure.dir.as_deref()?;
        let system = self.pressure.label.as_deref() == Some("system");
        let file = |r: &str| match system {
            true => read(d, r),
            false => read(d, &format!("{r}.pressure")),
        };
        let p = Pressure {
            memory: file("memory").and_then(|t| cgroup::pressure(&t)),
            cpu: file("cpu").and_then(|t| cgroup::pressure(&t)),
            io: file("io").and_then(|t| cgroup::pressure(&t)),
        };
        (p != Pressure::default()).then_some(p)
    }

    /// The largest processes of the run by RSS: one /proc/PID/stat each,
    /// kept only if its start time is the tracked process's.
    fn top(&self, tracked: &[ProcKey]) -> (Vec<ProcRss>, u64) {
        let mut all: Vec<ProcRss> = tracked
            .iter()
            .take(MAX_READ)
            .filter_map(|&k| {
                let (comm, start_ticks, rss_pages) = stat_of(k.pid)?;
                crate::resources::same_start(start_ticks, k.start).then(|| ProcRss {
                    task: Task {
                        pid: k.pid,
                        tid: k.pid,
                        start: k.start,
                        comm: Some(comm),
                    },
                    rss: rss_pages * self.page,
                })
            })
            .collect();
        all.sort_by(|a, b| b.rss.cmp(&a.rss).then(a.task.pid.cmp(&b.task.pid)));
        all.truncate(TOP_PROCESSES);
        all.retain(|p| p.rss > 0);
        (all, tracked.len().saturating_sub(MAX_READ) as u64)
    }
}

fn pick(v2: bool, a: &'static str, b: &'static str) -> &'static str {
    if v2 {
        a
    } else {
        b
    }
}

/// Where cgroup `path` is in `mount`, labelled `v1:/path` or `v2:/path`.
fn at(mount: Option<&cgroup::Mount>, path: Option<&str>, v: &str, v2: bool) -> Where {
    let dir = path.and_then(|p| mount?.dir_of(p)).filter(|d| d.is_dir());
    Where {
        label: dir.as_ref().and(path).map(|p| format!("{v}:{p}")),
        dir,
        v2,
    }
}

/// The label of `d`, an ancestor of `w`'s directory: `w`'s path cut by as
/// many components.
fn label_of(d: &Path, w: &Where) -> Option<String> {
    let own = w.dir.as_deref()?;
    let up = own
        .components()
        .count()
        .checked_sub(d.components().count())?;
    let label = w.label.as_deref()?;
    let (v, path) = label.split_once(':')?;
    let mut parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    parts.truncate(parts.len().checked_sub(up)?);
    Some(format!("{v}:/{}", parts.join("/")))
}

/// A small kernel file, whole (a failed read is an absent figure).
fn read(dir: &Path, name: &str) -> Option<String> {
    fs::read_to_string(dir.join(name)).ok()
}

/// Exiting (`PF_EXITING`), a zombie or gone.
fn exiting(pid: u32) -> bool {
    const PF_EXITING: u32 = 0x4;
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .map_or(true, |s| {
            s.flags & PF_EXITING != 0 || matches!(s.state, 'Z' | 'X')
        })
}

/// comm, start time (ticks) and RSS (pages) from /proc/PID/stat. The comm
/// is the process's own text: the fields are counted after its last `)`.
fn stat_of(pid: u32) -> Option<(String, u64, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // Fields 3.. from `state`: starttime is field 22, rss field 24.
    let start = rest.get(19)?.parse().ok()?;
    let rss = rest.get(21)?.parse().ok()?;
    Some((comm, start, rss))
}

#[cfg(test)]
#[path = "sampler_tests.rs"]
mod tests;
