//! An OOM kill as a certificate cites it, and a `memory.oom.group` kill.
use serde::Serialize;

use super::ProcRef;
use crate::eventlog::{Memcg, OomRss};

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct OomInfo {
    /// Sequence number of the oom event.
    pub seq: u64,
    /// Wall-clock time.
    pub time: String,
    /// The thread the kernel named as victim.
    pub victim_tid: u32,
    /// The memory cgroup whose limit was hit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memcg: Option<Memcg>,
    /// The victim's memory at the kill.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss: Option<OomRss>,
    /// The victim's oom_score_adj.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i32>,
    /// The memcg limit, repeated for convenience.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// The task whose allocation ran the OOM killer: NOT the culprit.
    pub trigger: ProcRef,
    /// Its thread.
    pub trigger_tid: u32,
    /// The victim was itself allocating.
    pub trigger_is_victim: bool,
    /// The kill was one of a `memory.oom.group` cgroup's: every process of
    /// it killed at once (`analysis/oom_group.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<OomGroupKill>,
    /// How the run's memory got there: the sampled curve's last minute
    /// before the kill (resources/story.rs), when the log has samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::resources::story::MemoryGrowth>,
}

/// One group kill of a `memory.oom.group` cgroup, the same for each of its
/// victims.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct OomGroupKill {
    /// Sequence number of its first oom event: the kill's identity.
    pub seq: u64,
    /// How many processes it killed.
    pub victims: usize,
}
