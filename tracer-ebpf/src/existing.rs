//! A task iterator (`iter/task`): one record per process already running,
//! with its exact start time, which /proc only gives in clock ticks.
use core::mem::size_of;

use aya_ebpf::cty::c_void;
use tracer_common::{DropReason, ExistingRecord, RecordKind};

use crate::{
    maps::{batched_submit, count_drop, off, EVENTS},
    task::{comm, header, ns_pid, read, task_id, Probed, Ptr},
};

/// `struct bpf_iter__task { struct bpf_iter_meta *meta; struct task_struct *task; }`
pub(crate) fn on_task(ctx: *mut c_void) -> Result<i32, ()> {
    // SAFETY: the iterator's context is a `struct bpf_iter__task`, which the
    // verifier types: a load of its second word (the task pointer, maybe
    // null at the end of the iteration) is the access it allows.
    let task: Ptr = unsafe { *(ctx as *const Ptr).add(1) };
    if task.is_null() {
        return Ok(0); // the end of the iteration
    }
    let id = task_id::<Probed>(task).ok_or(())?;
    if id.tid != id.tgid || id.tgid == 0 {
        return Ok(0); // processes only, and only those the tracer can see
    }
    let ppid = read::<Ptr>(task, off(|o| &o.task_real_parent))
        .and_then(task_id::<Probed>)
        .map_or(0, |p| p.tgid);
    let Some(mut entry) = EVENTS.reserve::<ExistingRecord>(0) else {
        count_drop(DropReason::RingBufFull);
        return Ok(0);
    };
    entry.write(ExistingRecord {
        hdr: header(RecordKind::Existing as u32),
        task: id,
        ppid,
        _pad: 0,
        comm: comm::<Probed>(task),
        ns: ns_pid(task),
    });
    entry.submit(batched_submit(size_of::<ExistingRecord>()));
    Ok(0)
}
