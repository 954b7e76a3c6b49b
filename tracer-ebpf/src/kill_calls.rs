//! The kill-family syscalls: the target exactly as the caller gave it and the
//! return value. A kill() that fails with ESRCH produces no signal_generate;
//! this is the only trace of it.
use core::mem::size_of;

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    programs::{BtfTracePointContext, FEntryContext, FExitContext, TracePointContext},
};
use tracer_common::{
    DropReason, KillAbi, KillCallRecord, KillSyscall, RecordHeader, RecordKind, StderrSyscall,
};

use crate::{
    kill_folds,
    maps::{
        batched_output, count_drop, count_drop_unlogged, global_field, is_tracked, off, Inflight,
        EVENTS, INFLIGHT, TRACKED,
    },
    probe::{self, boot_ns, tp_field, Plain},
    task::{comm, current, current_id, Probed, Ptr, TaskRead},
};

/// The running architecture's syscall numbers and pt_regs layout
/// (`tracer_common::KillAbi::HOST`), set by user space at load.
#[unsafe(no_mangle)]
pub(crate) static KILL_ABI: KillAbi = KillAbi::NONE;

/// The kill-family syscall numbered `nr`: `KillAbi::syscall` one volatile
/// field at a time. raw_syscalls runs this on every syscall's entry and
/// exit, and reading the whole ABI first (`global_field(&KILL_ABI, |a| a)`)
/// copied its 104 bytes onto the stack each time (13 loads, 2 spills).
#[inline(always)]
fn abi_nr(id: i64) -> Option<KillSyscall> {
    if id < 0 {
        None
    } else if id == nr(|a| &a.nr[0]) {
        Some(KillSyscall::Kill)
    } else if id == nr(|a| &a.nr[1]) {
        Some(KillSyscall::Tkill)
    } else if id == nr(|a| &a.nr[2]) {
        Some(KillSyscall::Tgkill)
    } else if id == nr(|a| &a.nr[3]) {
        Some(KillSyscall::RtSigqueueinfo)
    } else if id == nr(|a| &a.nr[4]) {
        Some(KillSyscall::RtTgsigqueueinfo)
    } else if id == nr(|a| &a.nr[5]) {
        Some(KillSyscall::PidfdSendSignal)
    } else {
        None
    }
}

/// One syscall number of `KILL_ABI`, read volatilely (see `global_field`).
#[inline(always)]
fn nr(f: fn(&KillAbi) -> &i64) -> i64 {
    global_field(&KILL_ABI, f)
}

#[inline(always)]
fn regs_off(f: fn(&KillAbi) -> &u32) -> u32 {
    global_field(&KILL_ABI, f)
}

// syscalls:sys_{enter,exit}_* records: __syscall_nr at 8, then 8-byte slots.
const TP_NR: usize = 8;
const TP_ARG0: usize = 16;
const TP_RET: usize = 16;

pub(crate) fn on_enter(ctx: &TracePointContext) -> Result<u32, ()> {
    let nr: i32 = tp_field(ctx, TP_NR).ok_or(())?;
    let Some(syscall) = abi_nr(nr as i64) else {
        return Ok(0);
    };
    let arg = |i: usize| -> i64 { tp_field(ctx, TP_ARG0 + 8 * i).unwrap_or(0) };
    enter::<true>(syscall, arg(0), arg(1), arg(2));
    Ok(0)
}

pub(crate) fn on_exit(ctx: &TracePointContext) -> Result<u32, ()> {
    let ret: i64 = tp_field(ctx, TP_RET).ok_or(())?;
    exit(ret);
    Ok(0)
}

/// Syscall argument `I` (0..2) from the `struct pt_regs` a syscall entry
/// got. In fentry and tp_btf programs that pointer is BTF-typed: a plain
/// load, which the verifier checks against the struct and makes fault-safe
/// (a fault reads 0), costs a fraction of a probe-read helper call — and
/// these run on every write (last words) or every syscall (sys_exit).
#[inline(always)]
pub(crate) fn regs_arg<const I: usize>(regs: Ptr) -> i64 {
    regs_field(regs, regs_off(|a| &a.regs_arg[I]))
}

