//! A crashed process's mappings and files, read the moment its crash
//! record arrives: at `signal_deliver` it has not exited yet (it is on its
//! way into the core dump or the exit), so /proc/PID/maps is still there.
//! Its files are opened through /proc/PID/map_files: the kernel hands over
//! the very file mapped (even if deleted or replaced since; no path is
//! followed), as O_PATH first so no device's open runs, then only a regular
//! file is reopened for reading. The (dev, ino) of the maps line is not
//! compared: on overlayfs maps names the real inode, stat the overlay's.
//! The process must still be the one that crashed after the opens (its
//! start time: a recycled pid is not it).
//!
//! Its perf map (`/tmp/perf-PID.map`, the names of JIT code) is read then
//! too, in the process's own root and pid namespace (or, once it has
//! exited, in tracer's, by the pid tracer sees): opened with no symbolic
//! link followed anywhere in the path (openat2 RESOLVE_IN_ROOT |
//! RESOLVE_NO_SYMLINKS: a link planted there by the command cannot make
//! root read a file the command cannot), `O_PATH` first and checked on
//! that handle (a regular file owned by the process's user, written since
//! it started) before it is reopened for reading (a device the command
//! bind-mounts there is never opened), bounded.
use std::{
    fs::File,
    io::Read,
    os::{
        fd::{AsRawFd, FromRawFd},
        unix::fs::OpenOptionsExt,
    },
};

use nix::fcntl::ResolveFlag;

use crate::{
    eventlog::ProcKey,
    run::procs,
    symbolize::{JitMap, Mapping, Modules, EXITED, MAX_PERF_MAP_BYTES},
};

/// /proc/PID/maps read at most (a process with 100k mappings prints
/// ~10 MB; the frames of a crash are in the first few files).
const MAX_MAPS_BYTES: u64 = 4 << 20;
/// Distinct files held open per crash.
const MAX_FILES: usize = 256;

/// The mappings and open files of `key`, or why there are none; and the
/// entries of its perf map holding any of `addrs` (`frame_candidates`).
pub fn snapshot(key: ProcKey, addrs: &[u64]) -> Modules {
    match read(key, addrs) {
        Ok(m) => m,
        Err(why) => Modules {
            missing: Some(why),
            ..Default::default()
        },
    }
}

fn read(key: ProcKey, addrs: &[u64]) -> Result<Modules, String> {
    let mut text = String::new();
    File::open(format!("/proc/{}/maps", key.pid))
        .and_then(|f| f.take(MAX_MAPS_BYTES).read_to_string(&mut text))
        .map_err(|_| EXITED.to_string())?;
    let mut modules = Modules::default();
    // ((device, inode), index into files): one open per file.
    type Inode = ((u64, u64), u64);
    let mut by_inode: Vec<(Inode, usize)> = Vec::new();
    let mut unopened = 0usize;
    for line in text.lines() {
        let Some(m) = parse_line(line) else { continue };
        let (start, end, offset, executable, dev, ino, path) = m;
        let deleted = path.ends_with(" (deleted)");
        let path = path.trim_end_matches(" (deleted)").to_string();
        let mut file = by_inode
            .iter()
            .find(|(k, _)| *k == (dev, ino))
            .map(|(_, i)| *i);
        if file.is_none() && modules.files.len() < MAX_FILES {
            match open_mapped(key.pid, start, end) {
                Some(f) => {
                    modules.files.push(f);
                    by_inode.push(((dev, ino), modules.files.len() - 1));
                    file = Some(modules.files.len() - 1);
                }
                None => unopened += 1,
            }
        }
        modules.mappings.push(Mapping {
            start,
            end,
            offset,
            executable,
            path,
            deleted,
            file,
        });
    }
    modules.jit = perf_map(key, addrs);
    if !procs::alive(key) {
        return Err(EXITED.to_string());
    }
    modules.mappings.sort_by_key(|m| m.start);
    if unopened > 0 {
        modules.missing = Some(format!(
            "module unknown: {unopened} mapped file(s) could not be opened"
        ));
    }
    Ok(modules)
}

/// `start-end perms offset maj:min inode path`, file mappings only
/// (inode non-zero, an absolute path).
#[allow(clippy::type_complexity, reason = "one maps line's fields, used once")]
fn parse_line(line: &str) -> Option<(u64, u64, u64, bool, (u64, u64), u64, &str)> {
    let mut it = line.splitn(6, ' ');
    let range = it.next()?;
    let perms = it.next()?;
    let offset = u64::from_str_radix(it.next()?, 16).ok()?;
    let dev = it.next()?;
    let ino: u64 = it.next()?.parse().ok()?;
    let path = it.next()?.trim_start();
    if ino == 0 || !path.starts_with('/') {
        return None;
    }
    let (s, e) = range.split_once('-')?;
    let (ma, mi) = dev.split_once(':')?;
    Some((
        u64::from_str_radix(s, 16).ok()?,
        u64::from_str_radix(e, 16).ok()?,
        offset,
        perms.as_bytes().get(2) == Some(&b'x'),
        (
            u64::from_str_radix(ma, 16).ok()?,
            u64::from_str_radix(mi, 16).ok()?,
        ),
        ino,
        path,
    ))
}

