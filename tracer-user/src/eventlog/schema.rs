//! Serde types for every line of `events.ndjson`.
use serde::{Deserialize, Serialize};

pub use super::frame::{
    EnvChange, Header, HookStatus, NsPid, PidNamespace, ProgramStat, SeriesEnd, Trailer,
};
pub use super::loss::{Loss, LossReason};
pub use super::resources::*;

/// Bumped on any incompatible change; readers refuse newer versions.
pub const SCHEMA_VERSION: u32 = 1;

/// One line of the log. The `type` field names the variant.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// Boxed: one per log, and the largest record by far.
    Header(Box<Header>),
    Fork(Fork),
    Exec(Exec),
    Exit(Exit),
    Signal(Signal),
    SignalSummary(SignalSummary),
    KillCall(KillCall),
    Oom(Oom),
    LastWords(LastWords),
    CrashStack(CrashStack),
    Leak(Leak),
    Snapshot(SnapshotTaken),
    Existing(Existing),
    TestMark(TestMark),
    TestWindow(TestWindow),
    Resources(Resources),
    Trailer(Trailer),
}

/// A mark a test wrote (a `write(2)` to `tracer_common::MARK_FD`, which
/// fails with EBADF): who and when are the kernel's, `text` is the test's
/// word only (docs/event-log.md, "Test marks").
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TestMark {
    #[serde(flatten)]
    pub at: Stamp,
    /// The writing thread.
    pub task: Task,
    /// The first `MARK_LEN` bytes written, lossily decoded as UTF-8.
    pub text: String,
    /// Bytes the write asked to write.
    pub bytes: u64,
}

/// One test's window from a runner's own report (`--test-report`): what
/// the report says, its wall clock mapped to the log's (`t`) by the
/// header's `boot_to_wall_ns`. Approximate: not the kernel's word
/// (docs/event-log.md, "Test windows"). Written after the command ended;
/// `at` is when it was written.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TestWindow {
    #[serde(flatten)]
    pub at: Stamp,
    /// The report's format: `go-json` or `junit`.
    pub format: String,
    /// The report file as given (the job's text: a JUnit window names the
    /// process whose argv names this file).
    pub path: String,
    /// go: the package's import path; JUnit: the case's classname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub name: String,
    /// Start, as `t`; absent when the report does not say (the window is
    /// then its process's whole life).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u64>,
    /// End, as `t`; absent when the test never ended in the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<u64>,
    /// How far either end may be off, in ms.
    pub uncertainty_ms: u32,
}

/// A task as seen by the kernel. `pid` is the process (tgid), `tid` the
/// thread, `start` the process's start time (CLOCK_BOOTTIME ns). A process is
/// identified by `(pid, start)`, never by `pid` alone.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Task {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
}

impl Task {
    pub fn key(&self) -> ProcKey {
        ProcKey {
            pid: self.pid,
            start: self.start,
        }
    }
}

/// The identity of a process.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcKey {
    pub pid: u32,
    pub start: u64,
}

