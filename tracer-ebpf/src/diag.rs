//! Rare failures that would otherwise be silent. Each is counted (`FAILS`,
//! read into the trailer's loss section) and, when user space asks for it
//! (`--debug-ebpf`), logged through aya-log.
//!
//! Zero cost when off: aya-log-ebpf gates every call on `AYA_LOG_LEVEL`, a
//! frozen .rodata global the loader sets to 0; the verifier knows its value,
//! so it never walks the logging code and patches the branch away.
//! Log calls take integers only (no strings, no loops) to stay simple for the
//! 5.10 verifier.
use aya_ebpf::{macros::map, maps::PerCpuArray};
use aya_log_ebpf::warn;
use tracer_common::{DropReason, FailReason, TaskId, FAIL_REASONS};

#[map]
pub(crate) static FAILS: PerCpuArray<u64> = PerCpuArray::with_max_entries(FAIL_REASONS, 0);

#[inline(always)]
fn count(reason: FailReason) {
    if let Some(p) = FAILS.get_ptr_mut(reason as u32) {
        // SAFETY: as `maps::count_drop_unlogged`: this CPU's non-null u64.
        unsafe { *p += 1 };
    }
}

/// Which lifecycle read failed (in the log line).
pub(crate) const FORK_PARENT: u32 = 1;
pub(crate) const FORK_CHILD: u32 = 2;
pub(crate) const EXEC: u32 = 3;
pub(crate) const EXIT: u32 = 4;

/// Slack for "a start time in the future": the helper's fast clock may lag
/// the one the kernel stamped the task with by a hair; a wrong offset is off
/// by far more (a pointer read as a time is centuries ahead).
const FUTURE_SLACK_NS: u64 = 1_000_000_000;

/// A task read in a lifecycle hook: `None` when it faulted or gave a start
/// time in the future (an offset pointing at the wrong field), counted and
/// logged as such. Such an identity joins nothing, so the event is dropped.
#[inline(always)]
pub(crate) fn checked_task(id: Option<TaskId>, hook: u32) -> Option<TaskId> {
    let now = crate::probe::boot_ns();
    match id {
        Some(id) if id.start_ns <= now + FUTURE_SLACK_NS => Some(id),
        Some(id) => {
            count(FailReason::TaskRead);
            warn!(
                &(),
                "hook {}: task {} has start time {} after now {}: wrong task_struct offset?",
                hook,
                id.tgid,
                id.start_ns,
                now
            );
            None
        }
        None => {
            count(FailReason::TaskRead);
            warn!(&(), "hook {}: reading the task_struct failed", hook);
            None
        }
    }
}

/// A test mark past its thread's rate: counted, never logged (the write
/// hooks run from a tail call on the raw_syscalls rung).
#[inline(always)]
pub(crate) fn mark_rate() {
    count(FailReason::MarkRate);
}

/// `bpf_probe_read_user` of a traced process's stderr buffer failed.
#[inline(always)]
pub(crate) fn stderr_unreadable<const LOG: bool>(tgid: u32, addr: u64, len: u64) {
    count(FailReason::UserRead);
    if !LOG {
        return;
    }
    warn!(
        &(),
        "last words of pid {}: reading {} bytes at {:x} failed", tgid, len, addr
    );
}

/// `bpf_probe_read_user` of an exec's argv failed.
#[inline(always)]
pub(crate) fn argv_unreadable(tgid: u32, addr: u64, len: u32) {
    count(FailReason::UserRead);
    warn!(
        &(),
        "exec of pid {}: reading {} bytes of argv at {:x} failed", tgid, len, addr
    );
}

/// A map insert failed (the drop itself is counted in `DROPS`).
#[inline(always)]
pub(crate) fn map_full(reason: DropReason) {
    warn!(&(), "map full, drop reason {}", reason as u32);
}

/// The crash ring was full: a fatal signal's stack is not captured.
#[inline(always)]
pub(crate) fn crash_ring_full() {
    count(FailReason::CrashRingFull);
}
