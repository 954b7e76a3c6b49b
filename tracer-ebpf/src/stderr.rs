//! Last words: what traced processes write to fd 2, captured at the write and
//! writev syscalls so it survives a test runner that swallows output.
//!
//! Each process's last `TAIL_CAP` bytes are kept in the kernel
//! (`STDERR_TAILS`) and emitted once, just before its exit record: one ring
//! record per process, not one per write. Per-write records remain for
//! `STDERR_PER_WRITE` and for processes the tail map has no room for.
use core::ptr::null_mut;

use aya_ebpf::{
    bindings::BPF_NOEXIST, helpers::generated::bpf_probe_read_user, macros::map,
    maps::ProgramArray, programs::TracePointContext,
};
use tracer_common::{
    DropReason, RecordKind, StderrRecord, StderrSyscall, StderrTail, TaskId, MARK_FD, MARK_LEN,
    MARK_RATE, MARK_WINDOW_NS, OFFSET_NONE, STDERR_CHUNK, STDERR_HEADER_LEN,
    STDERR_TAIL_HEADER_LEN, STDERR_TO_NULL, TAIL_CAP,
};

use crate::{
    fd2::{self, FD2_CHR, FD2_NULL},
    kill_calls::{regs_arg, task_is_compat},
    maps::{
        batched_output, is_tracked, off, size_mask, stderr_per_write, tail_mask, EVENTS,
        MARK_RATES, STDERR_SCRATCH, STDERR_TAILS, TAIL_INIT,
    },
    probe::{self, tp_field},
    task::{current_id_of, header, read, Probed, Ptr, TaskRead},
};

const TP_ARG0: usize = 16;
const STDERR_FD: u64 = 2;
/// Beyond any fd a process holds (the kernel's `nr_open` ceiling is 2^30):
/// one compare keeps the rest of the walk off impossible numbers.
const MAX_FD: u64 = 1 << 30;
/// `S_IFMT`/`S_IFCHR` of `inode.i_mode`, and /dev/null's `i_rdev` as the
/// kernel encodes it inside (`MKDEV(1, 3)`: major << 20 | minor).
const S_IFMT: u16 = 0o170000;
const S_IFCHR: u16 = 0o020000;
const DEV_NULL: u32 = 1 << 20 | 3;
/// The staging slot of each stderr program (see `maps::STDERR_SCRATCH`).
const WRITE: u32 = StderrSyscall::Write as u32;
const WRITEV: u32 = StderrSyscall::Writev as u32;
/// iovecs looked at per writev (error messages use one or two).
const MAX_IOV: u32 = 4;

/// Slot `StderrSyscall as u32` -> `stderr_raw_write`/`stderr_raw_writev`,
/// filled by user space only when last words use the raw_syscalls rung;
/// `raw_sys_enter` tail-calls into it (an empty slot: nothing happens).
#[map]
pub(crate) static STDERR_RAW: ProgramArray = ProgramArray::with_max_entries(2, 0);

pub(crate) fn on_write(ctx: &TracePointContext) -> Result<u32, ()> {
    let fd: u64 = tp_field(ctx, TP_ARG0).ok_or(())?;
    let buf: u64 = tp_field(ctx, TP_ARG0 + 8).ok_or(())?;
    let count: u64 = tp_field(ctx, TP_ARG0 + 16).ok_or(())?;
    write::<Probed>(Probed::current(), fd, buf, count);
    Ok(0)
}

pub(crate) fn on_writev(ctx: &TracePointContext) -> Result<u32, ()> {
    let fd: u64 = tp_field(ctx, TP_ARG0).ok_or(())?;
    let Some((id, tail, flags)) = caller_writing_to_stderr::<Probed>(Probed::current(), fd) else {
        return Ok(0);
    };
    let vec: u64 = tp_field(ctx, TP_ARG0 + 8).ok_or(())?;
    let vlen: u64 = tp_field(ctx, TP_ARG0 + 16).ok_or(())?;
    writev(id, tail, flags, vec, vlen);
    Ok(0)
}