/// Fields every event carries.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Stamp {
    /// Position in the log, from 1, gap-free.
    pub seq: u64,
    /// CLOCK_BOOTTIME ns (the kernel's clock).
    pub t: u64,
    /// Wall-clock time, RFC 3339 UTC, derived from `t` and the header's offset.
    pub time: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Fork {
    #[serde(flatten)]
    pub at: Stamp,
    /// The forking thread.
    pub parent: Task,
    pub child: Task,
    /// The child is a new thread of the parent's process, not a process.
    pub thread: bool,
    /// The child's pid inside its own (deeper) pid namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child_ns: Option<NsPid>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Exec {
    #[serde(flatten)]
    pub at: Stamp,
    pub task: Task,
    /// The tid that called execve, when a non-leader thread exec'd.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_tid: Option<u32>,
    pub filename: String,
    pub argv: Vec<String>,
    /// argv was longer than the capture limit and was cut.
    pub argv_truncated: bool,
    /// The test runners' variables of its environment at exec, and only
    /// those (`labels::env::ALLOWED`; never the rest: secrets), read from
    /// /proc while it lived. Absent when it had none or was already gone.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub test_env: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Exit {
    #[serde(flatten)]
    pub at: Stamp,
    pub task: Task,
    /// Raw wait status (`task->exit_code`).
    pub exit_code: i32,
    pub status: ExitStatus,
    /// The last thread of the process: the process is gone.
    pub group_dead: bool,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum ExitStatus {
    /// Exited with a code.
    Exited {
        /// Exit code 0-255.
        code: i32,
    },
    /// Killed by a signal.
    Signaled {
        /// Signal number.
        signal: i32,
        /// Signal name.
        name: String,
        /// A core dump was written.
        core_dumped: bool,
    },
}

impl ExitStatus {
    pub fn from_wait_status(raw: i32) -> Self {
        let sig = raw & 0x7f;
        if sig == 0 {
            Self::Exited {
                code: (raw >> 8) & 0xff,
            }
        } else {
            Self::Signaled {
                signal: sig,
                name: super::signal_name(sig),
                core_dumped: raw & 0x80 != 0,
            }
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Signal {
    #[serde(flatten)]
    pub at: Stamp,
    /// The task running when the signal was generated: the caller of kill(),
    /// the faulting task, or (for OOM and timers) whoever happened to run.
    pub sender: Task,
    pub target: Task,
    pub sig: i32,
    pub sig_name: String,
    /// si_code and its name (SI_USER, SI_KERNEL, SI_TKILL, ...).
    pub code: i32,
    pub code_name: String,
    pub errno: i32,
    /// Aimed at the whole thread group rather than one thread.
    pub group: bool,
    /// delivered | ignored | already_pending | overflow_fail | lose_info
    pub result: String,
    /// The kill-family call the sender was inside, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<CallRef>,
    /// A sender outside the run: its argv, read from /proc at capture time
    /// (the log has no exec of it otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_argv: Option<Vec<String>>,
    /// `sender_argv` was longer than the capture limit and was cut.
    #[serde(default, skip_serializing_if = "is_false")]
    pub sender_argv_truncated: bool,
    /// SIGSYS with SYS_SECCOMP: the syscall number the filter forbade
    /// (`si_syscall`, in the numbering of the header's `arch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp_syscall: Option<i64>,
}

/// Deliveries of one signal from one process of the run to another that
/// the kernel counted instead of logging each (a flood of signals the
/// receiver handles or ignores; docs/event-log.md states the rule). They are
/// not in the log as `signal` records; the next delivery of the same kind
/// follows as one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SignalSummary {
    #[serde(flatten)]
    pub at: Stamp,
    pub sender: Task,
    pub target: Task,
    pub sig: i32,
    pub sig_name: String,
    /// Deliveries this record stands for.
    pub count: u64,
    /// CLOCK_BOOTTIME ns of the first and the last of them.
    pub first_t: u64,
    pub last_t: u64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CallRef {
    /// Matches `KillCall::call_id` of the same sender thread.
    pub id: u64,
    pub syscall: String,
    /// The target exactly as the caller gave it (negative = process group).
    pub target_arg: i64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct KillCall {
    #[serde(flatten)]
    pub at: Stamp,
    pub sender: Task,
    /// kill | tkill | tgkill | rt_sigqueueinfo | rt_tgsigqueueinfo | pidfd_send_signal
    pub syscall: String,
    pub sig: i32,
    pub sig_name: String,
    /// First argument as given: pid, -pgid (kill), tgid, or a pidfd.
    pub target_arg: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid_arg: Option<i64>,
    pub ret: i64,
    /// Error name when `ret` < 0 (ESRCH: no such process; EPERM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
    pub call_id: u64,
    /// How many `signal` events this call produced in the log.
    pub deliveries: u32,
    /// Identical calls this record stands for (the same syscall, signal,
    /// target and thread as given, and return value, from the same
    /// process; each failed and delivered nothing, or had every delivery
    /// counted in a `signal_summary`), counted in the kernel: this record
    /// is the last of them.
    /// 1 (absent) for a call logged as it returned.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub count: u64,
    /// CLOCK_BOOTTIME ns of the first of `count` calls (absent when 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_t: Option<u64>,
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Oom {
    #[serde(flatten)]
    pub at: Stamp,
    /// The task whose allocation ran the OOM killer. Not the killer.
    pub trigger: Task,
    /// The victim's tid as the kernel reported it.
    pub victim_tid: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss: Option<OomRss>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_score_adj: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memcg: Option<Memcg>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OomRss {
    /// Virtual size.
    pub total_vm_kb: u64,
    /// Anonymous RSS.
    pub anon_rss_kb: u64,
    /// File-backed RSS.
    pub file_rss_kb: u64,
    /// Shared-memory RSS.
    pub shmem_rss_kb: u64,
    /// Page tables.
    pub pgtables_kb: u64,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Memcg {
    /// kernfs id (inode number) of the memory cgroup.
    pub id: u64,
    /// Last path component as the kernel names it.
    pub name: String,
    /// Path below the memory controller's mount, resolved at capture time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The cgroup's memory limit in bytes, if one was set and readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// cgroup v2 `memory.oom.group`, read at capture time: true when an OOM
    /// kill there kills every process of the cgroup at once. Absent on v1
    /// (no such file) or when the cgroup was already gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_group: Option<bool>,
}

/// The last bytes a process wrote to stderr (fd 2), written when it ends (or
/// at the end of the run for processes still alive).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LastWords {
    #[serde(flatten)]
    pub at: Stamp,
    pub task: Task,
    /// The last bytes, lossily decoded as UTF-8.
    pub text: String,
    /// Everything the process wrote to stderr over its life.
    pub bytes_total: u64,
    /// `text` is only the end of what it wrote.
    pub truncated: bool,
    /// Its last write went to fd 2 while that was /dev/null: no one saw it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub to_null: bool,
}

/// Where a process was when a fatal crash-class signal (SIGSEGV, SIGABRT, …)
/// was delivered to it: the frames unwound from its registers and stack
/// and symbolised while its files could still be read. Addresses, modules,
/// build ids and symbols only: the stack's bytes never reach the log.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CrashStack {
    #[serde(flatten)]
    pub at: Stamp,
    /// The thread the signal was delivered to.
    pub task: Task,
    pub sig: i32,
    pub signal: String,
    /// `si_code`'s name (`SEGV_MAPERR`, `SI_TKILL`…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// `si_addr`, for the signals that carry one (SIGSEGV, SIGBUS, SIGILL,
    /// SIGFPE, SIGTRAP raised by the kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault_addr: Option<u64>,
    /// How much of the stack is there (see docs/event-log.md).
    pub completeness: StackCompleteness,
    /// What is missing and why, in words, when not `complete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Innermost first.
    pub frames: Vec<CrashFrame>,
    /// Frames beyond `frames` (the record keeps `MAX_CRASH_FRAMES`).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub frames_left_out: u32,
    /// Why `frames` and `fault_addr` are empty: the process ran as another
    /// user than the run's, who gets the log (a setuid program: as in
    /// snapshots and leak records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

/// How complete a crash stack is.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StackCompleteness {
    /// Unwound from the registers through every module's unwind tables,
    /// every frame in a known module.
    Complete,
    /// Some frames were found by frame pointers only (no unwind table for
    /// them, or no registers): frames of code built without frame pointers
    /// may be missing there.
    FramePointersOnly,
    /// A frame lies in no module tracer could read (`detail` says why):
    /// it has an address, no name.
    ModuleUnknown,
    /// The modules were read but could not be parsed (`detail`).
    SymbolisationFailed,
    /// Nothing was captured (`detail`: the hook unavailable, the crash ring
    /// full).
    NoStack,
}

/// One frame of a crash stack.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct CrashFrame {
    /// The instruction's address in the process (for a caller's frame, its
    /// return address less one: the call instruction).
    pub address: u64,
    /// The mapped file, as /proc/PID/maps named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// The module's GNU build id, hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// The address as an offset into the module's file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// The function, demangled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// The source file of the instruction (DWARF line tables).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// Its line in `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// A function inlined at this address into the frame that follows
    /// (same address, the caller's name).
    #[serde(default, skip_serializing_if = "is_false")]
    pub inlined: bool,
    /// JIT code, named from the perf map the process wrote (`module` is
    /// the map's path, `/tmp/perf-PID.map`; no offset, no file).
    #[serde(default, skip_serializing_if = "is_false")]
    pub jit: bool,
}

/// A process of the run still alive when the wrapped command exited.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Leak {
    #[serde(flatten)]
    pub at: Stamp,
    pub task: Task,
    pub ppid: u32,
    pub pgid: u32,
    pub sid: u32,
    pub argv: Vec<String>,
    /// `argv` was longer than the capture limit (as an exec's) and was cut.
    #[serde(default, skip_serializing_if = "is_false")]
    pub argv_truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    /// Its parent died: it was re-parented to the tracer (a subreaper) or init.
    pub reparented: bool,
    /// It left the run's session (setsid): a daemon.
    pub detached: bool,
    /// Open file descriptors, `"N: target"`, the lowest first, at most
    /// `snapshot::MAX_FDS_SHOWN`.
    pub fds: Vec<String>,
    /// Open file descriptors beyond those in `fds`.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub fds_left_out: u32,
    /// Why `exe` and `fds` are empty: it runs as another user than the
    /// run's, who gets the log (as in snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

/// What every live process of the run was doing at one moment: taken when
/// `--timeout` expires, when the tracer is cancelled (SIGTERM/SIGINT), or on
/// SIGUSR1.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SnapshotTaken {
    #[serde(flatten)]
    pub at: Stamp,
    /// `timeout`, `cancelled` or `requested`.
    pub reason: String,
    pub snapshot: crate::snapshot::Snapshot,
}

/// Daemon mode: a process already running when the tracer started watching
/// it (its fork and exec happened before; argv is read from /proc).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Existing {
    #[serde(flatten)]
    pub at: Stamp,
    pub task: Task,
    pub ppid: u32,
    pub argv: Vec<String>,
    /// `argv` was longer than the capture limit (as an exec's) and was cut.
    #[serde(default, skip_serializing_if = "is_false")]
    pub argv_truncated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exe: Option<String>,
    /// Its pid inside its own (deeper) pid namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns: Option<NsPid>,
}

impl Record {
    pub fn stamp(&self) -> Option<&Stamp> {
        match self {
            Record::Fork(e) => Some(&e.at),
            Record::Exec(e) => Some(&e.at),
            Record::Exit(e) => Some(&e.at),
            Record::Signal(e) => Some(&e.at),
            Record::SignalSummary(e) => Some(&e.at),
            Record::KillCall(e) => Some(&e.at),
            Record::Oom(e) => Some(&e.at),
            Record::LastWords(e) => Some(&e.at),
            Record::CrashStack(e) => Some(&e.at),
            Record::Leak(e) => Some(&e.at),
            Record::Snapshot(e) => Some(&e.at),
            Record::Existing(e) => Some(&e.at),
            Record::TestMark(e) => Some(&e.at),
            Record::TestWindow(e) => Some(&e.at),
            Record::Resources(e) => Some(&e.at),
            Record::Header(_) | Record::Trailer(_) => None,
        }
    }
}

pub(super) fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

pub(crate) fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}
