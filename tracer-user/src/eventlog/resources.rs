//! The `resources` record: one sample of the run's cgroup (memory, CPU,
//! pressure) and its largest processes (docs/event-log.md, "resources").
//! Counters are the kernel's own, cumulative as it keeps them: a reader
//! takes differences between samples, so a lost or late sample costs
//! resolution, never a wrong rate.
use serde::{Deserialize, Serialize};

use super::schema::{is_zero_u64, Stamp, Task};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Resources {
    #[serde(flatten)]
    pub at: Stamp,
    /// The memory cgroup read: `v1:/path` or `v2:/path` (below its mount).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_cgroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemorySample>,
    /// The cgroup whose CPU time was read, as `memory_cgroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_cgroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuSample>,
    /// Where the pressure figures come from: `v2:/path` (the cgroup's
    /// own) or `system` (`/proc/pressure`, the whole machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pressure: Option<Pressure>,
    /// The run's largest processes by RSS, largest first (at most
    /// [`TOP_PROCESSES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<ProcRss>,
    /// Processes of the run whose RSS was not read this time (past
    /// [`MAX_READ`]).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub unread: u64,
}

/// The largest processes kept in a sample.
pub const TOP_PROCESSES: usize = 8;
/// Processes whose RSS one sample reads, at most.
pub const MAX_READ: usize = 256;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct MemorySample {
    /// Bytes charged to the cgroup (v2 `memory.current`, v1
    /// `memory.usage_in_bytes`).
    pub usage: u64,
    /// The lowest hard limit of the cgroup and its ancestors, when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Where that limit is set (`v1:/path`, `v2:/path`), when not the
    /// cgroup itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_at: Option<String>,
    /// v2 `memory.high`, when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<u64>,
    /// Anonymous memory (heap, stacks) in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anon: Option<u64>,
    /// Page cache in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<u64>,
    /// Swapped out, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<u64>,
    /// Cumulative event counts of the cgroup that holds the limit.
    #[serde(default)]
    pub events: MemoryEvents,
}

/// v2 `memory.events`; on v1 `max` is `memory.failcnt` and `oom_kill`
/// `memory.oom_control`'s (v1 has no `high`; `oom` is `under_oom`, 0 or 1).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct MemoryEvents {
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub high: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub max: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub oom: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub oom_kill: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CpuSample {
    /// CPU time used, µs, cumulative.
    pub usage_us: u64,
    /// Enforcement periods elapsed, periods throttled, and the time
    /// throttled (µs), cumulative; absent without a CPU controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttling: Option<Throttling>,
    /// The quota per period, µs, when one is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_us: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_us: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Throttling {
    pub periods: u64,
    pub throttled: u64,
    pub throttled_us: u64,
}

/// Pressure stall totals (µs, cumulative): time some task, or every task,
/// of the scope waited on the resource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Pressure {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Stall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Stall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<Stall>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Default)]
pub struct Stall {
    pub some_us: u64,
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub full_us: u64,
}

/// One process's resident memory: its identity checked against /proc.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProcRss {
    pub task: Task,
    /// Resident bytes (anonymous, file and shared).
    pub rss: u64,
}
