//! Kernel causes named exactly: the kernel paths and well-known programs
//! behind a death that the generic classes (`cause.rs`) only see as "the
//! kernel", "itself" or "an uncaptured call". Additive: it refines a
//! classification after the fact and never changes how the fatal signal is
//! chosen.
mod idioms;

use super::{
    cause::{relation, Classified},
    types::*,
    wording::{self as w, proc_phrase},
    Ctx,
};
use crate::{
    eventlog::{ExitStatus, ProcKey},
    model::SignalEv,
};

use tracer_common::signals::{
    SIGHUP, SIGINT, SIGKILL, SIGQUIT, SIGSYS, SIGXCPU, SIGXFSZ, SI_KERNEL, SI_USER, SYS_SECCOMP,
};

/// How far after the SIGPIPE the reader's exit may come: a reader closes
/// its end on the way out (`head` flushes and closes stdin), and its exit
/// record can follow the writer's SIGPIPE by microseconds. A daemon's live
/// look waits as long before it certifies a SIGPIPE (live/window.rs).
pub(crate) const READER_EXIT_AFTER_NS: u64 = 100_000_000;

/// What `refine` found: a new class, and what to say instead of the
/// generic wording.
pub(crate) struct Refined {
    pub kind: CauseKind,
    pub rank: Option<(Rank, String)>,
    /// Replaces the generic summary clause.
    pub summary: Option<String>,
    /// Appended to the generic summary clause.
    pub suffix: Option<String>,
    pub mechanism: Option<Mechanism>,
    pub evidence: Vec<u64>,
}

fn mech(kind: MechanismKind, detail: String) -> Mechanism {
    Mechanism {
        kind,
        detail,
        process: None,
        limit: None,
        syscall_nr: None,
        syscall: None,
        thread: None,
    }
}

fn refined(kind: CauseKind, rank: (Rank, &str), summary: String, m: Mechanism) -> Refined {
    Refined {
        kind,
        rank: Some((rank.0, rank.1.to_string())),
        summary: Some(summary),
        suffix: None,
        mechanism: Some(m),
        evidence: Vec::new(),
    }
}

/// The kernel path or idiom behind `key`'s death, when one is recognised.
pub(crate) fn refine(cx: &Ctx, key: ProcKey, cls: &Classified) -> Option<Refined> {
    let fatal = cls.fatal.map(|i| &cx.m.signals[i]);
    if let Some(r) = idioms::timeout_itself(cx, key, cls, fatal) {
        return Some(r);
    }
    match (cls.kind, fatal) {
        (CauseKind::Sigpipe, Some(s)) => idioms::pipe_reader(cx, key, cls, s),
        (CauseKind::SelfInflicted, Some(s)) if s.ev.sig == SIGXFSZ && s.ev.call.is_none() => {
            let mut m = mech(
                MechanismKind::Rlimit,
                "the kernel sends SIGXFSZ to a process that writes past RLIMIT_FSIZE".into(),
            );
            m.limit = Some("RLIMIT_FSIZE".into());
            Some(refined(
                CauseKind::Rlimit,
                (Rank::Unexpected, "exceeded a resource limit"),
                "killed by SIGXFSZ: it wrote past its file-size limit (RLIMIT_FSIZE)".into(),
                m,
            ))
        }
        (CauseKind::Kernel, Some(s)) => kernel_raised(cx, key, s),
        (CauseKind::Fault, Some(s)) if s.ev.sig == SIGSYS && s.ev.code == SYS_SECCOMP => {
            Some(seccomp(s, &cx.m.arch))
        }
        (CauseKind::Unknown, None) if cx.m.coverage.signals => Some(no_signal(cx, key)),
        (CauseKind::SelfInflicted, Some(s)) => idioms::own_group_kill(cx, key, cls, s).or_else(|| {
            let (_, call, m) = uncaptured_call(cx, s)?;
            (m.kind == MechanismKind::CgroupKill).then(|| {
                refined(
                    CauseKind::OwnGroupKill,
                    (Rank::Unexpected, "killed by its own cgroup kill"),
                    format!("killed by SIGKILL from its own {call}: it killed its own cgroup, itself included"),
                    m,
                )
            })
        }),
        // A parent-death signal is a thread-group signal; SIGKILL to one
        // task with no kill syscall is cgroup.kill, whoever wrote it.
        (CauseKind::ParentDeathSignal, Some(s)) if !s.ev.group => {
            let m = uncaptured_call(cx, s).map(|(_, _, m)| m);
            Some(Refined {
                kind: if cx.m.in_run(s.sender) {
                    CauseKind::KilledInRun
                } else {
                    CauseKind::KilledOutsideRun
                },
                rank: None,
                summary: None,
                suffix: None,
                mechanism: m,
                evidence: Vec::new(),
            })
        }
        (CauseKind::ParentDeathSignal, Some(s)) => idioms::parent_thread_exit(cx, s),
        (CauseKind::KilledInRun, Some(s)) => idioms::killed_by_timeout(cx, s),
        _ => None,
    }
}

