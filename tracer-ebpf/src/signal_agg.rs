//! Signal floods counted in the kernel. A delivery that cannot end or stop
//! its receiver by itself (the receiver handles or ignores the signal, or
//! its default action is to ignore it) between two processes of the run is
//! logged one by one only for the first `SIGNAL_FIRST_INDIVIDUAL` of each
//! (sender, receiver, signal); later ones are counted per receiver and
//! logged as a summary plus the latest delivery in full, before anything
//! else is logged about that receiver's signals and before its exit. The
//! rule is in docs/event-log.md (`signal_summary`).
use core::mem::size_of;

use aya_ebpf::bindings::BPF_NOEXIST;
use tracer_common::{
    signals::{SIGCHLD, SIGKILL, SIGSTOP, SIGURG, SIGWINCH},
    DropReason, RecordKind, SignalCounts, SignalRecord, SignalSummaryRecord, TaskId,
    SIGNAL_FIRST_INDIVIDUAL, SIGNAL_SLOTS,
};

use crate::{
    maps::{
        all_signals, batched_output, count_drop, off, EVENTS, SIGNAL_COUNTS, SIGNAL_COUNTS_INIT,
    },
    task::{header, read, Ptr, TaskRead, Typed},
};

/// `SIG_DFL`: the default action.
const SIG_DFL: u64 = 0;

/// May this delivery be counted instead of logged? Never SIGKILL/SIGSTOP;
/// one whose receiver has the default action for it only when that action
/// is to ignore it (CHLD, URG, WINCH) or the receiver blocks it (it waits
/// for it with sigwait, as the kernel's own `sig_ignored` reasons: a
/// blocked signal is consumed or, once unblocked, delivered later — then
/// the latest delivery is logged before the exit it causes); never when
/// the disposition cannot be read.
#[inline(always)]
pub(crate) fn countable(target: Ptr, sig: i32) -> bool {
    if all_signals() || sig == SIGKILL || sig == SIGSTOP || !(1..=64).contains(&sig) {
        return false;
    }
    let (size, action, handler) = (
        off(|o| &o.ksigaction_size),
        off(|o| &o.sighand_action),
        off(|o| &o.ksigaction_handler),
    );
    if size > 256 || action > 65536 || handler > 256 {
        // OFFSET_NONE (or nonsense): unknown disposition, log it.
        return false;
    }
    // `target` is signal_generate's BTF-typed argument: plain loads. The
    // handler's offset depends on the signal: a probe read (the verifier
    // types only loads at constant offsets).
    let Some(sighand) = Typed::read::<Ptr>(target, off(|o| &o.task_sighand)) else {
        return false;
    };
    let at = action + (sig as u32 - 1) * size + handler;
    match read::<u64>(sighand, at) {
        Some(SIG_DFL) => matches!(sig, SIGCHLD | SIGURG | SIGWINCH) || blocked(target, sig),
        Some(_) => true,
        None => false,
    }
}

#[inline(always)]
fn blocked(target: Ptr, sig: i32) -> bool {
    let bit = 1u64 << ((sig - 1) as u64 & 63);
    let mask = |o: u32| Typed::read::<u64>(target, o).unwrap_or(0);
    (mask(off(|o| &o.task_blocked)) | mask(off(|o| &o.task_real_blocked))) & bit != 0
}

/// Count `rec` instead of logging it? `false`: log it (the first deliveries
/// of its kind, or no room to count).
#[inline(always)]
pub(crate) fn count(target: &TaskId, rec: &SignalRecord) -> bool {
    let Some(c) = counts_of(target) else {
        return false;
    };
    // SAFETY: `c` is a non-null map value (a whole `SignalCounts`) and
    // `find_slot` returns a pointer to one of its slots; every access is a
    // field inside them, which the verifier checks. Another CPU delivering
    // to the same receiver may update the same slot at once: a count may be
    // off by one, no access goes out of the value.
    unsafe {
        // Every slot busy with another (sender, signal): log this one. No
        // flush-and-start-over here: a second inlined flush made the
        // program too complex for the 5.10 verifier (E2BIG, measured).
        let Some(slot) = find_slot(c, rec) else {
            return false;
        };
        if (*slot).seen == 0 {
            (*slot).sender = rec.sender;
            (*slot).sig = rec.sig;
            (*slot).count = 0;
            (*slot).pending = 0;
        }
        if (*slot).seen < u32::MAX {
            (*slot).seen += 1;
        }
        if (*slot).seen <= SIGNAL_FIRST_INDIVIDUAL {
            return false;
        }
        // The sample is the latest delivery that was delivered (one that
        // found the signal already pending changed nothing): the one a
        // death by this signal goes back to.
        let pending = (*slot).pending != 0;
        let keep = pending && rec.result != 0 && (*slot).sample.result == 0;
        if pending {
            let t = match keep {
                true => rec.hdr.ktime_ns,
                false => (*slot).sample.hdr.ktime_ns,
            };
            if (*slot).count == 0 {
                (*slot).first_ns = t;
            }
            (*slot).count += 1;
            (*slot).last_ns = t;
        }
        if !keep {
            (*slot).sample = *rec;
            (*slot).pending = 1;
        }
    }
    true
}

