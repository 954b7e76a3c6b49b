//! How a death ranks, and why in words: the ranking rule stated in
//! docs/report.md and in every report.
use super::{
    caught::CAUGHT_EXIT_WINDOW_NS,
    cause::{Classified, STOP_SIGS},
    CauseKind, Rank, Relation,
};

/// The ranking rule, stated in docs/report.md and in every report:
/// expected = stopped by the tracer, by a parent-death signal, or by its own
/// parent/ancestor with INT/HUP/TERM/KILL (an orderly shutdown), or a
/// non-zero exit after the run was cancelled; killed by the job's
/// cancellation by its CI runner (cancel.rs);
/// non-zero exit = a worker that exited non-zero with no signal;
/// unexpected = everything else (another process, OOM, a fault, itself...).
/// A caught-then-re-raised or caught-then-exited death ranks as the caught
/// signal's sender would (see `classify`).
pub(crate) fn rank(
    cls: &Classified,
    relation: Option<Relation>,
    sig: Option<i32>,
) -> (Rank, String) {
    let stop_sig = sig.is_some_and(|s| STOP_SIGS.contains(&s));
    let chain = cls.reraised.is_some() || cls.handled_then_exited.is_some();
    let (rank, reason) = match (cls.kind, relation) {
        (CauseKind::Tracer, _) if cls.forwarded_from.is_some() => (
            Rank::Unexpected,
            "stopped by its own run: a process of the run signalled the tracer, which forwarded \
             the signal to the job as it does a cancellation"
                .into(),
        ),
        (CauseKind::NonzeroExit, _) if cls.forwarded_from.is_some() => (
            Rank::NonzeroExit,
            "exited non-zero after a process of the run signalled the tracer, which stopped the run"
                .into(),
        ),
        (CauseKind::Tracer, _) if cls.cancelled => (
            Rank::Expected,
            "the run was cancelled: the tracer forwarded the cancellation to the job".into(),
        ),
        (CauseKind::Tracer, _) if cls.timed_out => (
            Rank::Expected,
            "stopped by the tracer when its --timeout expired".into(),
        ),
        (CauseKind::Tracer, _) => (
            Rank::Expected,
            "stopped by the tracer itself (a forwarded signal or its timeout)".into(),
        ),
        // The job's cancellation by its runner (cancel.rs): already
        // marked cancelled by the runner, as the tracer's own is.
        (CauseKind::KilledInRun | CauseKind::KilledOutsideRun, _)
            if cls.cancel_reason.is_some() =>
        {
            (Rank::Expected, cls.cancel_reason.clone().unwrap_or_default())
        }
        (CauseKind::ParentDeathSignal, _) => (
            Rank::Expected,
            "parent-death signal: it went down with its parent (see the parent's fate)".into(),
        ),
        (CauseKind::KilledInRun, Some(Relation::Parent | Relation::Ancestor)) if stop_sig => (
            Rank::Expected,
            "stopped by its own parent/ancestor with a termination signal".into(),
        ),
        (CauseKind::NonzeroExit, _) if cls.cancelled => (
            Rank::Expected,
            "exited non-zero after the run was cancelled".into(),
        ),
        (CauseKind::NonzeroExit, _) if cls.caught_earlier.is_some() => (
            Rank::NonzeroExit,
            format!(
                "exited non-zero by itself; the signal it had caught is not taken as the cause \
                 (only SIGINT, SIGHUP, SIGQUIT or SIGTERM caught within {} of the exit, or N \
                 before an exit 128+N, is)",
                super::wording::duration(CAUGHT_EXIT_WINDOW_NS)
            ),
        ),
        (CauseKind::NonzeroExit, _) => (
            Rank::NonzeroExit,
            "exited non-zero by itself, no signal involved".into(),
        ),
        (CauseKind::NotRun, _) => (Rank::NonzeroExit, "the command could not be run".into()),
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
            | CauseKind::TimeoutFired
            | CauseKind::PidNamespaceTeardown
            | CauseKind::TerminalInterrupt
            | CauseKind::OwnTimer,
            _,
        ) => (
            Rank::Unexpected,
            "ended by a kernel path (see the cause)".into(),
        ),
        (CauseKind::KilledInRun, None) | (CauseKind::Unknown, _) => (
            Rank::Unexpected,
            "died of a signal whose origin was not observed".into(),
        ),
    };
    if chain {
        let how = if cls.reraised.is_some() {
            "re-raised it on itself"
        } else {
            "exited"
        };
        (
            rank,
            format!("{reason} (it caught that signal, then {how})"),
        )
    } else {
        (rank, reason)
    }
}
