//! What the analysis finds beside the certificates: small exits grouped,
//! near misses, signals across the run's boundary, processes left running,
//! and the counts. Serialized as-is into report.json, like `types`.
use serde::Serialize;

use super::types::{ProcRef, SignalRef, TargetNs};
use crate::eventlog::ExitStatus;

/// Non-zero exits too small for a certificate, grouped.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ExitGroup {
    /// Program name (basename of the exec'd file, else comm).
    pub program: String,
    pub status: ExitStatus,
    pub count: usize,
    /// One full command line from the group.
    pub example: String,
    /// Up to 10 pids, in log order.
    pub pids: Vec<u32>,
    /// Exit event sequence numbers, up to 10.
    pub evidence: Vec<u64>,
}

/// A kill-family call that failed: it reached nobody.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct NearMiss {
    pub seq: u64,
    pub time: String,
    pub sender: ProcRef,
    pub sender_tid: u32,
    pub syscall: String,
    pub sig: i32,
    pub sig_name: String,
    pub target_arg: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid_arg: Option<i64>,
    pub aimed_at: String,
    /// The sender was in a deeper pid namespace: `target_arg` is its pid there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_ns: Option<TargetNs>,
    pub ret: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// Signal 0: a liveness probe, not an attempt to signal.
    pub probe: bool,
}

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    RunToOutside,
    OutsideToRun,
}

/// A signal crossing the run's boundary, sent by a process (not the kernel).
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ForeignSignal {
    pub direction: Direction,
    pub signal: SignalRef,
    pub sender: ProcRef,
    pub sender_tid: u32,
    pub sender_is_tracer: bool,
    pub target: ProcRef,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

/// A run process still alive when the command exited (`leak` record), or,
/// in a log without leak records, one with no recorded end.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Leftover {
    pub process: ProcRef,
    pub started_at: String,
    /// Its parent's entry in `Analysis::ancestors` (see `Victim::ancestry`).
    #[serde(rename = "ancestry_id", skip_serializing_if = "Option::is_none")]
    pub ancestry: Option<usize>,
    /// Its parent ended while it lived on (reparented: leaked).
    pub orphaned: bool,
    /// The run process that forked it, as it was at that moment.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<ProcRef>,
    /// What the tracer saw of it when the command exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leak: Option<LeakFacts>,
    /// It ended later in the log (e.g. removed by `--leaks kill`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
}

/// A `leak` record: the process as /proc showed it at the command's exit.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct LeakFacts {
    pub seq: u64,
    pub time: String,
    pub ppid: u32,
    pub pgid: u32,
    pub sid: u32,
    pub argv: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    /// Its parent died: re-parented to the tracer (a subreaper) or init.
    pub reparented: bool,
    /// It left the run's session (setsid): a daemon.
    pub detached: bool,
    /// Open file descriptors, `"N: target"`.
    pub fds: Vec<String>,
}

#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeathCounts {
    pub unexpected: usize,
    pub nonzero_exit: usize,
    pub expected: usize,
}