/// The slot of `rec`'s (sender, signal), else a free one.
///
/// # Safety
///
/// `c` must point to a live `SignalCounts` (a map value from a lookup).
#[inline(always)]
unsafe fn find_slot(
    c: *mut SignalCounts,
    rec: &SignalRecord,
) -> Option<*mut tracer_common::SignalSlot> {
    let mut free = None;
    for i in 0..SIGNAL_SLOTS {
        // SAFETY: `c` is live (the caller's contract) and `i` is below
        // `SIGNAL_SLOTS`, the length of `slots`: `s` points inside it.
        let s = unsafe { (*c).slots.as_mut_ptr().add(i) };
        // SAFETY: `s` points to a slot of a live value (above).
        unsafe {
            if (*s).seen == 0 {
                if free.is_none() {
                    free = Some(s);
                }
            } else if (*s).sig == rec.sig
                && (*s).sender.tgid == rec.sender.tgid
                && (*s).sender.start_ns == rec.sender.start_ns
            {
                return Some(s);
            }
        }
    }
    free
}

/// Log what is counted for `target` (before a signal to it is logged, and
/// at its exit, with `forget`), so the log keeps each receiver's order.
#[inline(always)]
pub(crate) fn flush(target: &TaskId, forget: bool) {
    let Some(c) = SIGNAL_COUNTS.get_ptr_mut(&target.tgid) else {
        return;
    };
    // SAFETY: `c` is a non-null map value from the lookup just made, live
    // while the program runs: `flush_counts`'s contract.
    unsafe {
        if (*c).start_ns == target.start_ns {
            flush_counts(c);
        }
    }
    if forget {
        let _ = SIGNAL_COUNTS.remove(&target.tgid);
    }
}

/// # Safety
///
/// `c` must point to a live `SignalCounts` (a map value from a lookup).
#[inline(always)]
unsafe fn flush_counts(c: *mut SignalCounts) {
    for i in 0..SIGNAL_SLOTS {
        // SAFETY: as in `find_slot`: `i` is below the length of `slots`.
        let s = unsafe { (*c).slots.as_mut_ptr().add(i) };
        // SAFETY: `s` points to a slot of a live value; `smp` borrows its
        // sample only while it is copied into the summary and the ring.
        unsafe {
            if (*s).pending == 0 {
                continue;
            }
            if (*s).count > 0 {
                let smp = &(*s).sample;
                let summary = SignalSummaryRecord {
                    hdr: header(RecordKind::SignalSummary as u32),
                    sender: smp.sender,
                    target: smp.target,
                    sender_comm: smp.sender_comm,
                    target_comm: smp.target_comm,
                    sig: smp.sig,
                    count: (*s).count,
                    first_ns: (*s).first_ns,
                    last_ns: (*s).last_ns,
                };
                if EVENTS
                    .output::<SignalSummaryRecord>(
                        &summary,
                        batched_output(size_of::<SignalSummaryRecord>()),
                    )
                    .is_err()
                {
                    count_drop(DropReason::RingBufFull);
                }
            }
            if EVENTS
                .output::<SignalRecord>(&(*s).sample, batched_output(size_of::<SignalRecord>()))
                .is_err()
            {
                count_drop(DropReason::RingBufFull);
            }
            (*s).count = 0;
            (*s).pending = 0;
        }
    }
}

/// # Safety
///
/// `c` must point to a live `SignalCounts` (a map value from a lookup).
#[inline(always)]
unsafe fn clear(c: *mut SignalCounts) {
    for i in 0..SIGNAL_SLOTS {
        // SAFETY: as in `find_slot`: `i` is below the length of `slots`, so
        // `s` points to a slot of the live value.
        unsafe {
            let s = (*c).slots.as_mut_ptr().add(i);
            (*s).seen = 0;
            (*s).count = 0;
            (*s).pending = 0;
        }
    }
}

/// The receiver's counts, created (or reset for a reused pid) as needed;
/// `None` when the map is full (then every delivery is logged).
#[inline(always)]
fn counts_of(target: &TaskId) -> Option<*mut SignalCounts> {
    if let Some(c) = SIGNAL_COUNTS.get_ptr_mut(&target.tgid) {
        // SAFETY: a non-null map value from the lookup just made: `clear`'s
        // contract, and its `start_ns` a field inside it.
        unsafe {
            if (*c).start_ns != target.start_ns {
                // A stale entry of a reused pid: its process is gone.
                clear(c);
                (*c).start_ns = target.start_ns;
            }
        }
        return Some(c);
    }
    let init = SIGNAL_COUNTS_INIT.get_ptr_mut(0)?;
    // SAFETY: this CPU's non-null zeroed slot (only this program uses it, and
    // it does not nest with itself); `insert` copies the value from it.
    unsafe {
        (*init).start_ns = target.start_ns;
        let _ = SIGNAL_COUNTS.insert(&target.tgid, &*init, BPF_NOEXIST as u64);
    }
    SIGNAL_COUNTS.get_ptr_mut(&target.tgid)
}
