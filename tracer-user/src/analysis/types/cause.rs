//! Why it died: the rank, the cause and its kind, the kernel mechanism, the
//! killer, and the signals it received.
use serde::Serialize;

use super::{ProcRef, TargetNs};

/// How a death is ranked. Order matters: lower sorts first.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Rank {
    /// A death nobody in the process's own lineage asked for.
    Unexpected,
    /// A worker that exited non-zero on its own.
    NonzeroExit,
    /// It follows from another death of the report, a process it was
    /// waiting on (`consequence_of`): that death is the root cause, counted
    /// and named in the verdict; this one is not counted again.
    Consequence,
    /// An orderly stop: by its parent/ancestor, the tracer, or parent death.
    Expected,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum CauseKind {
    KilledInRun,
    KilledOutsideRun,
    Oom,
    Fault,
    SelfInflicted,
    ParentDeathSignal,
    GroupExit,
    Sigpipe,
    Tracer,
    Kernel,
    NonzeroExit,
    /// The wrapped command could not be run (not found, not executable).
    NotRun,
    Unknown,
    /// A resource limit's signal: SIGXFSZ (RLIMIT_FSIZE), SIGXCPU and the
    /// SIGKILL at the hard RLIMIT_CPU.
    Rlimit,
    /// SIGSYS with SYS_SECCOMP: a seccomp filter forbade a syscall.
    Seccomp,
    /// Ended with a signal status though no signal was ever generated for
    /// it, on a log that misses nothing (seccomp strict mode, do_exit).
    KernelExit,
    /// SIGHUP from the tty layer: its terminal hung up.
    TerminalHangup,
    /// Killed by its own kill(0, …) / kill(-pgid, …): a kill of its own
    /// process group, which includes itself.
    OwnGroupKill,
    /// timeout(1) itself, after its time limit fired: exit 124, or killed by
    /// its own group kill (`-s KILL`).
    TimeoutFired,
    /// SIGKILL from the kernel because the init (pid 1) of its pid namespace
    /// ended: what was still running in a container when its init exited.
    PidNamespaceTeardown,
    /// SIGINT/SIGQUIT from its terminal: ^C or ^\ typed (or written) at it.
    TerminalInterrupt,
    /// One of its own timers fired: alarm(2), setitimer(2), a POSIX timer.
    OwnTimer,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum Relation {
    #[serde(rename = "self")]
    #[strum(serialize = "self")]
    Itself,
    Parent,
    Ancestor,
    Sibling,
    Descendant,
    UnrelatedInRun,
    OutsideRun,
    Tracer,
}

/// One `signal` event as a report cites it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct SignalRef {
    /// Sequence number of the signal event in the log.
    pub seq: u64,
    /// CLOCK_BOOTTIME ns.
    pub t: u64,
    /// Wall-clock time, RFC 3339 UTC.
    pub time: String,
    /// Signal number.
    pub sig: i32,
    /// Signal name, e.g. SIGKILL.
    pub sig_name: String,
    /// si_code.
    pub code: i32,
    /// si_code name: SI_USER, SI_TKILL, SI_QUEUE, SI_KERNEL, SEGV_MAPERR, ...
    pub code_name: String,
    /// delivered | ignored | already_pending | ...
    pub result: String,
    /// The thread the signal was aimed at.
    pub target_tid: u32,
    /// Aimed at the whole thread group (false: at one thread).
    pub group: bool,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Cause {
    /// Cause class; see docs/report.md.
    pub kind: CauseKind,
    /// One sentence.
    pub summary: String,
    /// The signal that ended the process, when one was observed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<SignalRef>,
    /// The process caught `signal` and then exited with this code itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handled_then_exited: Option<i32>,
    /// The process caught `signal` and then raised it on itself: its own
    /// signal, which is what the kernel saw end it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reraised: Option<SignalRef>,
    /// The tracer's signal was a cancellation of the run (a SIGINT/SIGTERM/
    /// SIGHUP/SIGQUIT to the tracer, forwarded to the job), or a signal of
    /// the job's cancellation by its CI runner (`cancellation`), or this
    /// non-zero exit came after one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cancelled: bool,
    /// The process of the run whose signal to the tracer (a `pkill -f`
    /// matching tracer's command line) the tracer forwarded to the job as a
    /// cancellation: the run stopped itself, no CI cancellation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forwarded_from: Option<ProcRef>,
    /// The kernel path or idiom behind the death, when one was recognised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<Mechanism>,
}

/// How the kernel (or a well-known program) ended the process, in facts.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Mechanism {
    /// Which path or idiom.
    pub kind: MechanismKind,
    /// One sentence.
    pub detail: String,
    /// The other process involved: the pipe's reader, the process that
    /// closed the terminal, the writer of cgroup.kill, the command timeout(1)
    /// stopped, the parent whose thread exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcRef>,
    /// `RLIMIT_FSIZE`, `RLIMIT_CPU`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
    /// The syscall seccomp forbade: number (the traced machine's
    /// numbering, the log header's `arch`) and name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscall_nr: Option<i64>,
    /// Its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The thread whose exit fired a parent-death signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<u32>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
#[derive(strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "snake_case")]
pub enum MechanismKind {
    /// SIGPIPE after the pipe's reader went away.
    PipeReaderGone,
    Rlimit,
    Seccomp,
    /// No signal was generated: the kernel ended the task directly.
    NoSignal,
    /// A write to cgroup v2 `cgroup.kill`.
    CgroupKill,
    /// A signal sent by a kernel path for a process, with no kill syscall.
    NoKillSyscall,
    TerminalHangup,
    /// timeout(1)'s time limit fired.
    Timeout,
    OwnGroupKill,
    /// PR_SET_PDEATHSIG fired by the exit of the parent's forking thread
    /// while the parent process lived on.
    ParentThreadExit,
    /// The init (pid 1) of its pid namespace ended, and the kernel killed
    /// what was left of the namespace (SIGKILL, SI_KERNEL).
    PidNamespaceTeardown,
    /// The terminal's line discipline sent SIGINT (^C) or SIGQUIT (^\) to
    /// its foreground process group.
    TerminalInterrupt,
    /// The process's own timer fired (alarm, setitimer, timer_create).
    Timer,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Killer {
    /// The sender, as it was when it sent.
    pub process: ProcRef,
    /// The sending thread.
    pub tid: u32,
    /// Its parent's entry in `Analysis::ancestors` (see `Victim::ancestry`).
    #[serde(rename = "ancestry_id", skip_serializing_if = "Option::is_none")]
    pub ancestry: Option<usize>,
    /// The sender's relation to the victim.
    pub relation: Relation,
    /// kill | tkill | tgkill | pidfd_send_signal | rt_sigqueueinfo | ...;
    /// absent when the syscall was not captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// The first argument exactly as given (negative = process group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_arg: Option<i64>,
    /// The thread argument of tgkill / rt_tgsigqueueinfo.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid_arg: Option<i64>,
    /// What the call aimed at, in words: "pid 4242", "process group 4242".
    pub aimed_at: String,
    /// The sender was in a deeper pid namespace: `target_arg` is its pid there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_ns: Option<TargetNs>,
    /// The call in C notation, e.g. `kill(-4242, SIGKILL)`, or
    /// "an uncaptured call (si_code ...)" when the syscall was not seen.
    pub call: String,
    /// Sequence number of the kill_call event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_seq: Option<u64>,
    /// Signals the call produced (a group kill reaches every member).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<u32>,
    /// The test the sending thread was running at the kill, or, for a
    /// helper (`pkill`, `sh -c`), the test of the thread that spawned it
    /// (docs/report.md, "Which test").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test: Option<crate::labels::TestAt>,
    /// The runner's worker it is or was spawned from, as the runner calls
    /// it (`vitest worker 3`, `jest worker 2`, `xdist gw1`), docs/report.md,
    /// "Which test".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct HistoryEntry {
    /// The signal event.
    pub signal: SignalRef,
    /// ns since the victim started.
    pub since_start_ns: u64,
    /// The task that was running when the signal was generated. For a
    /// kernel-raised signal (`raised_by_kernel`) that is not a sender at all.
    pub sender: ProcRef,
    /// Raised by the kernel (fault, OOM, timer...), not sent by a process.
    pub raised_by_kernel: bool,
    /// The sender's relation to the victim; absent when kernel-raised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relation: Option<Relation>,
    /// The call in C notation, if captured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// This is the signal that ended the process.
    pub fatal: bool,
}
