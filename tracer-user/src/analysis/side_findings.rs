//! What the analysis finds beside the certificates: small exits grouped,
//! near misses, signals across the run's boundary, processes left running,
//! and the counts. Serialized as-is into report.json, like `types`.
use serde::Serialize;

use super::types::{ProcRef, SignalRef, TargetNs};
use crate::eventlog::ExitStatus;

/// Non-zero exits too small for a certificate, grouped.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ExitGroup {
    /// Program name (basename of the exec'd file, else comm).
    pub program: String,
    /// The shared status.
    pub status: ExitStatus,
    /// How many processes.
    pub count: usize,
    /// One full command line from the group.
    pub example: String,
    /// Up to 10 pids, in log order.
    pub pids: Vec<u32>,
    /// Exit event sequence numbers, up to 10.
    pub evidence: Vec<u64>,
}

/// Kill-family calls that failed, reached nobody, and were the same call:
/// same sender process, syscall, signal, target (and thread) as given, and
/// error. A test that fires one kill 200,000 times is one entry.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct NearMiss {
    /// Sequence number of the first of these kill_call events.
    pub seq: u64,
    /// Wall-clock time of the first.
    pub time: String,
    /// How many identical calls this entry stands for.
    pub count: u64,
    /// Sequence number of the last of them.
    pub last_seq: u64,
    /// Wall-clock time of the last.
    pub last_time: String,
    /// The caller as it was at the first call: its own entry in the
    /// top-level `ancestors`, whose `parent_id` leads on to its ancestry.
    pub sender_id: usize,
    /// The thread that made the first call.
    pub sender_tid: u32,
    /// The syscall.
    pub syscall: String,
    /// Signal number (0 = liveness probe).
    pub sig: i32,
    /// Signal name.
    pub sig_name: String,
    /// The first argument as given.
    pub target_arg: i64,
    /// The thread argument, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid_arg: Option<i64>,
    /// What it aimed at, in words.
    pub aimed_at: String,
    /// The sender was in a deeper pid namespace: `target_arg` is its pid there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_ns: Option<TargetNs>,
    /// Return value (negative errno).
    pub ret: i64,
    /// ESRCH: no such process; EPERM: not permitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    /// Signal 0: a liveness probe, not an attempt to signal.
    pub probe: bool,
}

/// What a capped list leaves out.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeftOut {
    /// Entries not listed.
    pub entries: usize,
    /// The events they stand for.
    pub events: u64,
}

impl LeftOut {
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Direction {
    RunToOutside,
    OutsideToRun,
}

impl Direction {
    /// The snake_case name serde gives it (metric labels, OTLP).
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

#[cfg(test)]
#[test]
fn direction_as_str_is_the_serde_name() {
    super::types::names::same(Direction::as_str);
}

/// A signal crossing the run's boundary, sent by a process (not the kernel).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ForeignSignal {
    /// Which way it crossed.
    pub direction: Direction,
    /// The signal event.
    pub signal: SignalRef,
    /// The sender.
    pub sender: ProcRef,
    /// The sending thread.
    pub sender_tid: u32,
    /// Sent by the tracer itself (forwarding or timeout).
    pub sender_is_tracer: bool,
    /// Sent to the tracer itself (a daemon's stop, a `kill` of tracer).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub target_is_tracer: bool,
    /// The target process.
    pub target: ProcRef,
    /// A signal that ends a process (SIGKILL, SIGTERM, SIGINT, SIGHUP,
    /// SIGQUIT) sent by the run to a process outside it: the verdict leads
    /// with it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub outbound_kill: bool,
    /// The call in C notation, if captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// One of the job's cancellation's signals (`cancellation`): the CI
    /// runner stopping the job, not the suite breaking its boundary.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancellation: bool,
}

impl ForeignSignal {
    /// Whether `--fail-on foreign-signal` counts it: never tracer's own
    /// (forwarding a cancellation, `--timeout`, `--leaks kill`) nor the CI
    /// runner's cancellation of the job, and for a
    /// daemon never one sent to the daemon itself (the CI step that stops
    /// it is one of the watched processes).
    pub fn counted(&self, daemon: bool) -> bool {
        !(self.sender_is_tracer || self.cancellation || daemon && self.target_is_tracer)
    }
}

/// A run process still alive when the command exited (`leak` record), or,
/// in a log without leak records, one with no recorded end.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Leftover {
    /// The process.
    pub process: ProcRef,
    /// Start time, wall clock.
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
    /// It ended on its own within [`ROUTINE_LEAK_NS`] of the command's
    /// exit (a runner's own workers winding down after it): listed, never
    /// named on the verdict's line. Not in report.json: `ended_at` and the
    /// leak record's `time` say it.
    #[serde(skip)]
    pub routine: bool,
}

/// How soon after the command's exit a leftover that ends by itself is a
/// runner's routine wind-down, not a leak worth line 1: vitest's tinypool
/// workers ended 12–154 ms after vitest on a loaded 2-core machine.
pub const ROUTINE_LEAK_NS: u64 = 1_000_000_000;

/// A `leak` record: the process as /proc showed it at the command's exit.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct LeakFacts {
    /// Sequence number of the leak record.
    pub seq: u64,
    /// When it was recorded, wall clock.
    pub time: String,
    /// Its parent at the command's exit.
    pub ppid: u32,
    /// Its process group then.
    pub pgid: u32,
    /// Its session then.
    pub sid: u32,
    /// Its command line from /proc.
    pub argv: Vec<String>,
    /// `argv` was longer than the capture limit (as an exec's) and was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub argv_truncated: bool,
    /// Its executable from /proc, when readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    /// Its parent died: re-parented to the tracer (a subreaper) or init.
    pub reparented: bool,
    /// It left the run's session (setsid): a daemon.
    pub detached: bool,
    /// Open file descriptors, `"N: target"`, the lowest first.
    pub fds: Vec<String>,
    /// Open file descriptors beyond those in `fds`, only counted.
    #[serde(skip_serializing_if = "is_zero")]
    pub fds_left_out: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeathCounts {
    /// Unexpected deaths.
    pub unexpected: usize,
    /// Workers that exited non-zero.
    pub nonzero_exit: usize,
    /// Deaths that follow from another death of the report (rank
    /// `consequence`): not counted under the ranks above.
    pub consequence: usize,
    /// Expected stops.
    pub expected: usize,
}
