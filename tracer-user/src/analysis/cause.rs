//! Which signal ended a process, what kind of cause that is, how the sender
//! relates to the victim, and how the death ranks.
use super::{CauseKind, Ctx, Rank, Relation};
use crate::{
    eventlog::{ExitStatus, ProcKey},
    model::{Model, SignalEv},
};

pub const SIGKILL: i32 = 9;
pub const SIGPIPE: i32 = 13;
pub const SIGCHLD: i32 = 17;
const SI_USER: i32 = 0;
const SI_QUEUE: i32 = -1;
const SI_TKILL: i32 = -6;
/// Signals the kernel raises for a faulting instruction (positive si_code).
const FAULT_SIGS: [i32; 6] = [4, 5, 7, 8, 11, 31]; // ILL TRAP BUS FPE SEGV SYS
/// Termination signals an orderly shutdown sends: INT HUP TERM KILL.
const STOP_SIGS: [i32; 4] = [2, 1, 15, SIGKILL];
/// A parent-death signal is sent while the parent thread exits; its exit
/// record lands just before (exit tracepoint precedes exit_notify) — a large
/// address space can take a while to tear down in between.
const PDEATH_BEFORE_NS: u64 = 1_000_000_000;
const PDEATH_AFTER_NS: u64 = 100_000_000;

#[derive(Debug, Clone)]
pub(crate) struct Classified {
    pub kind: CauseKind,
    /// Index into `Model::signals` of the signal that ended the process.
    pub fatal: Option<usize>,
    /// Index into `Model::ooms`.
    pub oom: Option<usize>,
    pub handled_then_exited: Option<i32>,
    /// For a group exit: the thread whose exit came first.
    pub group_exit_tid: Option<u32>,
}

impl Classified {
    fn of(kind: CauseKind) -> Self {
        Classified {
            kind,
            fatal: None,
            oom: None,
            handled_then_exited: None,
            group_exit_tid: None,
        }
    }
}

/// A signal a process asked for (kill family, or a syscall we joined),
/// as opposed to one the kernel raised (faults, OOM, timers, SIGCHLD).
pub(crate) fn sent_by_process(s: &SignalEv) -> bool {
    s.ev.call.is_some() || matches!(s.ev.code, SI_USER | SI_QUEUE | SI_TKILL)
}

pub(crate) fn classify(cx: &Ctx, key: ProcKey) -> Classified {
    let m = cx.m;
    let p = m.proc(key).expect("certificate for a known process");
    let end = p.end.as_ref().expect("certificate for an ended process");
    let oom = m.ooms.iter().position(|o| o.victim == Some(key));
    match end.status {
        ExitStatus::Signaled { signal, .. } => {
            if let (SIGKILL, Some(o)) = (signal, oom) {
                return Classified {
                    oom: Some(o),
                    fatal: m.ooms[o].signal,
                    ..Classified::of(CauseKind::Oom)
                };
            }
            match fatal_signal(m, key, signal) {
                Some(i) => by_signal(m, key, i),
                None => no_signal_seen(m, key),
            }
        }
        ExitStatus::Exited { code } => {
            // Caught a signal, cleaned up, exited 128+N: the signal is the
            // cause, the process only chose how to die of it.
            let caught = (code > 128 && code < 128 + 65)
                .then(|| fatal_signal(m, key, code - 128))
                .flatten()
                .filter(|&i| m.signals[i].sender != key);
            match caught {
                Some(i) => Classified {
                    handled_then_exited: Some(code),
                    ..by_signal(m, key, i)
                },
                None => Classified::of(CauseKind::NonzeroExit),
            }
        }
    }
}