/// Kernel-raised (SI_KERNEL) signals with a recognisable path.
fn kernel_raised(cx: &Ctx, key: ProcKey, s: &SignalEv) -> Option<Refined> {
    if let Some(which) = super::timer_source(s.ev.sig, s.ev.code) {
        return Some(own_timer(key, s, which));
    }
    if s.ev.code != SI_KERNEL {
        return None;
    }
    match s.ev.sig {
        SIGINT | SIGQUIT => super::terminal_key(s.ev.sig, s.ev.code, s.ev.group)
            .map(|key| terminal_interrupt(s, key)),
        SIGXCPU => {
            let mut m = mech(
                MechanismKind::Rlimit,
                "the kernel sends SIGXCPU each second past the soft RLIMIT_CPU".into(),
            );
            m.limit = Some("RLIMIT_CPU".into());
            Some(refined(
                CauseKind::Rlimit,
                (Rank::Unexpected, "exceeded a resource limit"),
                "killed by SIGXCPU: it used up its soft CPU-time limit (RLIMIT_CPU)".into(),
                m,
            ))
        }
        SIGKILL if s.sender == key => {
            // The CPU-time check runs in the task's own context; the OOM
            // killer was ruled out before (no oom event pairs with it).
            let xcpu = cx.m.proc(key).is_some_and(|p| {
                p.signals_in().iter().any(|&i| {
                    cx.m.signals[i].ev.sig == SIGXCPU && cx.m.signals[i].ev.at.t <= s.ev.at.t
                })
            });
            let (summary, detail) = if xcpu {
                (
                    "killed by SIGKILL at its hard CPU-time limit (RLIMIT_CPU), after SIGXCPU at the soft limit",
                    "the kernel sent SIGKILL in the process's own context after SIGXCPU: the hard RLIMIT_CPU",
                )
            } else {
                (
                    "killed by SIGKILL that the kernel raised in its own context, not the OOM killer: the hard CPU-time limit (RLIMIT_CPU) ends a process this way",
                    "SIGKILL with SI_KERNEL sent in the victim's own context with no OOM event: the hard RLIMIT_CPU (no SIGXCPU was seen, so this is inferred)",
                )
            };
            let mut m = mech(MechanismKind::Rlimit, detail.into());
            m.limit = Some("RLIMIT_CPU".into());
            Some(refined(
                CauseKind::Rlimit,
                (Rank::Unexpected, "exceeded a resource limit"),
                summary.into(),
                m,
            ))
        }
        SIGKILL => pid_ns_teardown(cx, key, s),
        SIGHUP => Some(terminal_hangup(cx, key, s)),
        _ => None,
    }
}

/// A timer of its own: whatever task the kernel ran the timer from is no
/// sender, and the headline never names it.
fn own_timer(key: ProcKey, s: &SignalEv, which: &str) -> Refined {
    let after = w::duration(s.ev.at.t.saturating_sub(key.start));
    refined(
        CauseKind::OwnTimer,
        (
            Rank::NonzeroExit,
            "a timer it set itself fired: a time limit of its own",
        ),
        format!(
            "killed by {}: its own timer fired ({which}), {after} after it started",
            s.ev.sig_name
        ),
        mech(
            MechanismKind::Timer,
            format!(
                "{} with si_code {}: sent by the kernel when the process's own timer expired ({which}); the task that was on the CPU then is no sender",
                s.ev.sig_name, s.ev.code_name
            ),
        ),
    )
}

