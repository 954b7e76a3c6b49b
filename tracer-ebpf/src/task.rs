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

/// How a program reads a task's fields: through the probe-read helper
/// ([`Probed`], any address, every kernel) or by plain loads from a
/// BTF-typed pointer ([`Typed`]): a tp_btf or fentry program's own task
/// argument (every kernel with tp_btf, 5.5+), `bpf_get_current_task_btf`'s
/// task (5.11+), and the struct pointers loaded from either. A helper call
/// costs ~20–30 ns on our guests, a load ~1: the stderr capture walked
/// task -> files -> fdtable on every write of a run's process, and those
/// calls were most of what a write cost it (`perf`, issue 37).
pub(crate) trait TaskRead {
    /// Whether reads are plain loads (a `comm` is then two 8-byte ones).
    const TYPED: bool;
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
    const TYPED: bool = false;
    #[inline(always)]
    fn current() -> Ptr {
        current()
    }
    #[inline(always)]
    fn read<T: Plain>(base: Ptr, offset: u32) -> Option<T> {
        read(base, offset)
    }
}

/// Plain loads from BTF-typed pointers; `current` is 5.11+ (a program that
/// calls it has a [`Probed`] twin for 5.10).
pub(crate) struct Typed;

impl TaskRead for Typed {
    const TYPED: bool = true;
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
/// `R`: how `task` may be read ([`TaskRead`]).
#[inline(always)]
pub(crate) fn task_id<R: TaskRead>(task: Ptr) -> Option<TaskId> {
    let leader: Ptr = R::read(task, off(|o| &o.task_group_leader))?;
    // The start time, the identity's half, by a probe read whatever `R`:
    // a wrong offset then reads an impossible time, which the lifecycle
    // hooks diagnose at run time (`diag::checked_task`). As a typed load
    // the verifier checks it against BTF instead, and 5.10's refused the
    // required hooks outright (EACCES: debug_ebpf's wrong-offset test).
    let start_ns: u64 = read(leader, off(|o| &o.task_start_boottime))?;
    let (tid, tgid) = if view().0 == 0 {
        let tid: i32 = R::read(task, off(|o| &o.task_pid))?;
        let tgid: i32 = R::read(task, off(|o| &o.task_tgid))?;
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
/// namespace: the ids are then the task's own, and only the start time is
/// read from its leader (stderr capture pays this per write).
#[inline(always)]
pub(crate) fn current_id<R: TaskRead>() -> Option<TaskId> {
    current_id_of::<R>(R::current())
}

/// [`current_id`] of `task`, the running task as [`TaskRead::current`]
/// gave it (a program that needs it twice asks once: a helper call each).
/// Typed, the ids are two loads from the task; probed, one helper call
/// (`bpf_get_current_pid_tgid`) is cheaper than two probe reads.
#[inline(always)]
pub(crate) fn current_id_of<R: TaskRead>(task: Ptr) -> Option<TaskId> {
    if view().0 != 0 {
        return task_id::<Probed>(task);
    }
    let (tid, tgid) = if R::TYPED {
        let tid: i32 = R::read(task, off(|o| &o.task_pid))?;
        let tgid: i32 = R::read(task, off(|o| &o.task_tgid))?;
        (tid as u32, tgid as u32)
    } else {
        let ids = bpf_get_current_pid_tgid();
        (ids as u32, (ids >> 32) as u32)
    };
    let leader: Ptr = R::read(task, off(|o| &o.task_group_leader))?;
    // Through `R`, unlike `task_id`'s: only last words' twins read the
    // running task typed, and a verifier that refuses this load sends them
    // to their probe-reading twin, not a required hook to a refusal.
    let start_ns: u64 = R::read(leader, off(|o| &o.task_start_boottime))?;
    Some(TaskId {
        tid,
        tgid,
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
pub(crate) fn comm<R: TaskRead>(task: Ptr) -> [u8; COMM_LEN] {
    let at = off(|o| &o.task_comm);
    if !R::TYPED || at == OFFSET_NONE {
        return R::read(task, at).unwrap_or([0u8; COMM_LEN]);
    }
    // Two 8-byte loads: a volatile 16-byte array load may be split byte by
    // byte. `comm` is `char[16]` (TASK_COMM_LEN) on every kernel we load on.
    let half = |i: u32| R::read::<u64>(task, at + 8 * i).unwrap_or(0).to_ne_bytes();
    let (lo, hi) = (half(0), half(1));
    let mut c = [0u8; COMM_LEN];
    c[..8].copy_from_slice(&lo);
    c[8..].copy_from_slice(&hi);
    c
}

#[inline(always)]
pub(crate) fn header(kind: u32) -> RecordHeader {
    RecordHeader {
        kind,
        _pad: 0,
        ktime_ns: probe::boot_ns(),
    }
}