/// write(2) from the `struct pt_regs` of the syscall's entry (fentry, or
/// raw_syscalls when `RAW`). On raw_syscalls a compat syscall is another
/// call under write's number (ia32's exit, AArch32's getppid): left alone.
/// fentry on `__arm64_sys_write` sees an AArch32 task's own write, laid out
/// as a native one: kept.
#[inline(always)]
pub(crate) fn on_write_regs<const RAW: bool, R: TaskRead>(regs: Ptr) -> Result<u32, ()> {
    // Asked once: `bpf_get_current_task_btf` is a helper call, not a load.
    let task = R::current();
    if RAW && task_is_compat::<R>(task) {
        return Ok(0);
    }
    write::<R>(
        task,
        regs_arg::<0>(regs) as u64,
        regs_arg::<1>(regs) as u64,
        regs_arg::<2>(regs) as u64,
    );
    Ok(0)
}

/// writev(2) from the `struct pt_regs` of the syscall's entry. A compat
/// one is left alone on both rungs: on raw_syscalls it is another call
/// (ia32's getpid), and an AArch32 task's writev reaches arm64's
/// `__arm64_sys_writev` with 8-byte compat iovecs this would read as
/// 16-byte ones.
#[inline(always)]
pub(crate) fn on_writev_regs<R: TaskRead>(regs: Ptr) -> Result<u32, ()> {
    let task = R::current();
    if task_is_compat::<R>(task) {
        return Ok(0);
    }
    let fd = regs_arg::<0>(regs) as u64;
    let Some((id, tail, flags)) = caller_writing_to_stderr::<R>(task, fd) else {
        return Ok(0);
    };
    writev(
        id,
        tail,
        flags,
        regs_arg::<1>(regs) as u64,
        regs_arg::<2>(regs) as u64,
    );
    Ok(0)
}

/// A test mark: the first [`MARK_LEN`] bytes written to [`MARK_FD`] by a
/// process of the run, as a record of their own (a `StderrRecord` of kind
/// `TestMark`), at most [`MARK_RATE`] per thread per [`MARK_WINDOW_NS`]: the
/// rest counted (`mark_rate`), never sent. The writer's identity and the
/// time are the kernel's; the payload is the test's word only.
#[inline(always)]
fn mark<R: TaskRead>(task: Ptr, buf: u64, count: u64) {
    if count == 0 {
        return;
    }
    let Some(id) = current_id_of::<R>(task) else {
        return;
    };
    if !is_tracked(id.tgid, id.start_ns) {
        return;
    }
    let now = probe::boot_ns();
    match MARK_RATES.get_ptr_mut(&id.tid) {
        // SAFETY: a non-null pointer to this thread's LRU map value, two u64
        // (the verifier checks the index against the value size); another
        // program on another CPU may race this count: a mark more or less.
        Some(w) => unsafe {
            if now.wrapping_sub((*w)[0]) > MARK_WINDOW_NS {
                (*w)[0] = now;
                (*w)[1] = 0;
            }
            if (*w)[1] >= MARK_RATE {
                crate::diag::mark_rate();
                return;
            }
            (*w)[1] += 1;
        },
        None => {
            let _ = MARK_RATES.insert(&id.tid, &[now, 1], 0);
        }
    }
    let Some(rec) = STDERR_SCRATCH.get_ptr_mut(WRITE) else {
        return;
    };
    const MAX: u64 = MARK_LEN as u64;
    let len = if count > MAX { MAX } else { count };
    let len = len & size_mask();
    // SAFETY: as in `emit`: `rec` is this program's non-null per-CPU slot, a
    // whole `StderrRecord`; the copy's size is masked below `STDERR_CHUNK`
    // and the output slice checked against the record's size first; the
    // user read never faults (an unreadable buffer is an error return).
    unsafe {
        (*rec).hdr = header(RecordKind::TestMark as u32);
        (*rec).task = id;
        (*rec).count = count;
        (*rec).flags = 0;
        if bpf_probe_read_user(
            (*rec).data.as_mut_ptr() as *mut _,
            len as u32,
            buf as *const _,
        ) != 0
        {
            return;
        }
        (*rec).len = len as u32;
        let total = STDERR_HEADER_LEN + (len & size_mask()) as usize;
        if total > core::mem::size_of::<StderrRecord>() {
            return;
        }
        let bytes = core::slice::from_raw_parts(rec as *const u8, total);
        if EVENTS.output::<[u8]>(bytes, batched_output(total)).is_err() {
            crate::maps::count_drop(DropReason::RingBufFull);
        }
    }
}

