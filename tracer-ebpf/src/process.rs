//! sched_process_{fork,exec,exit}: scope inheritance and process lifecycle.
use core::mem::size_of;

use aya_ebpf::{
    helpers::{
        bpf_get_current_pid_tgid, bpf_probe_read_kernel_str_bytes, generated::bpf_probe_read_user,
    },
    programs::BtfTracePointContext,
};
use tracer_common::{
    DropReason, ExitRecord, ForkRecord, RecordKind, ARGV_LEN, EXEC_ENV_SCANNED, EXEC_HEADER_LEN,
    EXIT_GROUP_DEAD, FORK_IS_THREAD,
};

use crate::{
    diag::{self, checked_task},
    maps::{
        argv_mask, batched_output, batched_submit, config, count_drop, is_tracked, off,
        tracer_tgid, track, untrack, EVENTS, EXEC_SCRATCH, INFLIGHT,
    },
    task::{comm, header, ns_pid, read, task_id, Ptr, TaskRead, Typed},
};

/// The tracepoints' task arguments are BTF-typed: their fields are read by
/// plain loads ([`Typed`]), a helper call each no more (fork, exec and exit
/// run for every process of the machine).
pub(crate) fn on_fork(ctx: &BtfTracePointContext) -> Result<u32, ()> {
    let parent: Ptr = ctx.arg(0);
    let child: Ptr = ctx.arg(1);
    let parent_id = checked_task(task_id::<Typed>(parent), diag::FORK_PARENT).ok_or(())?;
    let mut child_id = checked_task(task_id::<Typed>(child), diag::FORK_CHILD).ok_or(())?;
    let is_thread = child_id.tgid == parent_id.tgid;
    if !is_thread {
        // A new process leads its own group; its leader pointer may still be
        // the parent's in odd clone flag combinations, so read its own start.
        // A probe read, as in `task_id`.
        child_id.start_ns = read(child, off(|o| &o.task_start_boottime)).ok_or(())?;
    }

    let from_tracer = parent_id.tgid == tracer_tgid();
    if from_tracer {
        // The tracer forks only the wrapped command, and only while adopting.
        if is_thread || config().adopt_children == 0 {
            return Ok(0);
        }
    } else if !is_tracked(parent_id.tgid, parent_id.start_ns) {
        return Ok(0);
    }
    if !is_thread {
        track(child_id.tgid, child_id.start_ns);
    }

    let Some(mut entry) = EVENTS.reserve::<ForkRecord>(0) else {
        count_drop(DropReason::RingBufFull);
        return Ok(0);
    };
    entry.write(ForkRecord {
        hdr: header(RecordKind::Fork as u32),
        parent: parent_id,
        child: child_id,
        comm: comm::<Typed>(parent),
        flags: if is_thread { FORK_IS_THREAD } else { 0 },
        _pad: 0,
        child_ns: if is_thread {
            Default::default()
        } else {
            ns_pid(child)
        },
    });
    entry.submit(batched_submit(size_of::<ForkRecord>()));
    Ok(0)
}

