//! Facts about signals every cause rule shares: numbers and the kernel's own
//! fault signals (from tracer_common::signals, the one table), and whether a
//! process (not the kernel) sent one. A leaf:
//! cause and caught both read it, neither through the other.
use crate::model::SignalEv;

pub(crate) use tracer_common::signals::{FAULT_SIGS, SIGCHLD, SIGKILL, SIGPIPE};
use tracer_common::signals::{SI_QUEUE, SI_TKILL, SI_USER};

/// A signal a process asked for (kill family, or a syscall we joined),
/// as opposed to one the kernel raised (faults, OOM, timers, SIGCHLD).
pub(crate) fn sent_by_process(s: &SignalEv) -> bool {
    s.ev.call.is_some() || matches!(s.ev.code, SI_USER | SI_QUEUE | SI_TKILL)
}
