//! Which signal ended a process, what kind of cause that is, how the sender
//! relates to the victim, and how the death ranks.
use super::{
    caught::{
        cancellation_from_run, cancelled_before, caught, caught_exit, caught_fault,
        caught_own_group_kill, snapshot_before,
    },
    CauseKind, Ctx, Relation,
};
use crate::{
    eventlog::{ExitStatus, ProcKey},
    model::{Model, SignalEv},
};

pub(crate) use super::sigfacts::{sent_by_process, FAULT_SIGS};
pub(crate) use super::sigfacts::{SIGCHLD, SIGKILL, SIGPIPE};
use tracer_common::signals::{SIGHUP, SIGINT, SIGTERM};
/// Termination signals an orderly shutdown sends: INT HUP TERM KILL.
pub(super) const STOP_SIGS: [i32; 4] = [SIGINT, SIGHUP, SIGTERM, SIGKILL];
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
    /// Caught `fatal` (from another process), then ended itself with this
    /// signal of its own (index into `Model::signals`): the re-raise.
    pub reraised: Option<usize>,
    /// A non-zero exit with no chain: a signal it had caught earlier, outside
    /// the window (index into `Model::signals`), so no "no signal involved".
    pub caught_earlier: Option<usize>,
    /// The tracer's signal forwarded a cancellation of the run.
    pub cancelled: bool,
    /// The tracer's signal came after its `--timeout` expired.
    pub timed_out: bool,
    /// The "cancellation" was a signal a process of the run sent the
    /// tracer (index into `Model::signals`): no CI cancellation.
    pub forwarded_from: Option<usize>,
    /// Killed by (or caught) a signal of the job's cancellation by its
    /// runner (cancel.rs), or a non-zero exit after it: why, in words.
    pub cancel_reason: Option<String>,
}

impl Classified {
    fn of(kind: CauseKind) -> Self {
        Classified {
            kind,
            fatal: None,
            oom: None,
            handled_then_exited: None,
            group_exit_tid: None,
            reraised: None,
            caught_earlier: None,
            cancelled: false,
            timed_out: false,
            forwarded_from: None,
            cancel_reason: None,
        }
    }
}

pub(crate) fn classify(cx: &Ctx, key: ProcKey) -> Classified {
    let m = cx.m;
    if m.not_run.is_some() && m.root == Some(key) {
        return Classified::of(CauseKind::NotRun);
    }
    let mut c = classify_end(m, key);
    c.timed_out = c.kind == CauseKind::Tracer
        && c.fatal
            .is_some_and(|i| snapshot_before(m, m.signals[i].ev.at.seq, "timeout"));
    c.cancelled = match c.kind {
        CauseKind::Tracer => c
            .fatal
            .is_some_and(|i| cancelled_before(m, m.signals[i].ev.at.seq)),
        // Whatever a job's processes do once the run is cancelled (a runner
        // exiting 1 as its workers vanish) is the cancellation's doing.
        CauseKind::NonzeroExit => m
            .proc(key)
            .and_then(|p| p.end.as_ref())
            .is_some_and(|e| cancelled_before(m, e.seq)),
        _ => false,
    };
    // The job's cancellation by its runner (cancel.rs): its signals, and
    // a non-zero exit after the first of them, are its doing.
    if let Some(f) = cx.cancel() {
        let by_it = matches!(c.kind, CauseKind::KilledInRun | CauseKind::KilledOutsideRun)
            && c.fatal.is_some_and(|i| f.sent(i));
        let after = c.kind == CauseKind::NonzeroExit
            && !f.stops_tests()
            && m.proc(key)
                .and_then(|p| p.end.as_ref())
                .is_some_and(|e| e.seq > f.first_seq);
        if by_it || after {
            c.cancelled = true;
            c.cancel_reason = Some(f.reason());
        }
    }
    // The run signalled the tracer itself: whatever the tracer sent after,
    // and whatever exited after, is the run's own doing, not a CI
    // cancellation (decided without the snapshot, which a daemon's live
    // window may no longer hold).
    let after = match c.kind {
        CauseKind::Tracer => c.fatal.map(|i| m.signals[i].ev.at.seq),
        CauseKind::NonzeroExit => m.proc(key).and_then(|p| p.end.as_ref()).map(|e| e.seq),
        _ => None,
    };
    if let Some(i) = after.and_then(|seq| cancellation_from_run(m, seq)) {
        c.cancelled = false;
        c.timed_out = false;
        c.cancel_reason = None;
        c.forwarded_from = Some(i);
    }
    c
}

fn classify_end(m: &Model, key: ProcKey) -> Classified {
    let p = m.proc(key).expect("certificate for a known process");
    let end = p.end.as_ref().expect("certificate for an ended process");
    let oom = m.oom_of(key);
    match end.status {
        ExitStatus::Signaled { signal, .. } => {
            if let (SIGKILL, Some(o)) = (signal, oom) {
                return Classified {
                    oom: Some(o),
                    fatal: m.ooms[o].signal,
                    ..Classified::of(CauseKind::Oom)
                };
            }
            let Some(i) = fatal_signal(m, key, signal) else {
                return no_signal_seen(m, key);
            };
            let own = by_signal(m, key, i);
            // Caught N from someone, cleaned up, raised N on itself (Node,
            // bash after its foreground child died of SIGINT, Python's
            // SIG_DFL + raise_signal): the sender of the caught N is the
            // killer; the re-raise is only how it chose to die. A crash
            // handler re-raising a fault (Python's faulthandler, C crash
            // reporters) died of the fault.
            if own.kind == CauseKind::SelfInflicted {
                // Go's runtime after a write to a closed pipe: the
                // kernel's SIGPIPE, then its own (epipe.rs).
                if let Some(j) = super::epipe::reraised_after_epipe(m, key, i) {
                    return Classified {
                        reraised: Some(i),
                        fatal: Some(j),
                        ..Classified::of(CauseKind::Sigpipe)
                    };
                }
                let s = &m.signals[i];
                let j = caught(m, key, s.ev.at.seq, Some(&[signal]), None)
                    .or_else(|| caught_fault(m, key, s.ev.at.seq, signal))
                    .or_else(|| caught_own_group_kill(m, key, s.ev.at.seq, signal));
                if let Some(j) = j {
                    return Classified {
                        reraised: Some(i),
                        ..by_signal(m, key, j)
                    };
                }
            }
            own
        }
        ExitStatus::Exited { code } => match caught_exit(m, key) {
            Some(i) => Classified {
                handled_then_exited: Some(code),
                ..by_signal(m, key, i)
            },
            // An interpreter's own exit on EPIPE (epipe.rs).
            None => match super::epipe::exited_after_epipe(m, key) {
                Some(j) => Classified {
                    fatal: Some(j),
                    ..Classified::of(CauseKind::Sigpipe)
                },
                None => Classified {
                    caught_earlier: (code != 0)
                        .then(|| caught(m, key, end.seq, None, None))
                        .flatten(),
                    ..Classified::of(CauseKind::NonzeroExit)
                },
            },
        },
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
        .signals_in()
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
    let kind = if let Some(o) = m.oom_by_signal(i) {
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
        .thread_exits()
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
    match p.thread_exits().first() {
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
    if m.is_ancestor(killer, victim) {
        return Relation::Ancestor;
    }
    if m.is_ancestor(victim, killer) {
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