#[inline(always)]
fn write<R: TaskRead>(task: Ptr, fd: u64, buf: u64, count: u64) {
    if count == 0 {
        return;
    }
    // Above MAX_FD, so before the stderr walk: a mark is no stderr.
    if fd == MARK_FD {
        mark::<R>(task, buf, count);
        return;
    }
    if let Some((id, tail, flags)) = caller_writing_to_stderr::<R>(task, fd) {
        capture::<true, WRITE>(id, destination::<WRITE>(&id, tail), flags, buf, count);
    }
}

#[inline(always)]
fn writev(id: TaskId, tail: *mut StderrTail, flags: u32, vec: u64, vlen: u64) {
    let tail = destination::<WRITEV>(&id, tail);
    for i in 0..MAX_IOV {
        if i as u64 >= vlen {
            break;
        }
        let Some([base, len]) = probe::user::<[u64; 2]>(vec + 16 * i as u64) else {
            break;
        };
        // Counted, not logged: a log call per iovec made this program too
        // complex for 6.1's verifier with --debug-ebpf (E2BIG, vm-test).
        capture::<false, WRITEV>(id, tail, flags, base, len);
    }
}

/// The writer and its tail, when it is in scope and its write lands where
/// its fd 2 leads. Scope first: it is one map lookup, and the file walk
/// below is paid only by the run's own processes.
#[inline(always)]
fn caller_writing_to_stderr<R: TaskRead>(
    task: Ptr,
    fd: u64,
) -> Option<(TaskId, *mut StderrTail, u32)> {
    if fd > MAX_FD {
        return None;
    }
    let (id, tail) = caller::<R>(task)?;
    match lands::<R>(task, &id, tail, fd) {
        Lands::Stderr => Some((id, tail, 0)),
        Lands::DevNull => Some((id, tail, STDERR_TO_NULL)),
        Lands::Elsewhere => None,
    }
}

/// Last words are what the process wrote to its stderr:
/// - fd 2 (flagged `STDERR_TO_NULL` when it is /dev/null: no one saw those
///   words, so a `2>/dev/null` probe must not headline a run — but a helper
///   spawned with its output ignored may still explain its own crash);
/// - any other fd holding the same open file as fd 2 (a shell's `echo >&2`
///   dup2s stderr onto fd 1 and writes there);
/// - when fd 2 is a terminal, any fd open on that same terminal: libuv
///   reopens the tty to make it non-blocking, so Node on a pty CI runner or
///   `docker run -t` writes its stderr through a new file of its own (on a
///   terminal stdout and stderr share the screen: both are what was seen).
///
/// When the kernel's file structures cannot be read, fd 2 alone.
#[inline(always)]
fn lands<R: TaskRead>(task: Ptr, id: &TaskId, tail: *mut StderrTail, fd: u64) -> Lands {
    match walk::<R>(task, id, tail, fd) {
        Some(l) => l,
        None if fd == STDERR_FD => Lands::Stderr,
        None => Lands::Elsewhere,
    }
}

enum Lands {
    Stderr,
    DevNull,
    Elsewhere,
}