/// A field of the BTF-typed `struct pt_regs *` a program got as its
/// argument (only such a pointer: see the SAFETY note).
#[inline(always)]
fn regs_field<T: Plain>(regs: Ptr, off: u32) -> T {
    // SAFETY: `regs` is the pt_regs pointer of an fentry or tp_btf program's
    // context, which the verifier types as PTR_TO_BTF_ID: it accepts this
    // load only at an offset and size inside `struct pt_regs`, and turns it
    // into a fault-safe probe load (a fault reads 0). A load through any
    // other value is refused when the program loads, never run. `T: Plain`.
    unsafe { core::ptr::read(regs.wrapping_add(off as usize) as *const T) }
}

/// Syscall arguments 0..2 from the `struct pt_regs` a syscall entry got.
#[inline(always)]
fn regs_args(regs: Ptr) -> (i64, i64, i64) {
    (
        regs_arg::<0>(regs),
        regs_arg::<1>(regs),
        regs_arg::<2>(regs),
    )
}

/// What raw_syscalls' sys_enter saw (one program for every syscall).
pub(crate) enum RawEnter {
    /// Neither a kill-family call nor a write/writev: nothing to do.
    Other,
    /// A kill-family call, recorded.
    Kill,
    /// write/writev: last words' slot in its tail-call table.
    Stderr(StderrSyscall),
}

/// Runs on every syscall: the number is compared before anything else.
/// A compat syscall (ia32, AArch32) is numbered and laid out another way:
/// one that shares a native number (ia32's getgid32 is x86-64's tkill) is
/// another call, so it is left alone rather than misread. For write/writev
/// the stderr programs ask, after the fd: every write of the machine comes
/// through here, and a read of the task for each would tax them all.
///
/// Makes no bpf-to-bpf call (no aya-log call: a full inflight map is counted
/// here, not logged): `raw_sys_enter` tail-calls, and arm64 kernels before
/// 6.0 refuse a program with both ("tail_calls are not allowed in programs
/// with bpf-to-bpf calls"); tests/loader check the object for it.
#[inline(always)]
pub(crate) fn on_raw_enter(ctx: &BtfTracePointContext) -> RawEnter {
    let id: i64 = ctx.arg(1);
    // write and writev first: what this rung sees most from a run. Every
    // other syscall of the machine pays eight loads and compares (`abi_nr`).
    // A negative number (the ABI's unset `-1`, or syscall(-1)) is none.
    if id < 0 {
        return RawEnter::Other;
    }
    if id == nr(|a| &a.stderr_nr[0]) {
        return RawEnter::Stderr(StderrSyscall::Write);
    }
    if id == nr(|a| &a.stderr_nr[1]) {
        return RawEnter::Stderr(StderrSyscall::Writev);
    }
    let Some(syscall) = abi_nr(id) else {
        return RawEnter::Other;
    };
    if task_is_compat::<Probed>(current()) {
        return RawEnter::Other;
    }
    let (a0, a1, a2) = regs_args(ctx.arg(0));
    enter::<false>(syscall, a0, a1, a2);
    RawEnter::Kill
}

/// Whether the current syscall is a compat one: x86-64's `TS_COMPAT` (set
/// for an `int 0x80` or sysenter syscall, even from a 64-bit process), or
/// arm64's `TIF_32BIT` (an AArch32 task). False when the kernel's BTF did
/// not say where the word is. `task` is the running task as `R` reads it.
#[inline(always)]
pub(crate) fn is_compat<R: TaskRead>(task: Ptr, mask: u32) -> bool {
    let at = off(|o| &o.task_compat_word);
    mask != 0 && R::read::<u32>(task, at).is_some_and(|w| w & mask != 0)
}