/// SIGINT (^C) or SIGQUIT (^\) with SI_KERNEL to a whole thread group: the
/// terminal's line discipline signalling its foreground process group.
/// The kernel runs that from the task (often a kworker) that processed the
/// input: no sender to name.
fn terminal_interrupt(s: &SignalEv, key: &str) -> Refined {
    refined(
        CauseKind::TerminalInterrupt,
        (Rank::Expected, "interrupted at its terminal"),
        format!(
            "killed by {sig}: the terminal sent {sig} ({key}) to its foreground process group",
            sig = s.ev.sig_name
        ),
        mech(
            MechanismKind::TerminalInterrupt,
            format!(
                "{} with SI_KERNEL to the process group: the tty layer's answer to {key} typed (or written) at the terminal",
                s.ev.sig_name
            ),
        ),
    )
}

/// How long before the SIGKILL the init's exit record may come: the kernel
/// kills the namespace from the init's exit path (exit_notify →
/// zap_pid_ns_processes), after the exit tracepoint; a large address space
/// takes a while to tear down in between.
const NS_INIT_EXIT_BEFORE_NS: u64 = 1_000_000_000;

/// SIGKILL with SI_KERNEL sent by the init (pid 1) of the victim's own pid
/// namespace as it exits: the kernel ends whatever is left of a namespace
/// whose init ends. Ranked with the init's end: expected here, and a
/// consequence of the init's death when that is a failure (cascade.rs).
fn pid_ns_teardown(cx: &Ctx, key: ProcKey, s: &SignalEv) -> Option<Refined> {
    let init = cx.m.proc(s.sender)?;
    let ns = init.ns.filter(|ns| ns.pid == 1)?;
    if cx.m.proc(key)?.ns.map(|v| v.inum) != Some(ns.inum) {
        return None;
    }
    let end = init.end.as_ref()?;
    if end.seq > s.ev.at.seq || end.t + NS_INIT_EXIT_BEFORE_NS < s.ev.at.t {
        return None;
    }
    let r = cx.proc_ref(s.sender, end.t);
    let fate = match &end.status {
        ExitStatus::Exited { code } => format!("exited with code {code}"),
        ExitStatus::Signaled { name, .. } => format!("was killed by {name}"),
    };
    let mut m = mech(
        MechanismKind::PidNamespaceTeardown,
        "SIGKILL with SI_KERNEL from the exiting init (pid 1) of its pid namespace: the kernel \
         kills every process left in a namespace whose init ends (zap_pid_ns_processes)"
            .into(),
    );
    m.process = Some(r.clone());
    let mut out = refined(
        CauseKind::PidNamespaceTeardown,
        (
            Rank::Expected,
            "it was still running when its pid namespace's init ended: ranked with that end",
        ),
        format!(
            "killed by SIGKILL, still running when its pid namespace's init {} {fate}: the kernel \
             ends what is left of a pid namespace whose init ends",
            proc_phrase(&r)
        ),
        m,
    );
    out.evidence.push(end.seq);
    Some(out)
}

/// The tty layer's hangup runs in whichever task closed the terminal (the
/// last close of a pty master, vhangup): that task is the one to name.
fn terminal_hangup(cx: &Ctx, key: ProcKey, s: &SignalEv) -> Refined {
    let closer = cx.proc_ref(s.sender, s.ev.at.t);
    let rel = relation(cx.m, s.sender, key);
    let by = if s.sender == key {
        String::new()
    } else {
        format!(
            " (the hangup ran in {}, {}, as it closed the terminal)",
            proc_phrase(&closer),
            w::relation_phrase(rel)
        )
    };
    let mut m = mech(
        MechanismKind::TerminalHangup,
        "SIGHUP with SI_KERNEL: the tty layer hung up the session's terminal".into(),
    );
    m.process = (s.sender != key).then_some(closer);
    let rank = if matches!(
        rel,
        Relation::Parent | Relation::Ancestor | Relation::Tracer
    ) {
        (
            Rank::Expected,
            "its terminal hung up when its own parent/ancestor closed it",
        )
    } else {
        (Rank::Unexpected, "its terminal hung up")
    };
    refined(
        CauseKind::TerminalHangup,
        rank,
        format!("killed by SIGHUP: its terminal hung up{by}"),
        m,
    )
}

