//! What the analysis produces. These types are serialized as-is into
//! report.json: a field's doc comment is its description in
//! docs/report.schema.json (derived, report/schema_tests.rs), and every
//! field is named in docs/report.md.
use serde::Serialize;

use crate::eventlog::{ExitStatus, Memcg, OomRss};

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
    /// SIGHUP/SIGQUIT to the tracer, forwarded to the job), or this non-zero
    /// exit came after one.
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

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Certificate {
    /// 1-based position in the ranked list.
    pub id: usize,
    /// See ranking_rule.
    pub rank: Rank,
    /// Why this rank, in words.
    pub rank_reason: String,
    /// The death in one sentence.
    pub headline: String,
    /// Who died.
    pub victim: Victim,
    /// Why.
    pub cause: Cause,
    /// Who sent the fatal signal (absent for OOM, faults, SIGPIPE, kernel signals, non-zero
    /// exits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killer: Option<Killer>,
    /// OOM facts, for cause oom.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom: Option<OomInfo>,
    /// Every non-SIGCHLD signal the victim received, oldest first.
    pub history: Vec<HistoryEntry>,
    /// The end of what the victim wrote to stderr (`last_words` record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_words: Option<LastWordsRef>,
    /// Where it was when a fatal crash-class signal reached it
    /// (`crash_stack` record): the frames, the machinery folded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash: Option<CrashRef>,
    /// Sequence numbers of the events this certificate rests on.
    pub evidence: Vec<u64>,
    /// This death follows from the death of another certificate's victim,
    /// a process it was waiting on (docs/report.md, "Cascades").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consequence_of: Option<Consequence>,
    /// The certificates whose `consequence_of.root` is this one, in the
    /// order they died: the chain this death started.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<usize>,
}

/// Deaths of one signature and rank folded into one entry (report/groups.rs):
/// expected stops and non-zero exits with no cascade link, when at least
/// `GROUP_MIN` share their signature. A report grows with the stories, not
/// with the processes.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct DeathGroup {
    /// The example's `id`: groups and certificates share one numbering, the
    /// ranked list of every death (the other members' ids are not listed).
    pub id: usize,
    /// The rank every member has.
    pub rank: Rank,
    /// The death named as its JUnit test case would be: short command
    /// names, cause, killer relation; never a pid.
    pub signature: String,
    /// How many deaths it folds.
    pub count: usize,
    /// Wall-clock time of the first member's death.
    pub first_time: String,
    /// Wall-clock time of the last member's death.
    pub last_time: String,
    /// The first members, in the ranked order (at most `MAX_MEMBERS`).
    pub members: Vec<GroupMember>,
    /// Members past `members`: counted, not listed.
    pub members_left_out: usize,
    /// The first member's certificate, whole.
    pub example: Certificate,
}

/// One death of a group: the process, and where its end is in the log.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct GroupMember {
    /// Process id (tgid).
    pub pid: u32,
    /// Process start, CLOCK_BOOTTIME ns: with `pid`, the process identity.
    pub start: u64,
    /// Sequence number of its group-dead exit.
    pub end_seq: u64,
}

/// How a death follows from another: the link of a cascade.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Consequence {
    /// `id` of the certificate of the death it follows from directly.
    pub of: usize,
    /// `id` of the chain's root: up the `of` links, the first certificate
    /// not ranked `consequence` (the death reported in its own right).
    pub root: usize,
    /// What the process that died first was to this victim.
    pub via: LinkVia,
    /// What ties the two deaths.
    pub evidence: LinkEvidence,
    /// The tie in one sentence.
    pub detail: String,
}

/// What the process whose death came first was to the victim.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LinkVia {
    /// Its child: the process it forked and waited on.
    Child,
    /// A deeper descendant, forked by a process still running when the
    /// victim exited (a fork server).
    Descendant,
    /// The reader of the pipe it wrote to (SIGPIPE).
    PipeReader,
    /// The init (pid 1) of its pid namespace.
    NamespaceInit,
}

/// The evidence that ties a consequence to its cause.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LinkEvidence {
    /// It exited 128+N after the other died of signal N (how a shell reports
    /// a child killed by N), or passed such a status on.
    ExitCode,
    /// Its last words name the death: the pid, the signal, the exit code, or
    /// a runtime's words for a lost worker.
    LastWords,
    /// It exited within the cascade window (5 s) of the death.
    Window,
    /// SIGPIPE: the pipe's reader had died first.
    PipeReader,
    /// The kernel killed it when the init of its pid namespace ended.
    PidNamespace,
}