/// `LOOP`: the envp walk by `bpf_loop` (exec_env.rs). `R`: how the task is
/// read. The unrolled walk's program (5.10–5.16) keeps probe reads: 5.10's
/// verifier walks it close to its limit, and the same code with typed loads
/// was refused as too complex (E2BIG, VM run) in one of two forms tried.
#[inline(always)]
pub(crate) fn on_exec<const LOOP: bool, R: TaskRead>(
    ctx: &BtfTracePointContext,
) -> Result<u32, ()> {
    let task: Ptr = ctx.arg(0);
    let old_tid: i32 = ctx.arg(1);
    let bprm: Ptr = ctx.arg(2);
    let id = checked_task(task_id::<R>(task), diag::EXEC).ok_or(())?;
    if !is_tracked(id.tgid, id.start_ns) {
        return Ok(0);
    }
    let Some(scratch) = EXEC_SCRATCH.get_ptr_mut(0) else {
        return Ok(0);
    };
    // Too large for the BPF stack: filled in the per-CPU scratch, output
    // cut to the argv it holds.
    // SAFETY: `scratch` is this CPU's non-null slot, a whole `ExecScratch`
    // (a program does not nest with itself on a CPU). The argv copy is at
    // most `ARGV_LEN`, the size of `argv`; the output slice is the header plus
    // a length masked below `2 * ARGV_LEN`, inside the record and its
    // `ARGV_LEN` bytes of slack (the verifier checks both sizes against the
    // map's value). The probe reads never fault: a bad address is an error.
    unsafe {
        let rec = &raw mut (*scratch).rec;
        (*rec).hdr = header(RecordKind::Exec as u32);
        (*rec).task = id;
        (*rec).old_tid = old_tid as u32;
        (*rec).comm = comm::<R>(task);
        (*rec).flags = 0;
        (*rec).filename[0] = 0;
        if let Some(name) = read::<Ptr>(bprm, off(|o| &o.bprm_filename)) {
            let _ = bpf_probe_read_kernel_str_bytes(name, &mut (*rec).filename);
        }
        // argv lives in the new image's memory: [mm->arg_start, mm->arg_end).
        let mut copied = 0u32;
        let mut size = 0u32;
        if let Some(mm) = R::read::<Ptr>(task, off(|o| &o.task_mm)) {
            let start: u64 = R::read(mm, off(|o| &o.mm_arg_start)).unwrap_or(0);
            let end: u64 = R::read(mm, off(|o| &o.mm_arg_end)).unwrap_or(0);
            if end > start {
                size = (end - start) as u32;
                let mut len = size;
                if len > ARGV_LEN as u32 {
                    len = ARGV_LEN as u32;
                }
                // Masked as well, at the call: 5.10's verifier lost the
                // bound of the comparison above when the compiler spilled
                // `len` before it ("R2 unbounded memory access"); the mask
                // (within the scratch's slack) bounds it whatever the
                // registers do.
                let len = (len as u64 & argv_mask()) as u32;
                if bpf_probe_read_user((*rec).argv.as_mut_ptr() as *mut _, len, start as *const _)
                    == 0
                {
                    copied = len;
                } else {
                    diag::argv_unreadable(id.tgid, start, len);
                }
            }
        }
        // The runner variables go first, stamped as this record is: user
        // space holds them for it (`run/session/enrich.rs`).
        if let Some(mm) = R::read::<Ptr>(task, off(|o| &o.task_mm)) {
            if crate::exec_env::send_runner_vars::<LOOP>(mm, id, (*rec).hdr.ktime_ns) {
                (*rec).flags = EXEC_ENV_SCANNED;
            }
        }
        (*rec).argv_len = copied;
        (*rec).args_size = size;
        // Bounded by the mask for every verifier: within the scratch's slack.
        let total = EXEC_HEADER_LEN + (copied as u64 & argv_mask()) as usize;
        let bytes = core::slice::from_raw_parts(scratch as *const u8, total);
        if EVENTS.output::<[u8]>(bytes, batched_output(total)).is_err() {
            count_drop(DropReason::RingBufFull);
        }
    }
    Ok(0)
}

pub(crate) fn on_exit(ctx: &BtfTracePointContext) -> Result<u32, ()> {
    let task: Ptr = ctx.arg(0);
    // Every exiting thread's last kill call, whoever it is: kept by the kill
    // programs for its next call (maps.rs), so freed here or never. The
    // hook runs in the exiting thread, whose tid the helper gives.
    let _ = INFLIGHT.remove(&(bpf_get_current_pid_tgid() as u32));
    let id = checked_task(task_id::<Typed>(task), diag::EXIT).ok_or(())?;
    if !is_tracked(id.tgid, id.start_ns) {
        return Ok(0);
    }
    let exit_code: i32 = Typed::read(task, off(|o| &o.task_exit_code)).unwrap_or(0);
    // signal->live has already been decremented for this thread: zero means
    // it was the last one (the tracepoint's own group_dead arg is 6.16+ only).
    let group_dead = Typed::read::<Ptr>(task, off(|o| &o.task_signal))
        .and_then(|sig| Typed::read::<i32>(sig, off(|o| &o.signal_live)))
        .map(|live| live == 0)
        .unwrap_or(id.tid == id.tgid);
    if group_dead {
        untrack(id.tgid);
        // Its stderr tail and its counted signals go first: the exit
        // record is what logs the tail, and the log keeps the order.
        crate::stderr::flush_tail(&id);
        crate::fd2::forget(id.tgid);
        crate::signal_agg::flush(&id, true);
    }
    let Some(mut entry) = EVENTS.reserve::<ExitRecord>(0) else {
        count_drop(DropReason::RingBufFull);
        return Ok(0);
    };
    entry.write(ExitRecord {
        hdr: header(RecordKind::Exit as u32),
        task: id,
        comm: comm::<Typed>(task),
        exit_code,
        flags: if group_dead { EXIT_GROUP_DEAD } else { 0 },
    });
    entry.submit(batched_submit(size_of::<ExitRecord>()));
    Ok(0)
}
