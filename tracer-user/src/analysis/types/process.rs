//! Who a report names: a process as cited, a kill target in a deeper pid
//! namespace, an exec, and the victim of a certificate.
use serde::Serialize;

use crate::eventlog::ExitStatus;

/// A process as a report names it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ProcRef {
    /// Process id (tgid).
    pub pid: u32,
    /// Process start, CLOCK_BOOTTIME ns: with `pid`, the process identity.
    pub start: u64,
    /// Human-readable command: argv joined, or `[comm]` when no argv is known.
    pub command: String,
    /// argv in force at the time of the event (may be empty if unknown).
    pub argv: Vec<String>,
    /// The process never exec'd: argv is the image inherited at fork.
    pub argv_inherited: bool,
    /// Path given to the exec in force, if the process exec'd.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The kernel's 15-character task name, last seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
    /// Part of the traced run (the wrapped command and its descendants).
    pub in_run: bool,
    /// Its pid inside its own pid namespace (a container's), when that is
    /// below the log's: the pid its own output prints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ns_pid: Option<crate::eventlog::NsPid>,
}

/// A kill target given inside a deeper pid namespace than the log's: the
/// caller's namespace, and the process it named there.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq)]
pub struct TargetNs {
    /// Inode number of the caller's pid namespace.
    pub inum: u32,
    /// The pid `target_arg` named there, as the log numbers it; absent when
    /// no process of the log had that pid there at the time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ExecRef {
    /// Sequence number of the exec event.
    pub seq: u64,
    /// Wall-clock time.
    pub time: String,
    /// Path given to execve.
    pub filename: String,
    /// argv as captured.
    pub argv: Vec<String>,
    /// argv was longer than the capture limit and was cut.
    pub argv_truncated: bool,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Victim {
    #[serde(flatten)]
    pub process: ProcRef,
    /// Its parent's entry in `Analysis::ancestors`, whose `parent_id`s lead
    /// up to the run root; absent when no parent is known.
    #[serde(rename = "ancestry_id", skip_serializing_if = "Option::is_none")]
    pub ancestry: Option<usize>,
    /// Every exec of the process, in order (a process may exec several times).
    pub execs: Vec<ExecRef>,
    /// Start time, wall clock.
    pub started_at: String,
    /// Time of the group-dead exit, wall clock.
    pub ended_at: String,
    /// CLOCK_BOOTTIME ns and sequence number of the group-dead exit.
    pub end_t: u64,
    /// Sequence number of the group-dead exit.
    pub end_seq: u64,
    /// end_t minus start.
    pub lifetime_ns: u64,
    /// The wait status the parent saw.
    pub status: ExitStatus,
    /// The raw wait status (task->exit_code).
    pub exit_code_raw: i32,
    /// A core dump was written.
    pub core_dumped: bool,
    /// Child processes it forked (threads not counted).
    pub children: usize,
    /// Threads seen in the process.
    pub threads: usize,
    /// The test it was running when it died (any of its threads; a helper:
    /// its spawner's), docs/report.md, "Which test".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<crate::labels::TestAt>,
    /// The runner's worker it is or was spawned from, as the runner calls
    /// it (`vitest worker 3`, `jest worker 2`, `xdist gw1`), docs/report.md,
    /// "Which test".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
}