/// A crash's stack, as a certificate shows it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct CrashRef {
    /// Sequence number of the crash_stack record.
    pub seq: u64,
    /// `si_addr`, for the faults that carry one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault_addr: Option<u64>,
    /// The fault in words: `address 0x0 not mapped`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fault: Option<String>,
    /// How complete the stack is.
    pub completeness: crate::eventlog::StackCompleteness,
    /// What is missing and why, when not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Every frame of the record, innermost first.
    pub frames: Vec<crate::eventlog::CrashFrame>,
    /// Frames beyond `frames` the record left out.
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub frames_left_out: usize,
    /// The innermost frames that are abort, panic or unwind machinery
    /// (`abort`, `raise`, `std::panicking::…`), folded in the headline.
    pub machinery: usize,
    /// Index into `frames` of the first frame of the program's own code
    /// (after the machinery), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_user_frame: Option<usize>,
    /// The stack in one clause: `parse_header (src/parse.c:42) ← load_file
    /// (src/parse.c:88) ← main`.
    pub clause: String,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

/// A process's last words: the end of its stderr, as the kernel saw it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct LastWordsRef {
    /// Sequence number of the last_words record.
    pub seq: u64,
    /// The captured end of its stderr (at most `--last-words-bytes`).
    pub text: String,
    /// Everything it wrote to stderr over its life.
    pub bytes_total: u64,
    /// `text` is only the end of what it wrote.
    pub truncated: bool,
    /// Its last write went to fd 2 while that was /dev/null: kept as
    /// evidence, never quoted in a headline (no one saw it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub to_null: bool,
    /// The one line a headline quotes: the last line that reads like an
    /// error, else the last non-empty line. Absent when all is blank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<String>,
}

/// The snake_case name serde gives each variant, as `&'static str` (metric
/// labels, OTLP attributes, HTML): `Rank::Unexpected.as_str() == "unexpected"`.
macro_rules! as_str {
    ($($t:ty),*) => {$(
        impl $t {
            pub fn as_str(self) -> &'static str {
                self.into()
            }
        }
    )*};
}
as_str!(Rank, CauseKind, Relation, MechanismKind);

#[cfg(test)]
pub(crate) mod names {
    use strum::VariantArray;

    use super::*;

    /// One name per variant: what serde writes is what as_str says.
    pub(crate) fn same<T: VariantArray + serde::Serialize + Copy>(as_str: fn(T) -> &'static str) {
        for &v in T::VARIANTS {
            let serde = serde_json::to_value(v).unwrap();
            assert_eq!(serde.as_str(), Some(as_str(v)));
        }
    }

    #[test]
    fn as_str_is_the_serde_name() {
        same(Rank::as_str);
        same(CauseKind::as_str);
        same(Relation::as_str);
        same(MechanismKind::as_str);
    }
}

/// What the verdict reads of a death of the rank it leads with (one
/// mention per cause, report/verdict.rs): built from every such
/// certificate, and kept for a folded one beside its group.
#[derive(Clone, Debug, PartialEq)]
pub struct DeathMention {
    pub id: usize,
    pub rank: Rank,
    pub pid: u32,
    pub headline: String,
    /// The call that killed several processes at once (several deliveries).
    pub kill_call: Option<u64>,
    /// The `memory.oom.group` kill it was one of.
    pub oom_group: Option<u64>,
    /// The call aimed at this very process (`kill(pid)`, not its group).
    pub aimed: bool,
}

impl DeathMention {
    pub fn of(c: &Certificate) -> Self {
        let k = c.killer.as_ref();
        DeathMention {
            id: c.id,
            rank: c.rank,
            pid: c.victim.process.pid,
            headline: c.headline.clone(),
            kill_call: k
                .filter(|k| k.deliveries.unwrap_or(0) > 1)
                .and_then(|k| k.call_seq),
            oom_group: c.oom.as_ref().and_then(|o| o.group.as_ref()).map(|g| g.seq),
            aimed: k.and_then(|k| k.target_arg).map(i64::unsigned_abs)
                == Some(u64::from(c.victim.process.pid)),
        }
    }
}