/// fd 2's open file, then what it is: kept per process with the file and
/// inode it was read from (`fd2`), so a process that keeps its fd 2 pays
/// the reads that find the file, not the three that classify it.
#[inline(always)]
fn walk<R: TaskRead>(task: Ptr, id: &TaskId, tail: *mut StderrTail, fd: u64) -> Option<Lands> {
    let files: Ptr = R::read(task, off(|o| &o.task_files))?;
    let fdt: Ptr = R::read(files, off(|o| &o.files_fdt))?;
    let fds: Ptr = R::read(fdt, off(|o| &o.fdtable_fd))?;
    let (err, err_inode) = stderr_file::<R>(files, fds)?;
    if err.is_null() {
        // Never kept: the next open lands on the free fd 2.
        return Some(Lands::Elsewhere);
    }
    let kind = match fd2::known(id, tail, files, err, err_inode) {
        Some(k) => k,
        None => {
            let k = kind_of(err_inode)?;
            fd2::keep(id, tail, files, err, err_inode, k);
            k
        }
    };
    let to_stderr = if kind & FD2_NULL != 0 {
        Lands::DevNull
    } else {
        Lands::Stderr
    };
    if fd == STDERR_FD {
        return Some(to_stderr);
    }
    let max_fds: u32 = R::read(fdt, off(|o| &o.fdtable_max_fds))?;
    if fd >= max_fds as u64 {
        return Some(Lands::Elsewhere);
    }
    let file: Ptr = read(fds, 8 * fd as u32)?;
    if file.is_null() {
        return Some(Lands::Elsewhere);
    }
    if file == err {
        return Some(to_stderr);
    }
    // Another open file of the same terminal (never of /dev/null: a
    // process's writes to a /dev/null of its own are not to its stderr).
    if kind & FD2_CHR == 0 {
        return Some(Lands::Elsewhere);
    }
    let inode: Ptr = read(file, off(|o| &o.file_inode))?;
    Some(match inode == err_inode {
        true => Lands::Stderr,
        false => Lands::Elsewhere,
    })
}

/// fd 2's `struct file *` (null when fd 2 is closed) and that file's inode.
///
/// `fds` (`fdtable.fd`) is a `struct file **`: BTF types no struct behind
/// it, so a read through it is a probe read. But until a process has held
/// more than `NR_OPEN_DEFAULT` (BITS_PER_LONG) fds, its table is the one
/// embedded in its `files_struct`, whose `fd_array` BTF declares as an array
/// of `struct file *`: the typed twins then load fd 2 and its inode without
/// a helper call (two probe reads were ~5 % of a captured write, `perf`).
/// No bound check for fd 2: a table never holds fewer than BITS_PER_LONG fds.
#[inline(always)]
fn stderr_file<R: TaskRead>(files: Ptr, fds: Ptr) -> Option<(Ptr, Ptr)> {
    let array = off(|o| &o.files_fd_array);
    let inode = off(|o| &o.file_inode);
    if R::TYPED && array != OFFSET_NONE && fds == files.wrapping_add(array as usize) {
        let err: Ptr = R::read(files, array + 8 * STDERR_FD as u32)?;
        if err.is_null() {
            return Some((err, err));
        }
        return Some((err, R::read(err, inode)?));
    }
    let err: Ptr = read(fds, 8 * STDERR_FD as u32)?;
    if err.is_null() {
        return Some((err, err));
    }
    Some((err, read(err, inode)?))
}

/// `FD2_NULL` for /dev/null, `FD2_CHR` for another character device (a
/// terminal), 0 for anything else (a pipe, a file, a socket).
#[inline(always)]
fn kind_of(inode: Ptr) -> Option<u32> {
    let mode: u16 = read(inode, off(|o| &o.inode_mode))?;
    let rdev: u32 = read(inode, off(|o| &o.inode_rdev))?;
    Some(match (mode & S_IFMT == S_IFCHR, rdev == DEV_NULL) {
        (true, true) => FD2_NULL,
        (true, false) => FD2_CHR,
        (false, _) => 0,
    })
}

/// The writer, when it is in scope, with its tail (null when it has none
/// yet). Every write pays this, so the common case is one map lookup: a
/// tail of this very process proves it in scope (tails are made only for
/// the run's processes and freed at their exit), and TRACKED is asked only
/// before the first write, and in per-write mode.
#[inline(always)]
fn caller<R: TaskRead>(task: Ptr) -> Option<(TaskId, *mut StderrTail)> {
    let id = current_id_of::<R>(task)?;
    if !stderr_per_write() {
        if let Some(t) = STDERR_TAILS.get_ptr_mut(&id.tgid) {
            // SAFETY: a non-null pointer into a preallocated map value (null
            // test and field offset checked by the verifier), valid while the
            // program runs; another thread of this process may write the
            // field at once, only ever with this same start time.
            if unsafe { (*t).task.start_ns } == id.start_ns {
                return Some((id, t));
            }
        }
    }
    is_tracked(id.tgid, id.start_ns).then_some((id, null_mut()))
}

