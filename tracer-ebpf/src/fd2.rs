//! What a process's fd 2 is, kept between its writes (issue 37, item 2).
//!
//! Telling a pipe or a terminal from /dev/null takes three reads past fd 2's
//! `struct file` (its inode, the inode's mode and device) and one of the
//! table's size; every write of a run's process paid them. The answer is
//! kept per process with the `struct file *` and inode it was read from,
//! and re-validated at each write by reading the current table's fd 2 and
//! that file's inode (the reads that find fd 2 at all, which every write
//! needs anyway): whatever changed fd 2 — dup2, dup3, close, close_range,
//! fcntl(F_DUPFD) onto a closed 2, exec's close-on-exec, io_uring's close, a
//! process sharing the table — shows as another pointer there, with no hook
//! on those syscalls on any rung.
//!
//! Keyed by tgid (a process), `start_ns` guarding against pid reuse. The
//! `files_struct` the answer was read in is kept too: threads share their
//! process's table unless one was cloned without CLONE_FILES or called
//! unshare(CLONE_FILES), and such a thread's writes do not match it: they
//! walk, and the last walk's answer is the one kept (the fd 2 pointer
//! check alone would also catch it; the table check costs no read, since
//! the walk reads `task->files` first).
//!
//! A `struct file` freed (fd 2 closed, its last reference gone) and
//! allocated again for the file next opened onto fd 2 has the same address:
//! the slab hands back the last freed object. So the inode is compared as
//! well: /dev/null's inode and a pipe's or a file's are different objects
//! alive at once. Only an inode freed and reused for one of another kind,
//! with its file at the same address as well, would slip by.
use aya_ebpf::{macros::map, maps::LruHashMap};
use tracer_common::TaskId;

use crate::task::Ptr;

/// fd 2 is /dev/null (what its writes carry as `STDERR_TO_NULL`).
pub(crate) const FD2_NULL: u32 = 1;
/// fd 2 is a character device other than /dev/null (a terminal): another
/// open file of the same inode is the same screen.
pub(crate) const FD2_CHR: u32 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Fd2 {
    /// The process's start time: a reused pid's entry is stale.
    start_ns: u64,
    /// The `files_struct` it was read in.
    files: u64,
    /// fd 2's `struct file *` then, and that file's inode.
    file: u64,
    inode: u64,
    /// `FD2_NULL`, `FD2_CHR`.
    kind: u32,
    _pad: u32,
}

/// tgid -> what its fd 2 was at its last write. LRU: bounded without
/// losing anything (an evicted process walks again); removed at its exit.
#[map]
static STDERR_FD2: LruHashMap<u32, Fd2> = LruHashMap::with_max_entries(4096, 0);

/// The kept kind of fd 2, when `file` (now at fd 2 of `files`) and `inode`
/// are still what it was read from.
#[inline(always)]
pub(crate) fn known(id: &TaskId, files: Ptr, file: Ptr, inode: Ptr) -> Option<u32> {
    // SAFETY: a reference into the map's value, copied at once; another CPU
    // may replace it meanwhile (a thread of the process walking): the value
    // is preallocated and freed after an RCU grace period, and a torn mix of
    // two answers fails the pointer compares below or is one of them.
    let k = unsafe { STDERR_FD2.get(&id.tgid) }.copied()?;
    (k.start_ns == id.start_ns
        && k.files == files as u64
        && k.file == file as u64
        && k.inode == inode as u64)
        .then_some(k.kind)
}

/// Keep what the walk found (a full map evicts the least used entry).
#[inline(always)]
pub(crate) fn keep(id: &TaskId, files: Ptr, file: Ptr, inode: Ptr, kind: u32) {
    let k = Fd2 {
        start_ns: id.start_ns,
        files: files as u64,
        file: file as u64,
        inode: inode as u64,
        kind,
        _pad: 0,
    };
    let _ = STDERR_FD2.insert(&id.tgid, &k, 0);
}

/// The process is gone.
#[inline(always)]
pub(crate) fn forget(tgid: u32) {
    let _ = STDERR_FD2.remove(&tgid);
}