/// The signal `sig` that ended `key`: the first one delivered after the
/// process last did anything itself (a process that forked, exec'd or sent
/// a signal afterwards evidently survived the earlier ones); failing that,
/// the last one delivered; failing that, the last one generated at all.
fn fatal_signal(m: &Model, key: ProcKey, sig: i32) -> Option<usize> {
    let p = m.proc(key)?;
    let end_t = p.end.as_ref()?.t;
    let cands: Vec<usize> = p
        .signals_in
        .iter()
        .copied()
        .filter(|&i| m.signals[i].ev.sig == sig && m.signals[i].ev.at.t <= end_t)
        .collect();
    let delivered: Vec<usize> = cands
        .iter()
        .copied()
        .filter(|&i| m.signals[i].ev.result == "delivered")
        .collect();
    let Some(&last) = delivered.last() else {
        return cands.last().copied();
    };
    let active = p.last_active;
    let after: Vec<usize> = delivered
        .into_iter()
        .filter(|&i| m.signals[i].ev.at.t >= active)
        .collect();
    // SIGKILL kills at generation: the kernel marks the group exiting, so a
    // later one can only be a straggler. Any other signal delivered again
    // was dealt with the first time: a caught signal, or a fault whose
    // handler returned and re-ran the faulting access (Rust's stack-overflow
    // handler does exactly that), so the last delivery is the fatal one.
    Some(if sig == SIGKILL {
        after.first().copied().unwrap_or(last)
    } else {
        after.last().copied().unwrap_or(last)
    })
}

fn by_signal(m: &Model, key: ProcKey, i: usize) -> Classified {
    let s = &m.signals[i];
    let kind = if let Some(o) = m.ooms.iter().position(|o| o.signal == Some(i)) {
        return Classified {
            oom: Some(o),
            fatal: Some(i),
            ..Classified::of(CauseKind::Oom)
        };
    } else if !sent_by_process(s) {
        if FAULT_SIGS.contains(&s.ev.sig) && s.ev.code > 0 {
            CauseKind::Fault
        } else {
            CauseKind::Kernel
        }
    } else if m.is_tracer(s.sender) {
        CauseKind::Tracer
    } else if s.sender == key && s.ev.sig == SIGPIPE && s.ev.call.is_none() {
        // The kernel raises SIGPIPE on a write to a pipe with no reader as
        // if the writer had sent it to itself (SI_USER, no syscall).
        CauseKind::Sigpipe
    } else if s.sender == key {
        CauseKind::SelfInflicted
    } else if is_parent_death_signal(m, key, s) {
        CauseKind::ParentDeathSignal
    } else if m.in_run(s.sender) {
        CauseKind::KilledInRun
    } else {
        CauseKind::KilledOutsideRun
    };
    Classified {
        fatal: Some(i),
        ..Classified::of(kind)
    }
}

/// PR_SET_PDEATHSIG: sent by the parent's exiting thread with no syscall,
/// at the moment that thread exits.
fn is_parent_death_signal(m: &Model, victim: ProcKey, s: &SignalEv) -> bool {
    if s.ev.call.is_some() || m.proc(victim).and_then(|p| p.parent) != Some(s.sender) {
        return false;
    }
    let Some(parent) = m.proc(s.sender) else {
        return false;
    };
    let tid = s.ev.sender.tid;
    let exits = parent
        .thread_exits
        .iter()
        .filter(|x| x.tid == tid)
        .map(|x| x.t)
        .chain(parent.end.iter().filter(|e| e.tid == tid).map(|e| e.t));
    let t = s.ev.at.t;
    exits
        .into_iter()
        .any(|x| x + PDEATH_BEFORE_NS >= t && x <= t + PDEATH_AFTER_NS)
}

/// Died of a signal we never saw generated. If another thread exited first
/// with the same status, that thread took the group down; otherwise the
/// signal is missing from the log (loss, or a hook that did not attach).
fn no_signal_seen(m: &Model, key: ProcKey) -> Classified {
    let p = m.proc(key).expect("known");
    let end = p.end.as_ref().expect("ended");
    match p.thread_exits.first() {
        Some(first) if first.status == end.status && first.tid != end.tid => Classified {
            group_exit_tid: Some(first.tid),
            ..Classified::of(CauseKind::GroupExit)
        },
        _ => Classified::of(CauseKind::Unknown),
    }
}