/// Where an in-scope write's bytes go: its process's tail (`known`, or made
/// now), or null for a ring record of their own (per-write mode, no room).
#[inline(always)]
fn destination<const SLOT: u32>(id: &TaskId, known: *mut StderrTail) -> *mut StderrTail {
    if !known.is_null() || stderr_per_write() {
        return known;
    }
    tail_of::<SLOT>(id).unwrap_or(null_mut())
}

/// Into the process's kernel tail; a record of its own when there is none.
#[inline(always)]
fn capture<const LOG: bool, const SLOT: u32>(
    id: TaskId,
    tail: *mut StderrTail,
    flags: u32,
    buf: u64,
    count: u64,
) {
    if count == 0 {
        return;
    }
    match tail.is_null() {
        true => emit::<LOG, SLOT>(id, flags, buf, count),
        false => append::<LOG>(id.tgid, tail, flags, buf, count),
    }
}

/// The tail of `id`'s process, created (or reset, when a stale entry of a
/// reused pid is found) as needed; `None` when the map is full.
#[inline(always)]
fn tail_of<const SLOT: u32>(id: &TaskId) -> Option<*mut StderrTail> {
    if let Some(t) = STDERR_TAILS.get_ptr_mut(&id.tgid) {
        // SAFETY: as in `caller`: a non-null pointer to a map value, each
        // field access inside it (the verifier checks offset and size).
        unsafe {
            if (*t).task.start_ns != id.start_ns {
                (*t).task.start_ns = id.start_ns;
                (*t).total = 0;
                (*t).flags = 0;
                (*t).written = 0;
            }
        }
        return Some(t);
    }
    let init = TAIL_INIT.get_ptr_mut(SLOT)?;
    // SAFETY: `init` is this CPU's non-null slot for this kind of stderr
    // program (one rung is attached at a time, and a program does not nest
    // with itself); `insert` copies the value from it before returning.
    unsafe {
        (*init).task = TaskId {
            tid: id.tgid,
            tgid: id.tgid,
            start_ns: id.start_ns,
        };
        (*init).total = 0;
        (*init).flags = 0;
        (*init).written = 0;
        // No fd 2 known yet (this CPU's slot holds the last tail it made).
        (*init).fd2.start_ns = 0;
        // EEXIST (another thread won the race) is fine: look it up again.
        let _ = STDERR_TAILS.insert(&id.tgid, &*init, BPF_NOEXIST as u64);
    }
    STDERR_TAILS.get_ptr_mut(&id.tgid)
}

/// Append the last bytes of a write to the ring of bytes, read from user
/// memory straight into it: up to the ring's end, then (only when the write
/// wraps, once per `TAIL_CAP` bytes) the rest from its start. No loop (a
/// loop of small copies cost the verifier ~150 ms per program at start-up,
/// measured) and no staging copy (a per-CPU buffer and two kernel-to-kernel
/// probe reads cost ~7 % of a 100-byte write to /dev/null, `perf`).
///
/// A read that faults zeroes what it was to fill, and the position moves
/// only past what was read: the zeroed bytes are then the ring's oldest,
/// which user space drops (`tail_in_order`'s leading NULs). The write is
/// counted as unreadable. Threads of one process may interleave here: their
/// bytes may mix, but every copy is masked into the value, so nothing is
/// written out of bounds.
#[inline(always)]
fn append<const LOG: bool>(tgid: u32, tail: *mut StderrTail, flags: u32, buf: u64, count: u64) {
    const MAX: u64 = TAIL_CAP as u64 - 1;
    let len = if count > MAX { MAX } else { count };
    let src = buf + count - len;
    let len = len & tail_mask();
    // SAFETY: `tail` is a non-null map value whose `data` is `TAIL_CAP +
    // TAIL_SLACK` bytes; every offset into it and every size is masked by
    // `tail_mask` (below `TAIL_CAP`), so each read's destination lies inside
    // it, which the verifier checks against the map's value size (it
    // refuses the program otherwise). A probe read never faults: an
    // unreadable source is an error return, its destination zeroed.
    unsafe {
        let w = (*tail).written;
        let data = (*tail).data.as_mut_ptr();
        let pos = w & tail_mask();
        let room = TAIL_CAP as u64 - pos;
        let first = if len > room { room } else { len };
        let first = first & tail_mask();
        let rest = (len - first) & tail_mask();
        let mut done = 0;
        if bpf_probe_read_user(
            data.add(pos as usize) as *mut _,
            first as u32,
            src as *const _,
        ) == 0
        {
            done = first;
            if rest == 0
                || bpf_probe_read_user(data as *mut _, rest as u32, (src + first) as *const _) == 0
            {
                done = len;
            }
        }
        if done != len {
            crate::diag::stderr_unreadable::<LOG>(tgid, src, len);
        }
        (*tail).written = w + done;
        (*tail).total += count;
        (*tail).flags = flags;
    }
}

