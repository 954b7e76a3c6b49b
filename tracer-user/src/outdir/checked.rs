//! A file root reads on a job's behalf (a perf map, a script's `#!` line, a
//! runner's report), opened so that nothing but a checked regular file is
//! ever opened for reading: `O_PATH` first (no open of a device or FIFO the
//! job put under the name runs: a device's open has effects of its own, a
//! watchdog's arms a reboot), its type and owner checked on that handle with
//! fstat, and only then reopened for reading through `/proc/self/fd/N`, the
//! very inode checked (no path is resolved again).
use std::{fs::File, io, os::fd::AsRawFd, path::Path};

use nix::{
    fcntl::{self, OFlag, OpenHow, ResolveFlag},
    sys::stat::{self, FileStat, Mode, SFlag},
};

/// Open `path` (relative to `dir`, resolved with `resolve`; the last
/// component never followed) for reading, if it is a regular file that
/// `check` accepts (`Err`: why not).
pub fn open_checked<Fd: std::os::fd::AsFd>(
    dir: Fd,
    path: &Path,
    resolve: ResolveFlag,
    check: impl FnOnce(&FileStat) -> Result<(), String>,
) -> io::Result<File> {
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
        .resolve(resolve);
    let handle = fcntl::openat2(dir, path, how)?;
    let st = stat::fstat(&handle)?;
    let refuse = |why: &str| Err(io::Error::new(io::ErrorKind::InvalidInput, why));
    match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
        SFlag::S_IFREG => {}
        SFlag::S_IFLNK => return refuse("a symbolic link: refused, never followed"),
        _ => {
            return refuse(
                "not a regular file (a FIFO, device or directory is never opened for reading)",
            )
        }
    }
    check(&st).map_err(|why| io::Error::new(io::ErrorKind::PermissionDenied, why))?;
    let fd = fcntl::open(
        format!("/proc/self/fd/{}", handle.as_raw_fd()).as_str(),
        OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
        Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Run `f` with this thread's filesystem ids set to `user` (uid, gid),
/// then back: a path the job named (a crashed process's exec path and
/// library list, a `--test-report` file) is opened with its user's rights,
/// never root's, so no file that user could not read, nor one reached
/// through a directory it cannot search, is read into its report.
/// setfsuid/setfsgid are per thread (raw syscalls in glibc and musl
/// alike); supplementary groups stay root's. `None`: tracer's own ids.
pub fn as_user<T>(user: Option<(u32, u32)>, f: impl FnOnce() -> T) -> T {
    let Some((uid, gid)) = user else { return f() };
    // SAFETY: filesystem ids of this thread only; restored below, while
    // CAP_SETUID (kept by setfsuid) still allows it.
    let (old_gid, old_uid) = unsafe { (libc::setfsgid(gid), libc::setfsuid(uid)) };
    let r = f();
    // SAFETY: as above: back to tracer's own filesystem ids.
    unsafe {
        libc::setfsuid(old_uid as u32);
        libc::setfsgid(old_gid as u32);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_checked_regular_file_is_opened_for_reading() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = File::open(tmp.path()).unwrap();
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        nix::unistd::mkfifo(&tmp.path().join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        std::os::unix::fs::symlink("file", tmp.path().join("link")).unwrap();
        let none = ResolveFlag::empty();
        let ok = |_: &FileStat| Ok(());
        assert!(open_checked(&dir, Path::new("file"), none, ok).is_ok());
        // A FIFO's open would block for a writer: it is never opened.
        let e = open_checked(&dir, Path::new("fifo"), none, ok).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        assert!(open_checked(&dir, Path::new("link"), none, ok).is_err());
        let e = open_checked(&dir, Path::new("file"), none, |_| Err("no".into())).unwrap_err();
        assert_eq!(e.to_string(), "no");
    }
}