pub(crate) fn relation(m: &Model, killer: ProcKey, victim: ProcKey) -> Relation {
    if killer == victim {
        return Relation::Itself;
    }
    if m.is_tracer(killer) {
        return Relation::Tracer;
    }
    let vp = m.proc(victim).and_then(|p| p.parent);
    if vp == Some(killer) {
        return Relation::Parent;
    }
    if m.ancestors(victim).contains(&killer) {
        return Relation::Ancestor;
    }
    if m.ancestors(killer).contains(&victim) {
        return Relation::Descendant;
    }
    if vp.is_some() && m.proc(killer).and_then(|p| p.parent) == vp {
        return Relation::Sibling;
    }
    if m.in_run(killer) {
        Relation::UnrelatedInRun
    } else {
        Relation::OutsideRun
    }
}

/// The ranking rule, stated in docs/report.md and in every report:
/// expected = stopped by the tracer, by a parent-death signal, or by its own
/// parent/ancestor with INT/HUP/TERM/KILL (an orderly shutdown);
/// non-zero exit = a worker that exited non-zero with no signal;
/// unexpected = everything else (another process, OOM, a fault, itself...).
pub(crate) fn rank(
    kind: CauseKind,
    relation: Option<Relation>,
    sig: Option<i32>,
) -> (Rank, String) {
    let stop_sig = sig.is_some_and(|s| STOP_SIGS.contains(&s));
    match (kind, relation) {
        (CauseKind::Tracer, _) => (
            Rank::Expected,
            "stopped by the tracer itself (a forwarded signal or its timeout)".into(),
        ),
        (CauseKind::ParentDeathSignal, _) => (
            Rank::Expected,
            "parent-death signal: it went down with its parent (see the parent's fate)".into(),
        ),
        (CauseKind::KilledInRun, Some(Relation::Parent | Relation::Ancestor)) if stop_sig => (
            Rank::Expected,
            "stopped by its own parent/ancestor with a termination signal".into(),
        ),
        (CauseKind::NonzeroExit, _) => (
            Rank::NonzeroExit,
            "exited non-zero by itself, no signal involved".into(),
        ),
        (CauseKind::KilledInRun, Some(r)) => (
            Rank::Unexpected,
            format!("killed by {}", super::wording::relation_phrase(r)),
        ),
        (CauseKind::KilledOutsideRun, _) => (
            Rank::Unexpected,
            "killed by a process outside the run".into(),
        ),
        (CauseKind::Oom, _) => (Rank::Unexpected, "killed by the kernel OOM killer".into()),
        (CauseKind::Fault, _) => (Rank::Unexpected, "crashed on a fault".into()),
        (CauseKind::SelfInflicted, _) => (Rank::Unexpected, "killed itself (abort/raise)".into()),
        (CauseKind::Sigpipe, _) => (Rank::Unexpected, "wrote to a pipe with no reader".into()),
        (CauseKind::GroupExit, _) => (Rank::Unexpected, "taken down by one of its threads".into()),
        (CauseKind::Kernel, _) => (Rank::Unexpected, "killed by the kernel".into()),
        // Their rank comes with the mechanism (mechanism.rs); this is only
        // the fallback.
        (
            CauseKind::Rlimit
            | CauseKind::Seccomp
            | CauseKind::KernelExit
            | CauseKind::TerminalHangup
            | CauseKind::OwnGroupKill
            | CauseKind::TimeoutFired,
            _,
        ) => (
            Rank::Unexpected,
            "ended by a kernel path (see the cause)".into(),
        ),
        (CauseKind::KilledInRun, None) | (CauseKind::Unknown, _) => (
            Rank::Unexpected,
            "died of a signal whose origin was not observed".into(),
        ),
    }
}
