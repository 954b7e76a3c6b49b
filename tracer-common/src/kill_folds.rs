//! Kill-family calls counted in the kernel (tracer-ebpf's `kill_folds.rs`):
//! the map value per calling process. A flood of identical calls none of
//! whose signals was logged (a loop of `kill(2)` at a pid that does not
//! exist, or at a process that handles the signal, whose deliveries
//! signal_agg counts) is logged as its first call and one record with its
//! count, not a record a call: it cannot fill the ring. The rule is in
//! docs/event-log.md (`kill_call`, `count`).
use crate::KillCallRecord;

/// Distinct calls (syscall, signal, target and thread as given,
/// return value) counted at once per calling process; a call when every
/// slot is taken by another is logged as it returns.
pub const KILL_FOLD_SLOTS: usize = 4;

/// One kind of call being counted. `rec` is the latest of them not
/// yet logged; `rec.count` how many it stands for (0: none pending, the
/// slot only remembers that the kind's first call was logged).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KillFoldSlot {
    /// Non-zero once the slot holds a kind.
    pub used: u32,
    pub _pad: u32,
    pub rec: KillCallRecord,
}

/// The map value per calling process (keyed by tgid; `start_ns` checked).
/// User space takes it (and deletes it) when the process has exited, and
/// whatever is left when tracer stops.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KillFolds {
    pub start_ns: u64,
    pub slots: [KillFoldSlot; KILL_FOLD_SLOTS],
}
