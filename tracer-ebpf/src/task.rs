//! Reads from kernel structs through offsets resolved at load time.
use aya_ebpf::helpers::{bpf_get_current_task, bpf_ktime_get_boot_ns, bpf_probe_read_kernel};
use tracer_common::{RecordHeader, TaskId, COMM_LEN, OFFSET_NONE};

use crate::maps::off;

pub type Ptr = *const u8;

/// Read a `T` at `base + offset`; `None` when the offset is unknown or the read faults.
#[inline(always)]
pub fn read<T: Copy>(base: Ptr, offset: u32) -> Option<T> {
    if base.is_null() || offset == OFFSET_NONE {
        return None;
    }
    unsafe { bpf_probe_read_kernel(base.add(offset as usize) as *const T).ok() }
}

#[inline(always)]
pub fn current() -> Ptr {
    unsafe { bpf_get_current_task() as Ptr }
}

/// `(tid, tgid, leader start_boottime)` of a task.
#[inline(always)]
pub fn task_id(task: Ptr) -> Option<TaskId> {
    let tid: i32 = read(task, off(|o| &o.task_pid))?;
    let tgid: i32 = read(task, off(|o| &o.task_tgid))?;
    let leader: Ptr = read(task, off(|o| &o.task_group_leader))?;
    let start_ns: u64 = read(leader, off(|o| &o.task_start_boottime))?;
    Some(TaskId {
        tid: tid as u32,
        tgid: tgid as u32,
        start_ns,
    })
}

#[inline(always)]
pub fn comm(task: Ptr) -> [u8; COMM_LEN] {
    read(task, off(|o| &o.task_comm)).unwrap_or([0u8; COMM_LEN])
}

#[inline(always)]
pub fn header(kind: u32) -> RecordHeader {
    RecordHeader {
        kind,
        cpu: unsafe { aya_ebpf::helpers::bpf_get_smp_processor_id() },
        ktime_ns: unsafe { bpf_ktime_get_boot_ns() },
    }
}
