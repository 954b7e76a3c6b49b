//! The log's frame: its first line (the header: what ran, where, with which
//! hooks) and its last (the trailer: how it ended, what was lost).
use serde::{Deserialize, Serialize};

use super::schema::{is_zero_u64, ExitStatus};

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
}

/// Events the kernel could not hand over. Never hidden: every report shows it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Loss {
    /// Ring buffer full: events dropped.
    pub ringbuf_full: u64,
    /// Tracked-process map full: processes that went untracked.
    pub tracked_map_full: u64,
    /// In-flight kill-call map full: signals that lost their syscall context.
    pub inflight_map_full: u64,
    /// Records user space could not decode.
    pub undecodable: u64,
    /// The kernel side could not read a traced process's memory (a stderr
    /// buffer, an argv): those last words or that command line are missing.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub user_read_failed: u64,
    /// A lifecycle hook read a task as a fault or an impossible value (a
    /// wrong kernel offset): that fork, exec or exit was lost.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub task_read_failed: u64,
    /// Records that never reached the log file: writing it failed (a full
    /// disk). Only in a trailer kept in memory, since the file refused it.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub unwritten: u64,
    /// Why the log file stopped being written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_error: Option<String>,
    /// Records refused by the writer: even cut, each was too large for a
    /// log line (`writer::MAX_RECORD_BYTES`).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub too_large: u64,
    /// Records the writer cut to fit a log line (a snapshot's threads and
    /// fds, a leak's fds, the front of last words): what is cut is said in
    /// the record. They cost detail, not events.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub cut_to_fit: u64,
    /// Per CPU, the same counters in the order above (kernel-side only).
    #[serde(default)]
    pub per_cpu: Vec<[u64; 3]>,
}

impl Loss {
    /// Events lost. `user_read_failed` and `cut_to_fit` are not among them:
    /// they cost last words, a command line or a record's detail, never a
    /// death or a sender.
    pub fn total(&self) -> u64 {
        self.ringbuf_full
            + self.tracked_map_full
            + self.inflight_map_full
            + self.undecodable
            + self.task_read_failed
            + self.unwritten
            + self.too_large
    }
}
