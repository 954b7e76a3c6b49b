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
//! Kept in the process's stderr tail (`StderrTail::fd2`) once it has one:
//! the write looks the tail up anyway, and a second map's lookup was ~7 % of
//! a captured write (`perf`, issue 37). Before the tail exists (its first
//! write), in per-write mode and when the tail map is full, in a map of its
//! own keyed by tgid. Either way `start_ns` guards against pid reuse.
//!
//! The `files_struct` the answer was read in is kept too: threads share
//! their process's table unless one was cloned without CLONE_FILES or
//! called unshare(CLONE_FILES), and such a thread's writes do not match it:
//! they walk, and the last walk's answer is the one kept (the fd 2 pointer
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
use tracer_common::{Fd2Seen, StderrTail, TaskId};

use crate::task::Ptr;

/// fd 2 is /dev/null (what its writes carry as `STDERR_TO_NULL`).
pub(crate) const FD2_NULL: u32 = 1;
/// fd 2 is a character device other than /dev/null (a terminal): another
/// open file of the same inode is the same screen.
pub(crate) const FD2_CHR: u32 = 2;

/// tgid -> what its fd 2 was at its last write, for a process without a
/// tail. LRU: bounded without losing anything (an evicted process walks
/// again); removed at its exit.
#[map]
static STDERR_FD2: LruHashMap<u32, Fd2Seen> = LruHashMap::with_max_entries(4096, 0);

/// The kept kind of fd 2, when `file` (now at fd 2 of `files`) and `inode`
/// are still what it was read from. `tail`: the process's tail, or null.
#[inline(always)]
pub(crate) fn known(
    id: &TaskId,
    tail: *mut StderrTail,
    files: Ptr,
    file: Ptr,
    inode: Ptr,
) -> Option<u32> {
    // Copied at once; another CPU may replace either source meanwhile (a
    // thread of the process walking): a torn mix of two answers fails the
    // pointer compares below or is one of them.
    let k = match tail.is_null() {
        // SAFETY: a reference into this map's preallocated value, copied.
        true => unsafe { STDERR_FD2.get(&id.tgid) }.copied()?,
        // SAFETY: `tail` is a non-null pointer into a preallocated map value
        // (`caller`), valid while the program runs; a field read.
        false => unsafe { (*tail).fd2 },
    };
    (k.start_ns == id.start_ns
        && k.files == files as u64
        && k.file == file as u64
        && k.inode == inode as u64)
        .then_some(k.kind)
}

/// Keep what the walk found: in the tail when there is one, else in the
/// map (a full map evicts the least used entry).
#[inline(always)]
pub(crate) fn keep(
    id: &TaskId,
    tail: *mut StderrTail,
    files: Ptr,
    file: Ptr,
    inode: Ptr,
    kind: u32,
) {
    let k = Fd2Seen {
        start_ns: id.start_ns,
        files: files as u64,
        file: file as u64,
        inode: inode as u64,
        kind,
        _pad: 0,
    };
    match tail.is_null() {
        true => {
            let _ = STDERR_FD2.insert(&id.tgid, &k, 0);
        }
        // SAFETY: as in `known`; a field store inside the value.
        false => unsafe { (*tail).fd2 = k },
    }
}

/// The process is gone.
#[inline(always)]
pub(crate) fn forget(tgid: u32) {
    let _ = STDERR_FD2.remove(&tgid);
}
