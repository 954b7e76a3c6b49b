//! Kernel causes named exactly: the kernel paths and well-known programs
//! behind a death that the generic classes (`cause.rs`) only see as "the
//! kernel", "itself" or "an uncaptured call". Additive: it refines a
//! classification after the fact and never changes how the fatal signal is
//! chosen.
use super::{
    cause::{relation, Classified},
    certificate::call_of,
    types::*,
    wording::{self as w, proc_phrase},
    Ctx,
};
use crate::{
    eventlog::{ExitStatus, ProcKey},
    model::SignalEv,
};

const SIGHUP: i32 = 1;
const SIGKILL: i32 = 9;
const SIGALRM: i32 = 14;
const SIGXCPU: i32 = 24;
const SIGXFSZ: i32 = 25;
const SIGSYS: i32 = 31;
const SI_USER: i32 = 0;
const SI_KERNEL: i32 = 0x80;
const SYS_SECCOMP: i32 = 1;
/// coreutils timeout(1)'s exit status when its time limit fired.
const TIMEOUT_STATUS: i32 = 124;

/// What `refine` found: a new class, and what to say instead of the
/// generic wording.
pub(crate) struct Refined {
    pub kind: CauseKind,
    pub rank: Option<(Rank, String)>,
    /// Replaces the generic summary clause.
    pub summary: Option<String>,
    /// Appended to the generic summary clause.
    pub suffix: Option<String>,
    pub mechanism: Mechanism,
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
        mechanism: m,
        evidence: Vec::new(),
    }
}