/// The file mapped at `start-end`, opened through map_files: O_PATH, then
/// checked to be a regular file, then reopened for reading through
/// tracer's own fd.
fn open_mapped(pid: u32, start: u64, end: u64) -> Option<File> {
    let link = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(&link)
        .ok()?;
    if !handle.metadata().ok()?.file_type().is_file() {
        return None;
    }
    let path = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let fd = {
        let c = std::ffi::CString::new(path).ok()?;
        // SAFETY: a NUL-terminated path; the fd returned is owned below.
        unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY,
            )
        }
    };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd was just opened and is owned by nothing else.
    Some(unsafe { File::from_raw_fd(fd) })
}

/// The perf map of `key` (the JIT's names), its entries holding any of
/// `addrs` (none, when no frame falls in it: read, so not read again by
/// [`perf_map_after_exit`]); `None` when it wrote none or it is not safe
/// to read. While the
/// process lives: in its own root, by its own pid, owned by its real or
/// effective user.
fn perf_map(key: ProcKey, addrs: &[u64]) -> Option<JitMap> {
    let status = procfs::process::Process::new(key.pid as i32)
        .ok()?
        .status()
        .ok()?;
    // The name the runtime gave it: its pid as getpid(2) returns it, in
    // its own namespace (the last of NStgid).
    let own_pid = status
        .nstgid
        .as_ref()
        .and_then(|ids| ids.last().copied())
        .and_then(|p| u32::try_from(p).ok())
        .unwrap_or(key.pid);
    let root = open_dir(&format!("/proc/{}/root", key.pid))?;
    read_perf_map(
        &root,
        own_pid,
        &[status.ruid, status.euid],
        key.start,
        addrs,
    )
}

/// The perf map of `key` once it has exited (most crashes: a process
/// that dumps no core is gone before its record is read, docs/kernels.md):
/// the file outlives it (runtimes leave it in /tmp). Read in tracer's own
/// root by the pid tracer sees, owned by `owner` (the run's user: whose
/// processes the run's are, as far as tracer knows once they are gone).
pub fn perf_map_after_exit(key: ProcKey, owner: u32, addrs: &[u64]) -> Option<JitMap> {
    read_perf_map(&open_dir("/")?, key.pid, &[owner], key.start, addrs)
}

fn open_dir(path: &str) -> Option<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(path)
        .ok()
}

/// `tmp/perf-<own_pid>.map` under `root`: no link followed anywhere in
/// the path, a regular file owned by one of `uids`, written since the
/// process started (`start`, boot-time ns: a map an earlier process of
/// the same pid left behind is another program's), bounded.
fn read_perf_map(
    root: &File,
    own_pid: u32,
    uids: &[u32],
    start: u64,
    addrs: &[u64],
) -> Option<JitMap> {
    let name = format!("tmp/perf-{own_pid}.map");
    let since = started_at(start)?;
    // O_PATH first, owner and age checked on that handle, then reopened:
    // a device or FIFO the job bind-mounts at the name (in a mount
    // namespace of its own) is never opened for reading.
    let file = crate::outdir::open_checked(
        root,
        std::path::Path::new(&name),
        ResolveFlag::RESOLVE_IN_ROOT
            | ResolveFlag::RESOLVE_NO_SYMLINKS
            | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        |st| {
            let modified = std::time::UNIX_EPOCH
                + std::time::Duration::new(st.st_mtime.max(0) as u64, st.st_mtime_nsec as u32);
            match (uids.contains(&st.st_uid), modified >= since) {
                (true, true) => Ok(()),
                (false, _) => Err("owned by another user".into()),
                (_, false) => Err("older than the process".into()),
            }
        },
    )
    .ok()?;
    let mut text = Vec::new();
    file.take(MAX_PERF_MAP_BYTES).read_to_end(&mut text).ok()?;
    Some(JitMap::parse(&format!("/{name}"), &text, addrs))
}

/// The wall-clock time a process started at boot-time `start` ns, less a
/// second (file times are coarser than the clocks).
fn started_at(start: u64) -> Option<std::time::SystemTime> {
    let ago = std::time::Duration::from_nanos(super::clock::boot_ns().saturating_sub(start))
        + std::time::Duration::from_secs(1);
    std::time::SystemTime::now().checked_sub(ago)
}
