//! The log's frame: its first line (the header: what ran, where, with which
//! hooks) and its last (the trailer: how it ended, what was lost).
use serde::{Deserialize, Serialize};

use super::{loss::Loss, schema::ExitStatus};

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Header {
    pub schema: u32,
    pub tracer_version: String,
    /// `uname -r` of the traced machine.
    pub kernel: String,
    /// The traced machine's architecture, as `uname -m` says it (`x86_64`,
    /// `aarch64`): whose syscall numbers the log's `seccomp_syscall` is in.
    /// Absent in logs written before it existed, which are all x86_64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
    pub hostname: String,
    /// `record` (one wrapped command) or `daemon`.
    pub mode: String,
    /// The wrapped command as given (record mode).
    #[serde(default)]
    pub command: Vec<String>,
    pub tracer_pid: u32,
    pub started_at: String,
    /// wall-clock ns since the Unix epoch = `t` + this offset.
    pub boot_to_wall_ns: i64,
    pub hooks: Vec<HookStatus>,
    pub ring_buffer_bytes: u64,
    pub argv_capture_bytes: u64,
    /// Daemon mode: what is watched (`all`, `cgroup PATH`, `root-pid PID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Daemon mode: position of this file in a rotated series, from 0.
    #[serde(default)]
    pub segment: u32,
    /// The pid namespace every pid in this log is in, when it is not the
    /// host's (the tracer ran in a container's namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid_namespace: Option<PidNamespace>,
    /// Record mode: the user the wrapped command ran as, e.g. `alice (uid 1000)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_user: Option<String>,
    /// How many `--redact` patterns masked command lines and stderr text in
    /// this log (never the patterns: they may be the secrets). 0: none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redactions: u32,
    /// The CI run this capture belongs to, from the CI system's environment
    /// when it started (docs/event-log.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci: Option<super::CiContext>,
    /// Record mode with `--tests`: every variable tracer changed in the
    /// command's environment to load its test integrations, in the order
    /// made. Empty (absent): the environment was passed on as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_changes: Vec<EnvChange>,
}

/// One variable of the command's environment that tracer changed
/// (`--tests`): what it was, how, and what the command got.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct EnvChange {
    /// The variable, e.g. `PYTEST_PLUGINS`.
    pub var: String,
    /// `set` (it was unset or empty), `appended` (tracer's part after the
    /// old value), `prepended` (before it).
    pub how: String,
    /// The value before (absent: unset), as the command would have had it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<String>,
    /// The value the command got.
    pub new: String,
}

/// A pid namespace: its depth (the host's is 0) and inode number, as
/// `/proc/PID/ns/pid` shows it (`pid:[4026532301]`).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PidNamespace {
    /// Depth of the namespace (the host's is 0).
    pub level: u32,
    /// Inode number of the namespace, as /proc/PID/ns/pid shows it.
    pub inum: u32,
}

/// A process's pid in its own pid namespace (a container's), when that is
/// below the namespace the log's pids are in: the pid its own logs print.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NsPid {
    /// The pid inside the namespace.
    pub pid: u32,
    /// The namespace: depth and inode number.
    pub level: u32,
    /// Inode number of the namespace, as /proc/PID/ns/pid shows it.
    pub inum: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HookStatus {
    /// What is observed, e.g. `signal_generate` or `kill_syscalls`.
    pub name: String,
    /// How it is attached (`tp_btf`, `tracepoint`, `raw_syscalls`), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Whether it attached.
    pub attached: bool,
    /// Why it is missing or degraded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Trailer {
    pub ended_at: String,
    /// Events written (equals the last `seq`).
    pub events: u64,
    pub lost: Loss,
    /// Record mode: how the wrapped command ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_status: Option<ExitStatus>,
    /// Record mode: the command could not be run (exec failed); the OS's
    /// reason, e.g. `No such file or directory (os error 2)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_error: Option<String>,
    /// Daemon mode, on the file the stop closed (never on a rotation's):
    /// the series ends here, and these are the segments before it. A
    /// daemon's series read without it, or without one of them, was cut
    /// or rewritten (`tracer report DIR` refuses to judge it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series_end: Option<SeriesEnd>,
    /// `--program-stats`: each of tracer's eBPF programs that ran, with the
    /// kernel's own count of its runs and their time (BPF_ENABLE_STATS).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub program_stats: Vec<ProgramStat>,
}

/// One eBPF program's kernel time over the run (see
/// [`Trailer::program_stats`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ProgramStat {
    /// The program's name in tracer's object (`sched_process_exec`, …).
    pub program: String,
    /// Runs counted while the stats were on.
    pub runs: u64,
    /// Their total run time, ns.
    pub run_ns: u64,
    /// Instructions the verifier processed to load it, where the kernel
    /// says (5.16+): how close it came to the 1M limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verified_insns: Option<u32>,
}

/// The end of a daemon's series (see [`Trailer::series_end`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct SeriesEnd {
    /// The numbers of the segments kept before the file this trailer
    /// closes, oldest first (after `--keep-segments` pruned the oldest).
    pub segments: Vec<u32>,
}
