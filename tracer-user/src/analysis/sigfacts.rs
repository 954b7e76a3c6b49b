//! Facts about signals every cause rule shares: numbers, the kernel's own
//! fault signals, and whether a process (not the kernel) sent one. A leaf:
//! cause and caught both read it, neither through the other.
use crate::model::SignalEv;

pub const SIGKILL: i32 = 9;
pub const SIGPIPE: i32 = 13;
pub const SIGCHLD: i32 = 17;
const SI_USER: i32 = 0;
const SI_QUEUE: i32 = -1;
const SI_TKILL: i32 = -6;
/// Signals the kernel raises for a faulting instruction (positive si_code).
pub const FAULT_SIGS: [i32; 6] = [4, 5, 7, 8, 11, 31]; // ILL TRAP BUS FPE SEGV SYS

/// A signal a process asked for (kill family, or a syscall we joined),
/// as opposed to one the kernel raised (faults, OOM, timers, SIGCHLD).
pub(crate) fn sent_by_process(s: &SignalEv) -> bool {
    s.ev.call.is_some() || matches!(s.ev.code, SI_USER | SI_QUEUE | SI_TKILL)
}
