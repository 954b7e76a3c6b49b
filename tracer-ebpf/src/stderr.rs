//! Last words: what traced processes write to fd 2, captured at the write and
//! writev syscalls so it survives a test runner that swallows output.
//! User space keeps only the last bytes per process (bounded memory).
use aya_ebpf::{helpers::generated::bpf_probe_read_user, programs::TracePointContext};
use tracer_common::{DropReason, RecordKind, StderrRecord, STDERR_CHUNK, STDERR_HEADER_LEN};

use crate::{
    maps::{count_drop, is_tracked, off, size_mask, EVENTS, STDERR_SCRATCH},
    task::{current, header, read, task_id, Ptr},
};

const TP_ARG0: usize = 16;
const STDOUT_FD: u64 = 1;
const STDERR_FD: u64 = 2;
/// iovecs looked at per writev (error messages use one or two).
const MAX_IOV: u32 = 4;

pub fn on_write(ctx: &TracePointContext) -> Result<u32, ()> {
    let fd: u64 = unsafe { ctx.read_at(TP_ARG0) }.map_err(|_| ())?;
    if !is_stderr(fd) {
        return Ok(0);
    }
    let buf: u64 = unsafe { ctx.read_at(TP_ARG0 + 8) }.map_err(|_| ())?;
    let count: u64 = unsafe { ctx.read_at(TP_ARG0 + 16) }.map_err(|_| ())?;
    if in_scope() {
        emit(buf, count);
    }
    Ok(0)
}

pub fn on_writev(ctx: &TracePointContext) -> Result<u32, ()> {
    let fd: u64 = unsafe { ctx.read_at(TP_ARG0) }.map_err(|_| ())?;
    if !is_stderr(fd) || !in_scope() {
        return Ok(0);
    }
    let vec: u64 = unsafe { ctx.read_at(TP_ARG0 + 8) }.map_err(|_| ())?;
    let vlen: u64 = unsafe { ctx.read_at(TP_ARG0 + 16) }.map_err(|_| ())?;
    for i in 0..MAX_IOV {
        if i as u64 >= vlen {
            break;
        }
        let iov = (vec + 16 * i as u64) as *const [u64; 2];
        let Ok([base, len]) = (unsafe { aya_ebpf::helpers::bpf_probe_read_user(iov) }) else {
            break;
        };
        emit(base, len);
    }
    Ok(0)
}

/// fd 2, or fd 1 when it is the same open file as fd 2: a shell's `echo >&2`
/// dup2s stderr onto fd 1 and writes there.
#[inline(always)]
fn is_stderr(fd: u64) -> bool {
    match fd {
        STDERR_FD => true,
        STDOUT_FD => same_file_as_stderr().unwrap_or(false),
        _ => false,
    }
}

#[inline(always)]
fn same_file_as_stderr() -> Option<bool> {
    let files: Ptr = read(current(), off(|o| &o.task_files))?;
    let fdt: Ptr = read(files, off(|o| &o.files_fdt))?;
    let fds: Ptr = read(fdt, off(|o| &o.fdtable_fd))?;
    let out: u64 = read(fds, 8)?;
    let err: u64 = read(fds, 16)?;
    Some(out != 0 && out == err)
}

#[inline(always)]
fn in_scope() -> bool {
    match task_id(current()) {
        Some(id) => is_tracked(id.tgid, id.start_ns),
        None => false,
    }
}

#[inline(always)]
fn emit(buf: u64, count: u64) {
    if count == 0 {
        return;
    }
    let Some(rec) = STDERR_SCRATCH.get_ptr_mut(0) else {
        return;
    };
    let Some(id) = task_id(current()) else { return };
    // Keep the tail of a long write: the end of a message is what explains.
    const MAX: u64 = STDERR_CHUNK as u64 - 1;
    let len = if count > MAX { MAX } else { count };
    let src = buf + count - len;
    // Older verifiers (5.10, 6.1) need the bound on the very register passed
    // as the size; a compare on a spilled copy is not enough (see size_mask).
    let len = len & size_mask();
    unsafe {
        (*rec).hdr = header(RecordKind::Stderr as u32);
        (*rec).task = id;
        (*rec).count = count;
        (*rec)._pad = 0;
        if bpf_probe_read_user(
            (*rec).data.as_mut_ptr() as *mut _,
            len as u32,
            src as *const _,
        ) != 0
        {
            crate::diag::stderr_unreadable(id.tgid, src, len);
            return;
        }
        (*rec).len = len as u32;
        let total = STDERR_HEADER_LEN + (len & size_mask()) as usize;
        if total > core::mem::size_of::<StderrRecord>() {
            return;
        }
        let bytes = core::slice::from_raw_parts(rec as *const u8, total);
        if EVENTS.output::<[u8]>(bytes, 0).is_err() {
            count_drop(DropReason::RingBufFull);
        }
    }
}