/// The process is gone (its last thread exited): emit its tail, if it
/// wrote anything, and free the entry. Called before its exit record, so
/// user space has the words when it logs the death.
#[inline(always)]
pub(crate) fn flush_tail(id: &TaskId) {
    let Some(t) = STDERR_TAILS.get_ptr_mut(&id.tgid) else {
        return;
    };
    // SAFETY: `t` is a non-null map value, a whole `StderrTail`: the header
    // and `TAIL_CAP + TAIL_SLACK` bytes of data, so both slices (the header
    // plus `TAIL_CAP`, or plus a length masked below it) lie inside it, as
    // the verifier checks for the output helper's size.
    unsafe {
        let w = (*t).written;
        if (*t).task.start_ns == id.start_ns && w > 0 {
            (*t).hdr = header(RecordKind::StderrTail as u32);
            (*t).task.tid = id.tid;
            let out = if w >= TAIL_CAP as u64 {
                (*t).len = TAIL_CAP as u32;
                EVENTS.output::<[u8]>(
                    core::slice::from_raw_parts(t as *const u8, STDERR_TAIL_HEADER_LEN + TAIL_CAP),
                    batched_output(STDERR_TAIL_HEADER_LEN + TAIL_CAP),
                )
            } else {
                (*t).len = w as u32;
                let total = STDERR_TAIL_HEADER_LEN + (w & tail_mask()) as usize;
                EVENTS.output::<[u8]>(
                    core::slice::from_raw_parts(t as *const u8, total),
                    batched_output(total),
                )
            };
            if out.is_err() {
                crate::maps::count_drop(DropReason::RingBufFull);
            }
        }
    }
    let _ = STDERR_TAILS.remove(&id.tgid);
}

#[inline(always)]
fn emit<const LOG: bool, const SLOT: u32>(id: TaskId, flags: u32, buf: u64, count: u64) {
    let Some(rec) = STDERR_SCRATCH.get_ptr_mut(SLOT) else {
        return;
    };
    // Keep the tail of a long write: the end of a message is what explains.
    const MAX: u64 = STDERR_CHUNK as u64 - 1;
    let len = if count > MAX { MAX } else { count };
    let src = buf + count - len;
    // Older verifiers (5.10, 6.1) need the bound on the very register passed
    // as the size; a compare on a spilled copy is not enough (see size_mask).
    let len = len & size_mask();
    // SAFETY: `rec` is this program's non-null per-CPU slot, a whole
    // `StderrRecord`; the copy's size is masked below `STDERR_CHUNK`, the
    // size of `data`, and the slice output is checked against the record's
    // size first (the verifier checks both against the map's value size).
    // The user read never faults: an unreadable buffer is an error return.
    unsafe {
        (*rec).hdr = header(RecordKind::Stderr as u32);
        (*rec).task = id;
        (*rec).count = count;
        (*rec).flags = flags;
        if bpf_probe_read_user(
            (*rec).data.as_mut_ptr() as *mut _,
            len as u32,
            src as *const _,
        ) != 0
        {
            crate::diag::stderr_unreadable::<LOG>(id.tgid, src, len);
            return;
        }
        (*rec).len = len as u32;
        let total = STDERR_HEADER_LEN + (len & size_mask()) as usize;
        if total > core::mem::size_of::<StderrRecord>() {
            return;
        }
        let bytes = core::slice::from_raw_parts(rec as *const u8, total);
        if EVENTS.output::<[u8]>(bytes, batched_output(total)).is_err() {
            crate::maps::count_drop(DropReason::RingBufFull);
        }
    }
}
