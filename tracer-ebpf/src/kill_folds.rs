//! Kill-family calls counted in the kernel. A call none of whose signals
//! was logged — it failed and reached nobody, or every signal it delivered
//! was counted (signal_agg.rs: a flood the receiver handles) — is logged as
//! it returns the first time its kind (syscall, signal, target and thread
//! as given, return value) is seen from a process, marked as opening a
//! fold; the same call again is counted in the process's entry of
//! `KILL_FOLDS`, the latest kept, and user space logs the count (one
//! `kill_call` with `count`) when the process has exited or tracer stops.
//! So a loop of `kill(2)` at a pid that does not exist, or at a process
//! that handles the signal, costs one map update a call, not a ring record.
//! The rule is in docs/event-log.md.
use aya_ebpf::bindings::BPF_NOEXIST;
use tracer_common::{KillCallRecord, KillFoldSlot, KillFolds, TaskId, KILL_FOLD_SLOTS};

use crate::maps::{copy_words, KILL_FOLDS, KILL_FOLDS_INIT};

/// Count `rec` (a call none of whose signals was logged) instead of
/// logging it? `false`: log it (its kind's first call, then marked
/// `opened_fold`; no slot free, no room, or a stale entry of a reused pid
/// user space has not taken yet).
#[inline(always)]
pub(crate) fn count(rec: &mut KillCallRecord) -> bool {
    let Some(c) = folds_of(&rec.sender) else {
        return false;
    };
    // SAFETY: `c` is a non-null map value (a whole `KillFolds`) and
    // `find_slot` returns a pointer to one of its slots; every access is a
    // field inside them, which the verifier checks. Two threads of the
    // process failing at once may race on a slot: a count may be off by
    // one, no access goes out of the value.
    unsafe {
        let (slot, free) = find_slot(c, rec);
        if let Some(s) = slot {
            let n = (*s).rec.count;
            let first = match n {
                0 => rec.hdr.ktime_ns,
                _ => (*s).rec.first_ns,
            };
            copy_words(&mut (*s).rec, rec);
            (*s).rec.count = n.saturating_add(1);
            (*s).rec.first_ns = first;
            return true;
        }
        if let Some(s) = free {
            (*s).used = 1;
            copy_words(&mut (*s).rec, rec);
            (*s).rec.count = 0;
            rec.opened_fold = 1;
        }
    }
    false
}

/// The slot of `rec`'s kind, else a free one.
///
/// # Safety
///
/// `c` must point to a live `KillFolds` (a map value from a lookup).
#[inline(always)]
unsafe fn find_slot(
    c: *mut KillFolds,
    rec: &KillCallRecord,
) -> (Option<*mut KillFoldSlot>, Option<*mut KillFoldSlot>) {
    let mut free = None;
    for i in 0..KILL_FOLD_SLOTS {
        // SAFETY: `c` is live (the caller's contract) and `i` is below
        // `KILL_FOLD_SLOTS`, the length of `slots`: `s` points inside it.
        let s = unsafe { (*c).slots.as_mut_ptr().add(i) };
        // SAFETY: `s` points to a slot of a live value (above).
        unsafe {
            if (*s).used == 0 {
                if free.is_none() {
                    free = Some(s);
                }
                continue;
            }
            let r = &(*s).rec;
            if r.syscall == rec.syscall
                && r.sig == rec.sig
                && r.target_arg == rec.target_arg
                && r.tid_arg == rec.tid_arg
                && r.ret == rec.ret
            {
                return (Some(s), None);
            }
        }
    }
    (None, free)
}

/// The caller's entry, created as needed; `None` when the map is full or
/// the entry is a previous process's of the same pid (user space takes it
/// at that process's exit: until then this one's calls are logged).
#[inline(always)]
fn folds_of(sender: &TaskId) -> Option<*mut KillFolds> {
    if let Some(c) = KILL_FOLDS.get_ptr_mut(&sender.tgid) {
        // SAFETY: a non-null map value from the lookup just made.
        let same = unsafe { (*c).start_ns == sender.start_ns };
        return same.then_some(c);
    }
    let init = KILL_FOLDS_INIT.get_ptr_mut(0)?;
    // SAFETY: this CPU's non-null zeroed slot (only the sys_exit programs
    // use it, and they do not nest with themselves); its slots are never
    // written, `insert` copies the value from it.
    unsafe {
        (*init).start_ns = sender.start_ns;
        let _ = KILL_FOLDS.insert(&sender.tgid, &*init, BPF_NOEXIST as u64);
    }
    let c = KILL_FOLDS.get_ptr_mut(&sender.tgid)?;
    // SAFETY: as above; another CPU may have inserted first, for the same
    // process (the same pid cannot belong to two live processes).
    let same = unsafe { (*c).start_ns == sender.start_ns };
    same.then_some(c)
}
