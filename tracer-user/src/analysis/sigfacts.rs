//! Facts about signals every cause rule shares: numbers and the kernel's own
//! fault signals (from tracer_common::signals, the one table), and whether a
//! process (not the kernel) sent one. A leaf:
//! cause and caught both read it, neither through the other.
use crate::model::SignalEv;

pub(crate) use tracer_common::signals::{FAULT_SIGS, SIGCHLD, SIGKILL, SIGPIPE};
use tracer_common::signals::{
    SIGALRM, SIGINT, SIGPROF, SIGQUIT, SIGVTALRM, SI_KERNEL, SI_QUEUE, SI_TKILL, SI_USER,
};

/// si_code of a signal a POSIX timer sent (timer_create(2)).
const SI_TIMER: i32 = -2;

/// The timer a kernel-raised signal came from, when it came from one of the
/// receiving process's own timers: alarm(2)/setitimer(2) (SIGALRM,
/// SIGVTALRM, SIGPROF with SI_KERNEL) or a POSIX timer (SI_TIMER). The
/// kernel fires such a timer from whatever task is on the CPU at that
/// moment, so the signal event's "sender" is an unrelated bystander.
pub fn timer_source(sig: i32, code: i32) -> Option<&'static str> {
    match (sig, code) {
        (_, SI_TIMER) => Some("a POSIX timer, timer_create(2)"),
        (SIGALRM, SI_KERNEL) => Some("alarm(2) or setitimer(ITIMER_REAL)"),
        (SIGVTALRM, SI_KERNEL) => Some("setitimer(ITIMER_VIRTUAL)"),
        (SIGPROF, SI_KERNEL) => Some("setitimer(ITIMER_PROF)"),
        _ => None,
    }
}

/// A signal a process asked for (kill family, or a syscall we joined),
/// as opposed to one the kernel raised (faults, OOM, timers, SIGCHLD).
pub(crate) fn sent_by_process(s: &SignalEv) -> bool {
    s.ev.call.is_some() || matches!(s.ev.code, SI_USER | SI_QUEUE | SI_TKILL)
}

/// The key a terminal's SIGINT (^C) or SIGQUIT (^\\) answers: the tty layer
/// signals its foreground process group with SI_KERNEL, from whichever task
/// processed the input (often a kworker), which is no sender.
pub fn terminal_key(sig: i32, code: i32, group: bool) -> Option<&'static str> {
    match (sig, code, group) {
        (SIGINT, SI_KERNEL, true) => Some("^C"),
        (SIGQUIT, SI_KERNEL, true) => Some("^\\"),
        _ => None,
    }
}
