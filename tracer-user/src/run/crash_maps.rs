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
use std::{
    fs::File,
    io::Read,
    os::fd::{AsRawFd, FromRawFd},
};

use crate::{
    eventlog::ProcKey,
    run::procs,
    symbolize::{Mapping, Modules, EXITED},
};

/// /proc/PID/maps read at most (a process with 100k mappings prints
/// ~10 MB; the frames of a crash are in the first few files).
const MAX_MAPS_BYTES: u64 = 4 << 20;
/// Distinct files held open per crash.
const MAX_FILES: usize = 256;

/// The mappings and open files of `key`, or why there are none.
pub fn snapshot(key: ProcKey) -> Modules {
    match read(key) {
        Ok(m) => m,
        Err(why) => Modules {
            missing: Some(why),
            ..Default::default()
        },
    }
}

fn read(key: ProcKey) -> Result<Modules, String> {
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
    use std::os::unix::fs::OpenOptionsExt;
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
