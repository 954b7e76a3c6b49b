//! Signal floods counted in the kernel: the summary record and the per-
//! receiver counts map's value (see tracer-ebpf's signal_agg.rs).
use crate::{RecordHeader, SignalRecord, TaskId, COMM_LEN};

/// Deliveries of one signal from one process to another that were counted
/// in the kernel instead of logged one by one (a flood of handled or
/// ignored signals, past the first `SIGNAL_FIRST_INDIVIDUAL`). `count` of
/// them, the first at `first_ns` and the last at `last_ns`; the next
/// delivery of the same kind is logged as a signal record right after.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SignalSummaryRecord {
    pub hdr: RecordHeader,
    pub sender: TaskId,
    pub target: TaskId,
    pub sender_comm: [u8; COMM_LEN],
    pub target_comm: [u8; COMM_LEN],
    pub sig: i32,
    pub count: u32,
    pub first_ns: u64,
    pub last_ns: u64,
}

/// Deliveries of one (sender, receiver, signal) always logged one by one
/// before counting starts.
pub const SIGNAL_FIRST_INDIVIDUAL: u32 = 8;
/// (sender, signal) pairs counted at once per receiving process: two keep
/// signal_generate within the 5.10 verifier's budget (four did not).
pub const SIGNAL_SLOTS: usize = 2;

/// One (sender, signal) pair being counted for a receiver. `sample` is the
/// latest delivery not yet logged (when `pending`); `count` the earlier ones.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SignalSlot {
    pub sender: TaskId,
    pub sig: i32,
    /// Deliveries seen (saturating): the first `SIGNAL_FIRST_INDIVIDUAL` are logged.
    pub seen: u32,
    pub count: u32,
    pub pending: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub sample: SignalRecord,
}

/// The map value per receiving process (keyed by tgid; `start_ns` checked).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SignalCounts {
    pub start_ns: u64,
    pub slots: [SignalSlot; SIGNAL_SLOTS],
}