/// [`is_compat`] with the running architecture's mask.
#[inline(always)]
pub(crate) fn task_is_compat<R: TaskRead>(task: Ptr) -> bool {
    is_compat::<R>(task, regs_off(|a| &a.compat_mask))
}

pub(crate) fn on_raw_exit(ctx: &BtfTracePointContext) -> Result<u32, ()> {
    let regs: Ptr = ctx.arg(0);
    let id: i32 = regs_field(regs, regs_off(|a| &a.regs_nr));
    if abi_nr(id as i64).is_none() {
        return Ok(0);
    }
    let ret: i64 = ctx.arg(1);
    exit(ret);
    Ok(0)
}

/// fentry on the syscall's entry symbol (`__x64_sys_kill(const struct
/// pt_regs *)`): one program per syscall, so the syscall is known.
#[inline(always)]
pub(crate) fn on_fentry(ctx: &FEntryContext, syscall: KillSyscall) -> Result<u32, ()> {
    let regs: Ptr = ctx.arg(0);
    let (a0, a1, a2) = regs_args(regs);
    enter::<true>(syscall, a0, a1, a2);
    Ok(0)
}

/// fexit on the same symbol: arguments, then the return value.
#[inline(always)]
pub(crate) fn on_fexit(ctx: &FExitContext) -> Result<u32, ()> {
    let ret: i64 = ctx.arg(1);
    exit(ret);
    Ok(0)
}

/// Arguments are raw register values: narrow the int ones before use.
/// `LOG`: a full inflight map is also logged (`--debug-ebpf`).
#[inline(always)]
fn enter<const LOG: bool>(syscall: KillSyscall, a0: i64, a1: i64, a2: i64) {
    let (target_arg, tid_arg, sig) = match syscall {
        KillSyscall::Kill | KillSyscall::Tkill => (a0 as i32 as i64, 0, a1 as i32),
        KillSyscall::Tgkill | KillSyscall::RtTgsigqueueinfo => {
            (a0 as i32 as i64, a1 as i32 as i64, a2 as i32)
        }
        KillSyscall::RtSigqueueinfo | KillSyscall::PidfdSendSignal => {
            (a0 as i32 as i64, 0, a1 as i32)
        }
    };
    let tid = bpf_get_current_pid_tgid() as u32;
    let call_id = boot_ns();
    // Stored for every caller: an outsider's kill(-pgid) into the run is
    // joined to its deliveries too. A thread's earlier call left its entry:
    // written in place, no insert (a self-signal storm's every call), and
    // field by field: the sender's fields are the first delivery's to
    // write (a whole `Inflight` stored was ~40 ns more a call).
    if let Some(slot) = INFLIGHT.get_ptr_mut(&tid) {
        // SAFETY: a non-null pointer to this thread's own entry (keyed by
        // its tid): only this thread's programs touch it, and none of them
        // runs while this one does on its CPU.
        unsafe {
            (*slot).call_id = call_id;
            (*slot).target_arg = target_arg;
            (*slot).tid_arg = tid_arg;
            (*slot).syscall = syscall as u32;
            (*slot).sig = sig;
            (*slot).deliveries = 0;
            (*slot).logged = 0;
            (*slot).sender_known = 0;
        }
        return;
    }
    // Built in place, all-zero word by word: as a literal (or moved), its
    // zeroed sender fields became `memset` calls, bpf-to-bpf calls
    // `raw_sys_enter` must not make (it tail-calls; see `on_raw_enter`).
    let mut new = core::mem::MaybeUninit::<Inflight>::uninit();
    let p = new.as_mut_ptr();
    // SAFETY: `p` points to this frame's `new`; every word is stored before
    // the fields are (integers and byte arrays: all-zero is a valid
    // `Inflight`), volatile so the stores stay stores; `call` borrows it
    // after.
    let call = unsafe {
        for i in 0..INFLIGHT_WORDS {
            core::ptr::write_volatile((p as *mut u64).add(i), 0);
        }
        (*p).call_id = call_id;
        (*p).target_arg = target_arg;
        (*p).tid_arg = tid_arg;
        (*p).syscall = syscall as u32;
        (*p).sig = sig;
        &*p
    };
    if INFLIGHT.insert(&tid, call, 0).is_err() {
        if LOG {
            count_drop(DropReason::InflightMapFull);
        } else {
            count_drop_unlogged(DropReason::InflightMapFull);
        }
    }
}

