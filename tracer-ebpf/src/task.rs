//! Reads from kernel structs through offsets resolved at load time.
use aya_ebpf::helpers::bpf_get_current_pid_tgid;
use tracer_common::{NsPid, RecordHeader, TaskId, COMM_LEN, OFFSET_NONE};

use crate::{
    maps::{off, view},
    probe::{self, Plain},
};

pub(crate) type Ptr = *const u8;

/// Read a `T` at `base + offset`; `None` when the offset is unknown or the read faults.
#[inline(always)]
pub(crate) fn read<T: Plain>(base: Ptr, offset: u32) -> Option<T> {
    if base.is_null() || offset == OFFSET_NONE {
        return None;
    }
    // `wrapping_add`: only an address to probe, never dereferenced here.
    probe::kernel(base.wrapping_add(offset as usize) as *const T)
}

#[inline(always)]
pub(crate) fn current() -> Ptr {
    probe::current_task()
}

/// How a program reads the current task's own fields: through the
/// probe-read helper ([`Probed`], every kernel) or by plain loads from the
/// BTF-typed task `bpf_get_current_task_btf` returns ([`Typed`], 5.11+).
/// The stderr capture walks task -> files -> fdtable on every write of a
/// run's process: as helper calls, most of what a write cost it.
pub(crate) trait TaskRead {
    /// The running task.
    fn current() -> Ptr;
    /// A `T` at `base + offset`, where `base` is [`Self::current`] or a
    /// pointer read through this reader; `None` when the offset is unknown
    /// or `base` null.
    fn read<T: Plain>(base: Ptr, offset: u32) -> Option<T>;
}

/// Every kernel: `bpf_get_current_task` and `bpf_probe_read_kernel`.
pub(crate) struct Probed;

impl TaskRead for Probed {
    #[inline(always)]
    fn current() -> Ptr {
        current()
    }
    #[inline(always)]
    fn read<T: Plain>(base: Ptr, offset: u32) -> Option<T> {
        read(base, offset)
    }
}

/// 5.11+ in tracing programs: a BTF-typed task and plain loads from it and
/// from the struct pointers read out of it.
pub(crate) struct Typed;

impl TaskRead for Typed {
    #[inline(always)]
    fn current() -> Ptr {
        probe::current_task_btf()
    }
    #[inline(always)]
    fn read<T: Plain>(base: Ptr, offset: u32) -> Option<T> {
        if base.is_null() || offset == OFFSET_NONE {
            return None;
        }
        probe::btf_field(base, offset)
    }
}

/// `(tid, tgid, leader start_boottime)` of a task, the ids as seen from the
/// tracer's pid namespace (0 for a task outside it).
#[inline(always)]
pub(crate) fn task_id(task: Ptr) -> Option<TaskId> {
    let leader: Ptr = read(task, off(|o| &o.task_group_leader))?;
    let start_ns: u64 = read(leader, off(|o| &o.task_start_boottime))?;
    let (tid, tgid) = if view().0 == 0 {
        let tid: i32 = read(task, off(|o| &o.task_pid))?;
        let tgid: i32 = read(task, off(|o| &o.task_tgid))?;
        (tid as u32, tgid as u32)
    } else {
        (view_nr(task), view_nr(leader))
    };
    Some(TaskId {
        tid,
        tgid,
        start_ns,
    })
}

/// `task_id(current())`, cheaper where the tracer's view is the host's pid
/// namespace: the ids are then `bpf_get_current_pid_tgid`'s, and only the
/// start time is read from the task (stderr capture pays this per write).
#[inline(always)]
pub(crate) fn current_id<R: TaskRead>() -> Option<TaskId> {
    if view().0 != 0 {
        return task_id(current());
    }
    let ids = bpf_get_current_pid_tgid();
    let leader: Ptr = R::read(R::current(), off(|o| &o.task_group_leader))?;
    let start_ns: u64 = R::read(leader, off(|o| &o.task_start_boottime))?;
    Some(TaskId {
        tid: ids as u32,
        tgid: (ids >> 32) as u32,
        start_ns,
    })
}

/// `(nr, namespace inode)` of `pid->numbers[level]`, `(0, 0)` when unknown.
///
/// Straight-line, every failure a plain 0: no `Option` payload for LLVM to
/// load speculatively on the failing path, which the 5.10 verifier rejects
/// as a read of uninitialised stack.
#[inline(always)]
fn upid(pid: Ptr, level: u32) -> (u32, u32) {
    let (numbers, size) = (off(|o| &o.pid_numbers), off(|o| &o.upid_size));
    let (nr_off, ns_off) = (off(|o| &o.upid_nr), off(|o| &o.upid_ns));
    if numbers == OFFSET_NONE
        || size == OFFSET_NONE
        || nr_off == OFFSET_NONE
        || ns_off == OFFSET_NONE
    {
        return (0, 0);
    }
    let at = numbers + level * size;
    let nr = read::<i32>(pid, at + nr_off).unwrap_or(0) as u32;
    let ns = read::<Ptr>(pid, at + ns_off).unwrap_or(core::ptr::null());
    let inum = read::<u32>(ns, off(|o| &o.pidns_inum)).unwrap_or(0);
    (nr, inum)
}

/// `(struct pid *, its level)` of a task; a null pointer when unreadable.
#[inline(always)]
fn pid_of(task: Ptr) -> (Ptr, u32) {
    let pid = read::<Ptr>(task, off(|o| &o.task_thread_pid)).unwrap_or(core::ptr::null());
    (pid, read::<u32>(pid, off(|o| &o.pid_level)).unwrap_or(0))
}

/// A task's pid in the tracer's pid namespace; 0 when it is not visible there.
#[inline(always)]
fn view_nr(task: Ptr) -> u32 {
    let (view_level, view_inum) = view();
    let (pid, level) = pid_of(task);
    if pid.is_null() || level < view_level {
        return 0;
    }
    let (nr, inum) = upid(pid, view_level);
    if inum == view_inum {
        nr
    } else {
        0
    }
}

/// A process's pid in its own namespace, when that lies below the view.
#[inline(always)]
pub(crate) fn ns_pid(task: Ptr) -> NsPid {
    let (pid, level) = pid_of(task);
    if pid.is_null() || level <= view().0 {
        return NsPid::default();
    }
    let (nr, inum) = upid(pid, level);
    NsPid {
        pid: nr,
        level,
        ns_inum: inum,
        _pad: 0,
    }
}

#[inline(always)]
pub(crate) fn comm(task: Ptr) -> [u8; COMM_LEN] {
    read(task, off(|o| &o.task_comm)).unwrap_or([0u8; COMM_LEN])
}

#[inline(always)]
pub(crate) fn header(kind: u32) -> RecordHeader {
    RecordHeader {
        kind,
        cpu: probe::cpu(),
        ktime_ns: probe::boot_ns(),
    }
}
