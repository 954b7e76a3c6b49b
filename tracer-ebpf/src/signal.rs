//! signal_generate: every signal that touches the run, joined in the kernel to
//! the kill-family call (if any) the sending thread is inside.
use core::mem::size_of;

use aya_ebpf::{helpers::bpf_get_current_pid_tgid, programs::BtfTracePointContext};
use tracer_common::{
    signals::{SIGSYS, SI_KERNEL, SI_USER, SYS_SECCOMP},
    DropReason, RecordKind, SignalRecord,
};

use crate::{
    maps::{batched_output, count_drop, is_tracked, tracer_tgid, view, wake_now, EVENTS, INFLIGHT},
    signal_agg,
    task::{comm, current, current_id, header, read, task_id, Probed, Ptr, Typed},
};

/// offsetof(kernel_siginfo, si_errno); `si_code` follows it.
const SI_ERRNO_OFF: u32 = 4;
/// offsetof(kernel_siginfo, _sifields._sigsys._syscall) on 64-bit: the
/// union starts at 16, after the 8-byte `_call_addr`.
const SI_SYSCALL_OFF: u32 = 24;

pub(crate) fn on_generate(ctx: &BtfTracePointContext) -> Result<u32, ()> {
    let sig: i32 = ctx.arg(0);
    let info: Ptr = ctx.arg(1);
    let target: Ptr = ctx.arg(2);
    let group: i32 = ctx.arg(3);
    let result: i32 = ctx.arg(4);

    // `target` is the tracepoint's BTF-typed argument: plain loads
    // ([`Typed`]); the sender is the running task, read by probe reads
    // (this program runs on 5.10 too, before `bpf_get_current_task_btf`).
    let me = current();
    let target_id = task_id::<Typed>(target).ok_or(())?;
    let target_in = is_tracked(target_id.tgid, target_id.start_ns);
    // A signal to oneself (a self-signal storm's every one; `raise`): the
    // sender is the target, already read by plain loads and looked up —
    // two probe reads and a map lookup fewer.
    let own = me == target;
    let sender = match own {
        true => target_id,
        false => current_id::<Probed>().ok_or(())?,
    };
    let sender_in = sender.tgid != tracer_tgid()
        && match own {
            true => target_in,
            false => is_tracked(sender.tgid, sender.start_ns),
        };
    if !target_in && !sender_in {
        return Ok(0);
    }

    // SEND_SIG_NOINFO (0) and SEND_SIG_PRIV (1) are not pointers; the kernel's
    // own tracepoint maps them to SI_USER and SI_KERNEL the same way.
    // A real one: `si_errno` and `si_code`, adjacent in the uapi layout, in
    // one probe read (a helper call each was ~20 ns of every signal). Not a
    // plain load: 6.18's verifier types this argument as a scalar (it may be
    // one of the two above), measured.
    let (code, errno) = match info as usize {
        0 => (SI_USER, 0),
        1 => (SI_KERNEL, 0),
        _ => match read::<[i32; 2]>(info, SI_ERRNO_OFF) {
            Some([errno, code]) => (code, errno),
            None => (0, 0),
        },
    };

    // A seccomp kill names the forbidden syscall only in the siginfo.
    // Straight-line with -1 for "none" (no Option payload on the stack:
    // the 5.10 and 6.1 verifiers reject LLVM's uninitialised slot reads).
    let seccomp_nr: i32 = if sig == SIGSYS && code == SYS_SECCOMP && info as usize > 1 {
        read::<i32>(info, SI_SYSCALL_OFF).unwrap_or(-1)
    } else {
        -1
    };

    let target_comm = comm::<Typed>(target);
    let sender_comm = match own {
        true => target_comm,
        false => comm::<Probed>(me),
    };
    // The sending thread's host tid keys its call. A signal to oneself in
    // the host's view: the target's tid, already loaded (a helper call less).
    let tid = match own && view().0 == 0 {
        true => target_id.tid,
        false => bpf_get_current_pid_tgid() as u32,
    };
    let (syscall, call_id, target_arg) = match INFLIGHT.get_ptr_mut(&tid) {
        // SAFETY: a non-null pointer to this thread's own entry (keyed by its
        // tid): only this thread's kill-call programs touch it, and they
        // cannot run while this one does on its CPU. A done call's entry
        // (`call_id` 0) is not this signal's.
        Some(call) if unsafe { (*call).call_id } != 0 => unsafe {
            (*call).deliveries += 1;
            if (*call).sender_known == 0 {
                (*call).sender = sender;
                (*call).sender_comm = sender_comm;
                (*call).sender_known = 1;
            }
            ((*call).syscall, (*call).call_id, (*call).target_arg)
        },
        _ => (0, 0, 0),
    };

    let rec = SignalRecord {
        hdr: header(RecordKind::Signal as u32),
        sender,
        target: target_id,
        sender_comm,
        target_comm,
        sig,
        errno,
        code,
        group,
        result,
        syscall,
        call_id,
        target_arg,
        seccomp_nr,
        seccomp_seen: (seccomp_nr >= 0) as u32,
    };
    // A flood between two processes of the run is counted, not logged;
    // what crosses the run's boundary is always logged (foreign signals).
    if target_in
        && sender_in
        && signal_agg::countable(target, sig)
        && signal_agg::count(&target_id, &rec)
    {
        return Ok(0);
    }
    // Its call is logged, not folded (kill_folds.rs). Looked up again, not
    // the pointer above kept: a pointer that may be null held across the
    // counting above doubled the states the 5.10 verifier walks (E2BIG).
    if call_id != 0 {
        if let Some(call) = INFLIGHT.get_ptr_mut(&tid) {
            // SAFETY: as above: this thread's own entry.
            unsafe { (*call).logged += 1 };
        }
    }
    if target_in {
        // What was counted for this receiver comes first: the log keeps
        // its order.
        signal_agg::flush(&target_id, false);
    }
    // From outside the run: its sender's argv is read while it lives. Not
    // a SIGCHLD: its sender is a child past its exit hook (already
    // untracked), one per process of a fork storm.
    let flags = match sender_in || sig == tracer_common::signals::SIGCHLD {
        true => batched_output(size_of::<SignalRecord>()),
        false => wake_now(),
    };
    if EVENTS.output::<SignalRecord>(&rec, flags).is_err() {
        count_drop(DropReason::RingBufFull);
    }
    Ok(0)
}