/// `Inflight` in 8-byte words.
const INFLIGHT_WORDS: usize = size_of::<Inflight>() / 8;
const _: () = assert!(size_of::<Inflight>() == 8 * INFLIGHT_WORDS);

#[inline(always)]
fn exit(ret: i64) {
    let tid = bpf_get_current_pid_tgid() as u32;
    let Some(slot) = INFLIGHT.get_ptr_mut(&tid) else {
        return;
    };
    // SAFETY: a non-null pointer to this thread's own entry (keyed by its
    // tid), copied out and marked done at once: only this thread's programs
    // touch it (signal_generate counts deliveries into it), none while this
    // one runs on its CPU. Kept for the thread's next call, not removed.
    let call = unsafe {
        let call = *slot;
        (*slot).call_id = 0;
        call
    };
    if call.call_id == 0 {
        return;
    }
    let (sender, sender_comm) = match call.sender_known {
        0 => match current_id::<Probed>() {
            Some(id) => (id, comm::<Probed>(current())),
            None => return,
        },
        _ => (call.sender, call.sender_comm),
    };
    // Asked only for a call that delivered nothing (two map lookups fewer
    // for every call that did: a self-signal storm's).
    let aimed_at_run = || {
        // SAFETY: only whether the entry exists is used; the reference is
        // not read.
        call.target_arg > 0
            && unsafe { TRACKED.get(&(call.target_arg as u32)) }.is_some()
            && call.syscall != KillSyscall::PidfdSendSignal as u32
    };
    if call.deliveries == 0 && !aimed_at_run() && !is_tracked(sender.tgid, sender.start_ns) {
        return;
    }
    // Stamped with the call's entry time (its id) until it is known to be
    // logged: a counted call needs no clock read of its own (~25 ns on the
    // EPYC guest, every call of a self-signal storm).
    let hdr = RecordHeader {
        kind: RecordKind::KillCall as u32,
        _pad: 0,
        ktime_ns: call.call_id,
    };
    let mut rec = KillCallRecord {
        hdr,
        sender,
        comm: sender_comm,
        syscall: call.syscall,
        sig: call.sig,
        target_arg: call.target_arg,
        tid_arg: call.tid_arg,
        ret,
        call_id: call.call_id,
        deliveries: call.deliveries,
        opened_fold: 0,
        count: 1,
        first_ns: hdr.ktime_ns,
    };
    // A call none of whose signals was logged: it failed and reached
    // nobody, or every delivery was counted (a flood between two of the
    // run's processes that cannot end its receiver, signal_agg.rs). Seen
    // before from this process: counted, not logged (a flood of them must
    // not fill the ring: a self-signal storm's 400,000 calls were 400,000
    // records, 2.2x the bare run's time).
    let foldable = call.logged == 0 && (ret < 0 || call.deliveries > 0);
    if foldable && kill_folds::count(&mut rec) {
        return;
    }
    // Logged: its own time now (the CPU is the provisional header's).
    rec.hdr.ktime_ns = probe::boot_ns();
    rec.first_ns = rec.hdr.ktime_ns;
    if EVENTS
        .output::<KillCallRecord>(&rec, batched_output(size_of::<KillCallRecord>()))
        .is_err()
    {
        count_drop(DropReason::RingBufFull);
    }
}
