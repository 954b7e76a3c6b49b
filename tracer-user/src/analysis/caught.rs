//! Caught, then re-raised or exited: which signal a process caught (it ran
//! on after the delivery) explains how it ended, and whether the run had
//! been cancelled or timed out by then. Rules stated in docs/report.md.
use tracer_common::signals::{
    SIGCHLD, SIGCONT, SIGHUP, SIGINT, SIGQUIT, SIGSTOP, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG,
    SIGWINCH,
};

use super::sigfacts::{sent_by_process, FAULT_SIGS, SIGKILL};
use crate::{
    eventlog::{ExitStatus, ProcKey},
    model::Model,
};

/// A non-zero exit (other than 128+N) this soon after a caught signal is that
/// signal's doing: a handler that cleans up and calls exit(1). Stated in
/// docs/report.md and the ranking rule.
pub(super) const CAUGHT_EXIT_WINDOW_NS: u64 = 5_000_000_000;
/// Requests to stop: a non-zero exit soon after catching one is its doing.
const SHUTDOWN_SIGS: [i32; 4] = [SIGHUP, SIGINT, SIGQUIT, SIGTERM];

/// A request to stop (SIGHUP, SIGINT, SIGQUIT, SIGTERM), which a process
/// may catch or ignore where it cannot a SIGKILL.
pub(super) fn is_shutdown(sig: i32) -> bool {
    SHUTDOWN_SIGS.contains(&sig)
}
/// Signals whose default action does not end a process: catching one says
/// nothing about a death.
const HARMLESS_SIGS: [i32; 8] = [
    SIGCHLD, SIGCONT, SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU, SIGURG, SIGWINCH,
];

/// The caught signal a non-zero exit is blamed on: a caught N before an exit
/// 128+N (a shell's or a handler's "died of N"), else a caught request to
/// stop (INT HUP QUIT TERM) within [`CAUGHT_EXIT_WINDOW_NS`] of the exit;
/// the tracer's own (a cancellation or its timeout) with no window, since
/// it ends the run.
pub(crate) fn caught_exit(m: &Model, key: ProcKey) -> Option<usize> {
    let end = m.proc(key)?.end.as_ref()?;
    let ExitStatus::Exited { code } = end.status else {
        return None;
    };
    if code == 0 {
        return None;
    }
    let as_signal = (code > 128 && code < 128 + 65).then_some(code - 128);
    // Only a request to stop explains an arbitrary exit code; a caught
    // SIGUSR1 (a status dump, a debugger) says nothing about the exit.
    let stop = Some(&SHUTDOWN_SIGS[..]);
    as_signal
        .and_then(|n| caught(m, key, end.seq, Some(&[n]), None))
        .or_else(|| caught(m, key, end.seq, stop, Some(CAUGHT_EXIT_WINDOW_NS)))
        .or_else(|| {
            caught(m, key, end.seq, stop, None).filter(|&i| m.is_tracer(m.signals[i].sender))
        })
}

/// The last signal `key` caught before event `before_seq`: sent by another
/// process (not raised by the kernel), delivered, one whose default action
/// would have ended it, and survived (it acted or ended on its own terms
/// afterwards, which the caller's event proves). `sigs` narrows to those
/// signals; `within` to deliveries that recent before the event.
pub(super) fn caught(
    m: &Model,
    key: ProcKey,
    before_seq: u64,
    sigs: Option<&[i32]>,
    within: Option<u64>,
) -> Option<usize> {
    let p = m.proc(key)?;
    let end_t = p.end.as_ref().map_or(u64::MAX, |e| e.t);
    p.signals_in().iter().copied().rev().find(|&i| {
        let s = &m.signals[i];
        s.ev.at.seq < before_seq
            && s.sender != key
            && sent_by_process(s)
            && s.ev.result == "delivered"
            && s.ev.sig != SIGKILL
            && !HARMLESS_SIGS.contains(&s.ev.sig)
            && sigs.is_none_or(|n| n.contains(&s.ev.sig))
            && within.is_none_or(|w| s.ev.at.t + w >= end_t)
    })
}

/// The last delivery of `sig` to `key` before event `before_seq` that `key`
/// sent itself with a kill of its own group (kill(0, …), kill(-pgid, …),
/// kill(-1, …)) and survived: a shell's `trap 'kill 0' EXIT` reaches the
/// shell too, which catches it and re-raises it once its trap is done.
pub(super) fn caught_own_group_kill(
    m: &Model,
    key: ProcKey,
    before_seq: u64,
    sig: i32,
) -> Option<usize> {
    let p = m.proc(key)?;
    p.signals_in().iter().copied().rev().find(|&i| {
        let s = &m.signals[i];
        let call =
            s.ev.call
                .as_ref()
                .map(|c| (c.syscall, c.target_arg))
                .or_else(|| {
                    s.kill_call()
                        .map(|k| (m.kill_calls[k].ev.syscall, m.kill_calls[k].ev.target_arg))
                });
        s.ev.at.seq < before_seq
            && s.sender == key
            && s.ev.sig == sig
            && s.ev.result == "delivered"
            && call.is_some_and(|(sc, arg)| sc.as_str() == "kill" && arg <= 0)
    })
}

/// The last fault `sig` the kernel raised in `key` before event
/// `before_seq`. Only a re-raise of the same signal ties a death to it: a
/// JVM takes and handles SIGSEGV faults all day long.
pub(super) fn caught_fault(m: &Model, key: ProcKey, before_seq: u64, sig: i32) -> Option<usize> {
    let p = m.proc(key)?;
    p.signals_in().iter().copied().rev().find(|&i| {
        let s = &m.signals[i];
        s.ev.at.seq < before_seq
            && s.ev.sig == sig
            && FAULT_SIGS.contains(&sig)
            && s.ev.code > 0
            && !sent_by_process(s)
            && s.ev.result == "delivered"
    })
}

/// The run had been cancelled by event `seq`: the tracer takes a
/// `cancelled` snapshot when SIGINT/SIGTERM/SIGHUP/SIGQUIT reaches it, then
/// forwards the signal, so its signals after that snapshot are the
/// cancellation (a later `requested` snapshot does not undo it).
pub(super) fn cancelled_before(m: &Model, seq: u64) -> bool {
    snapshot_before(m, seq, "cancelled")
}

/// The signal that "cancelled" the run, when a process of the run sent it:
/// the last SIGINT/SIGTERM/SIGHUP/SIGQUIT a run process sent the tracer
/// before event `seq` (a `pkill -f` whose pattern matches tracer's command
/// line). The tracer takes any of them for a cancellation and forwards it,
/// so what it sends after is that; a CI's own cancellation comes from
/// outside the run, where the log sees no sender. Index into
/// `Model::signals`.
pub(super) fn cancellation_from_run(m: &Model, seq: u64) -> Option<usize> {
    // A daemon forwards nothing: the job's signal to it only stops it.
    if m.daemon {
        return None;
    }
    m.signals.iter().rposition(|s| {
        s.ev.at.seq < seq
            && m.is_tracer(s.target)
            && m.in_run(s.sender)
            && SHUTDOWN_SIGS.contains(&s.ev.sig)
    })
}

/// A snapshot taken for `reason` precedes event `seq`.
pub(super) fn snapshot_before(m: &Model, seq: u64, reason: &str) -> bool {
    m.snapshots
        .iter()
        .any(|snap| snap.at.seq < seq && snap.reason == reason)
}