/// `arch`: the traced machine's, whose numbers `si_syscall` is in.
fn seccomp(s: &SignalEv, arch: &str) -> Refined {
    let nr = s.ev.seccomp_syscall;
    let name = nr.and_then(|nr| crate::snapshot::syscall_name_on(arch, nr));
    let what = match (nr, name) {
        (Some(n), Some(name)) => format!("the syscall {name} ({n})"),
        (Some(n), None) => format!("syscall number {n}"),
        _ => "a syscall (its number was not captured)".into(),
    };
    let mut m = mech(
        MechanismKind::Seccomp,
        "SIGSYS with si_code SYS_SECCOMP: a seccomp filter returned KILL or TRAP".into(),
    );
    m.syscall_nr = nr;
    m.syscall = name.map(str::to_string);
    refined(
        CauseKind::Seccomp,
        (
            Rank::Unexpected,
            "a seccomp filter forbade one of its syscalls",
        ),
        format!("killed by SIGSYS: a seccomp filter forbade {what}"),
        m,
    )
}

/// A signal status with no signal ever generated, on a log that misses
/// nothing: the kernel ended the task without a signal (seccomp strict
/// mode calls do_exit(SIGKILL) on a forbidden syscall).
fn no_signal(cx: &Ctx, key: ProcKey) -> Refined {
    let end = cx.m.proc(key).and_then(|p| p.end.as_ref());
    let (sig, likely) = match end.map(|e| &e.status) {
        Some(ExitStatus::Signaled { signal, name, .. }) if *signal == SIGKILL => (
            name.clone(),
            "; seccomp strict mode ends a process this way on a forbidden syscall",
        ),
        Some(ExitStatus::Signaled { name, .. }) => (name.clone(), ""),
        _ => ("a signal".to_string(), ""),
    };
    refined(
        CauseKind::KernelExit,
        (Rank::Unexpected, "ended by the kernel without a signal"),
        format!(
            "ended with status {sig}, but no signal was ever generated for it (every hook attached, nothing lost): the kernel ended it directly{likely}"
        ),
        mech(
            MechanismKind::NoSignal,
            "the exit status names a signal, yet signal_generate never fired for the process: a kernel path (do_exit) ended it".into(),
        ),
    )
}

/// The killer's call for a process-sent signal (SI_USER) with no kill
/// syscall, when the log vouches that none was missed: the kernel sent it
/// for the process. cgroup_kill() sends SIGKILL to each task alone
/// (send_sig: SI_USER, not a thread-group kill).
pub(crate) fn uncaptured_call(cx: &Ctx, s: &SignalEv) -> Option<(String, String, Mechanism)> {
    if !cx.m.coverage.kill_calls || s.ev.code != SI_USER {
        return None;
    }
    if s.ev.sig == SIGKILL && !s.ev.group {
        let mut m = mech(
            MechanismKind::CgroupKill,
            "SIGKILL with SI_USER to a single task and no kill syscall (every hook attached, nothing lost): how the kernel's cgroup_kill() sends it when `1` is written to cgroup.kill".into(),
        );
        m.process = Some(cx.proc_ref(s.sender, s.ev.at.t));
        return Some((
            "every process of its cgroup (cgroup.kill)".into(),
            "a write to cgroup.kill (no kill syscall)".into(),
            m,
        ));
    }
    let m = mech(
        MechanismKind::NoKillSyscall,
        format!(
            "{} with SI_USER but no kill-family syscall (every hook attached, nothing lost): a kernel path sent it while this process ran",
            s.ev.sig_name
        ),
    );
    Some((
        format!("pid {}", s.ev.target.pid),
        "no kill syscall (si_code SI_USER, sent by a kernel path while it ran)".to_string(),
        m,
    ))
}