/// The kernel path or idiom behind `key`'s death, when one is recognised.
pub(crate) fn refine(cx: &Ctx, key: ProcKey, cls: &Classified) -> Option<Refined> {
    let fatal = cls.fatal.map(|i| &cx.m.signals[i]);
    if let Some(r) = timeout_itself(cx, key, cls, fatal) {
        return Some(r);
    }
    match (cls.kind, fatal) {
        (CauseKind::Sigpipe, Some(s)) => pipe_reader(cx, key, s),
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
            Some(seccomp(s))
        }
        (CauseKind::Unknown, None) if cx.m.coverage.signals => Some(no_signal(cx, key)),
        (CauseKind::SelfInflicted, Some(s)) => own_group_kill(cx, s).or_else(|| {
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
            let (_, _, m) = uncaptured_call(cx, s)?;
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
        (CauseKind::ParentDeathSignal, Some(s)) => parent_thread_exit(cx, s),
        (CauseKind::KilledInRun, Some(s)) => killed_by_timeout(cx, s),
        _ => None,
    }
}

/// Kernel-raised (SI_KERNEL) signals with a recognisable path.
fn kernel_raised(cx: &Ctx, key: ProcKey, s: &SignalEv) -> Option<Refined> {
    if s.ev.code != SI_KERNEL {
        return None;
    }
    match s.ev.sig {
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
                p.signals_in.iter().any(|&i| {
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
        SIGHUP => Some(terminal_hangup(cx, key, s)),
        _ => None,
    }
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

fn seccomp(s: &SignalEv) -> Refined {
    let nr = s.ev.seccomp_syscall;
    let name = nr.and_then(crate::snapshot::syscall_name);
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

/// How far after the SIGPIPE the reader's exit may come: a reader closes
/// its end on the way out (`head` flushes and closes stdin), and its exit
/// record can follow the writer's SIGPIPE by microseconds.
const READER_EXIT_AFTER_NS: u64 = 100_000_000;

/// SIGPIPE: the kernel raised it because the pipe's read end was closed.
/// The reader is inferred from the pipeline's shape: a sibling or child of
/// the writer that lived alongside it and ended closest before the SIGPIPE,
/// else closest after it (within the slack above), else its parent.
fn pipe_reader(cx: &Ctx, key: ProcKey, s: &SignalEv) -> Option<Refined> {
    let m = cx.m;
    let p = m.proc(key)?;
    let siblings = p
        .parent
        .and_then(|pp| m.proc(pp))
        .map(|pp| pp.children.clone())
        .unwrap_or_default();
    let t = s.ev.at.t;
    let (rk, end) = siblings
        .into_iter()
        .chain(p.children.iter().copied())
        .map(|k| (k, 0u8))
        .chain(p.parent.map(|k| (k, 1u8)))
        .filter(|&(k, _)| k != key)
        .filter_map(|(k, tier)| Some((k, tier, m.proc(k)?.end.as_ref()?)))
        .filter(|(_, _, e)| e.t >= key.start && e.t <= t + READER_EXIT_AFTER_NS)
        .min_by_key(|(_, tier, e)| (*tier, e.t > t, e.t.abs_diff(t), e.seq))
        .map(|(k, _, e)| (k, e))?;
    let r = cx.proc_ref(rk, end.t);
    let rel = w::relation_phrase(relation(m, rk, key));
    let apart = w::duration(t.abs_diff(end.t));
    let normal = matches!(end.status, ExitStatus::Exited { code: 0 });
    let fate = match &end.status {
        ExitStatus::Exited { code } => format!("exited with code {code}"),
        ExitStatus::Signaled { name, .. } => format!("was killed by {name}"),
    };
    let mut mech_ = mech(
        MechanismKind::PipeReaderGone,
        format!("its reader is inferred: {rel}, alive alongside it, that ended closest to the SIGPIPE ({apart} apart)"),
    );
    mech_.process = Some(r.clone());
    let (rank, summary) = if normal {
        (
            (
                Rank::Expected,
                "its pipe's reader finished first: the normal end of a `producer | head` pipeline",
            ),
            format!(
                "killed by SIGPIPE: its reader {}, {rel}, had finished and closed the pipe (it {fate}, {apart} apart) — the normal end of a `producer | head` pipeline",
                proc_phrase(&r)
            ),
        )
    } else {
        (
            (Rank::Unexpected, "wrote to a pipe whose reader died"),
            format!(
                "killed by SIGPIPE: its reader {}, {rel}, had died (it {fate}, {apart} apart)",
                proc_phrase(&r)
            ),
        )
    };
    let mut out = refined(CauseKind::Sigpipe, rank, summary, mech_);
    out.evidence.push(end.seq);
    Some(out)
}

/// kill(0, …), kill(-pgid, …) or kill(-1, …) that reached the caller too.
fn own_group_kill(cx: &Ctx, s: &SignalEv) -> Option<Refined> {
    let (sc, arg, tid) = call_of(cx, s)?;
    if sc != "kill" || arg > 0 {
        return None;
    }
    let call = w::call_notation(&sc, arg, tid, &s.ev.sig_name);
    let what = if arg == -1 {
        "a kill of every process it could signal, itself included"
    } else {
        "a kill of its own process group, which includes itself"
    };
    Some(refined(
        CauseKind::OwnGroupKill,
        (Rank::Unexpected, "killed by its own process-group kill"),
        format!("killed by {} from its own {call} — {what}", s.ev.sig_name),
        mech(MechanismKind::OwnGroupKill, format!("{call}: {what}")),
    ))
}

fn is_timeout(cx: &Ctx, key: ProcKey, t: u64) -> bool {
    let r = cx.proc_ref(key, t);
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    !r.argv_inherited
        && (r.argv.first().map(|a| base(a)).as_deref() == Some("timeout")
            || r.filename.as_deref().map(base).as_deref() == Some("timeout"))
}

/// The signals timeout(1) sent once its limit fired: the first one aimed
/// at a single pid is its command.
fn timeout_victim<'a>(cx: &'a Ctx, key: ProcKey) -> Option<(&'a SignalEv<'a>, ProcRef)> {
    let s =
        cx.m.kill_calls
            .iter()
            .filter(|k| k.sender == key && k.ev.target_arg > 0 && k.ev.sig != 18)
            .flat_map(|k| k.signals.iter().map(|&i| &cx.m.signals[i]))
            .next()?;
    Some((s, cx.proc_ref(s.target, s.ev.at.t)))
}

/// timeout(1) itself: exit 124, or killed by its own group kill (`-s KILL`:
/// coreutils signals its command, then its whole process group).
fn timeout_itself(
    cx: &Ctx,
    key: ProcKey,
    cls: &Classified,
    fatal: Option<&SignalEv>,
) -> Option<Refined> {
    let p = cx.m.proc(key)?;
    let end = p.end.as_ref()?;
    if !is_timeout(cx, key, end.t) {
        return None;
    }
    let own_group = fatal.filter(|s| {
        s.sender == key && call_of(cx, s).is_some_and(|(sc, arg, _)| sc == "kill" && arg <= 0)
    });
    let exit_124 = cls.kind == CauseKind::NonzeroExit
        && matches!(
            end.status,
            ExitStatus::Exited {
                code: TIMEOUT_STATUS
            }
        );
    if own_group.is_none() && !exit_124 {
        return None;
    }
    let alarm = p
        .signals_in
        .iter()
        .map(|&i| &cx.m.signals[i])
        .find(|s| s.ev.sig == SIGALRM && s.ev.at.t <= end.t);
    let after = alarm.map_or(String::new(), |a| {
        format!(
            " after {}",
            w::duration(a.ev.at.t.saturating_sub(key.start))
        )
    });
    let stopped = timeout_victim(cx, key);
    let cmd = stopped.as_ref().map_or(String::new(), |(s, r)| {
        format!(
            " and stopped its command {} with {}",
            proc_phrase(r),
            s.ev.sig_name
        )
    });
    let summary = match own_group {
        Some(s) => {
            let (sc, arg, tid) = call_of(cx, s).unwrap_or(("kill".into(), 0, None));
            format!(
                "killed by {} from its own {}: its time limit fired{after}{cmd}, then, as coreutils timeout(1) does, it signalled its whole process group, itself included",
                s.ev.sig_name,
                w::call_notation(&sc, arg, tid, &s.ev.sig_name)
            )
        }
        None => format!("exited with code 124: its time limit fired{after}{cmd}"),
    };
    let mut m = mech(
        MechanismKind::Timeout,
        "timeout(1)'s time limit fired (SIGALRM), it signalled its command and exited 124 or died of its own group kill".into(),
    );
    m.process = stopped.as_ref().map(|(_, r)| r.clone());
    let mut out = refined(
        CauseKind::TimeoutFired,
        (
            Rank::NonzeroExit,
            "a timeout fired: timeout(1) stopped its command",
        ),
        summary,
        m,
    );
    out.evidence.extend(alarm.map(|a| a.ev.at.seq));
    out.evidence.extend(stopped.map(|(s, _)| s.ev.at.seq));
    Some(out)
}

/// A process killed by timeout(1): same class and rank (its parent or
/// ancestor stopping it), but the certificate says a timeout fired.
fn killed_by_timeout(cx: &Ctx, s: &SignalEv) -> Option<Refined> {
    if !is_timeout(cx, s.sender, s.ev.at.t) {
        return None;
    }
    let limit = cx.proc_ref(s.sender, s.ev.at.t);
    let mut m = mech(
        MechanismKind::Timeout,
        format!(
            "{} stopped it when its time limit fired",
            proc_phrase(&limit)
        ),
    );
    m.process = Some(limit);
    Some(Refined {
        kind: CauseKind::KilledInRun,
        rank: None,
        summary: None,
        suffix: Some(": a timeout fired (timeout(1))".into()),
        mechanism: m,
        evidence: Vec::new(),
    })
}

/// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits,
/// not the parent process: a worker thread that spawns a child and ends
/// kills it while the parent lives on.
fn parent_thread_exit(cx: &Ctx, s: &SignalEv) -> Option<Refined> {
    let parent = cx.m.proc(s.sender)?;
    let tid = s.ev.sender.tid;
    let thread_exit = parent.thread_exits.iter().find(|x| x.tid == tid)?;
    if parent.end.as_ref().is_some_and(|e| e.t <= s.ev.at.t) {
        return None;
    }
    let pr = cx.proc_ref(s.sender, s.ev.at.t);
    let mut m = mech(
        MechanismKind::ParentThreadExit,
        format!("thread {tid} of its parent exited; PR_SET_PDEATHSIG fires on the exit of the thread that forked, not of the process"),
    );
    m.process = Some(pr.clone());
    m.thread = Some(tid);
    let mut out = refined(
        CauseKind::ParentDeathSignal,
        (
            Rank::Unexpected,
            "parent-death signal fired by the exit of its parent's forking thread while the parent lived on",
        ),
        format!(
            "killed by {}, its parent-death signal, when thread {tid} of its parent {} — the thread that forked it — exited; the parent process itself lived on",
            s.ev.sig_name,
            proc_phrase(&pr)
        ),
        m,
    );
    out.evidence.push(thread_exit.seq);
    Some(out)
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
