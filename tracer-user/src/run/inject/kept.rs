//! `tracer integrations --dir DIR`: the `--tests` integrations written
//! into a directory a CI job keeps for its later steps (the sidecar form:
//! a daemon starts no command whose environment it could change).
//!
//! It needs no privilege and the CI scripts run it as the job's user,
//! never through sudo: root writing into a directory the job controls is
//! the hostile case docs/security.md guards (a link planted there turns
//! root's write into one anywhere). Run as root anyway (a container job
//! whose user is root), it holds the same rules, which are those of the
//! scripts' `ci_private_dir`: DIR is made 0700 or, when it exists, must be
//! a directory of the caller's that nobody else can enter or change, and
//! it and every directory above it can be changed only by root or the
//! caller (a sticky `/tmp` above is fine). DIR is opened without following
//! a link and every file is written relative to it, never through a
//! link: the same files, the same no-follow creation as `record --tests`
//! (`dir.rs`), each under a fresh name then renamed into place, so a
//! second run (or a newer tracer) replaces what an earlier one wrote.
use std::{
    io,
    os::{fd::OwnedFd, unix::ffi::OsStrExt},
    path::{Component, Path, PathBuf},
};

use nix::{
    errno::Errno,
    fcntl::{self, OFlag},
    sys::stat::{self, FileStat, Mode},
    unistd::Uid,
};

use super::dir::{write_files, Create};
use crate::error::TracerError;

/// Write `files` into `dir` (made when missing) and return its absolute
/// path, as the variables name it.
pub fn write_kept(dir: &Path, files: &[(&str, &str)]) -> Result<PathBuf, TracerError> {
    let err = |source: io::Error| TracerError::IntegrationsDir {
        path: dir.to_owned(),
        source,
    };
    let abs = absolute(dir).map_err(err)?;
    let fd = open_private(&abs).map_err(err)?;
    write_files(&fd, files, None, Create::Replace).map_err(err)?;
    Ok(abs)
}

/// `dir` made absolute (a relative `PYTHONPATH` entry is read against
/// each process's working directory), lexically: `..` is refused rather
/// than resolved. Its bytes must read the same in every variable it goes
/// into: no `:` (`PYTHONPATH`'s separator), no control character, UTF-8.
fn absolute(dir: &Path) -> io::Result<PathBuf> {
    let abs = if dir.is_absolute() {
        dir.to_owned()
    } else {
        std::env::current_dir()?.join(dir)
    };
    let mut clean = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => clean.push(n),
            Component::ParentDir | Component::Prefix(_) => {
                return Err(io::Error::other("name it without `..`"))
            }
        }
    }
    let bytes = clean.as_os_str().as_bytes();
    if bytes.iter().any(|&b| b == b':' || b < 0x20 || b == 0x7f)
        || std::str::from_utf8(bytes).is_err()
    {
        return Err(io::Error::other(
            "its path has a `:`, a control character or is not UTF-8 (PYTHONPATH could not name it)",
        ));
    }
    if clean.parent().is_none() {
        return Err(io::Error::other("not `/`"));
    }
    Ok(clean)
}

/// The directory `abs`, made 0700 when missing, opened without following
/// a link, after its parents are checked; refused unless it is the
/// caller's alone.
fn open_private(abs: &Path) -> io::Result<OwnedFd> {
    let (parent, name) = match (abs.parent(), abs.file_name()) {
        (Some(p), Some(n)) => (p, n),
        _ => return Err(io::Error::other("no parent directory")),
    };
    let parent_fd = fcntl::open(
        parent,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io::Error::other(format!("{}: {}", parent.display(), e.desc())))?;
    parents_safe(&parent_fd, parent)?;
    let made = match stat::mkdirat(&parent_fd, name, Mode::from_bits_truncate(0o700)) {
        Ok(()) => true,
        Err(Errno::EEXIST) => false,
        Err(e) => return Err(e.into()),
    };
    let fd = fcntl::openat(
        &parent_fd,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ELOOP | Errno::ENOTDIR => {
            io::Error::other("it is a link or not a directory: name a directory of your own")
        }
        e => e.into(),
    })?;
    let st = stat::fstat(&fd)?;
    let me = Uid::effective().as_raw();
    if st.st_uid != me {
        return Err(io::Error::other(format!(
            "it exists and is owned by uid {}, not you (uid {me}): remove it or name another",
            st.st_uid
        )));
    }
    if made {
        // The umask may have taken bits; none may be added.
        stat::fchmod(&fd, Mode::from_bits_truncate(0o700))?;
    } else if st.st_mode & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "it exists and others can enter it (mode {:04o}): make it 0700, or remove it",
            st.st_mode & 0o7777
        )));
    }
    Ok(fd)
}

/// `parent` (held as `fd`) and every directory above it, walked by `..`
/// from the held fd (so what is checked is what the directory is in, not
/// what a path names later), can be changed only by root or the caller;
/// a world-writable one only when sticky (nobody else may rename or
/// remove entries in it).
fn parents_safe(fd: &OwnedFd, parent: &Path) -> io::Result<()> {
    let me = Uid::effective().as_raw();
    let mut st = stat::fstat(fd)?;
    let mut at = fcntl::openat(
        fd,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // A path has at most 4096 bytes: never more levels than that.
    for depth in 0..4096 {
        if let Some(why) = unsafe_dir(&st, me) {
            let up = "/..".repeat(depth);
            return Err(io::Error::other(format!(
                "{}{up} {why}: another user could swap it; name a directory whose parents only you and root can change",
                parent.display()
            )));
        }
        let up = fcntl::openat(
            &at,
            "..",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let above = stat::fstat(&up)?;
        if (above.st_dev, above.st_ino) == (st.st_dev, st.st_ino) {
            return Ok(());
        }
        (at, st) = (up, above);
    }
    Err(io::Error::other("deeper than any path"))
}

/// Why a directory can be changed by someone other than root or `me`.
fn unsafe_dir(st: &FileStat, me: u32) -> Option<String> {
    let mode = st.st_mode & 0o7777;
    if st.st_uid != 0 && st.st_uid != me {
        return Some(format!("is owned by uid {}", st.st_uid));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Some(format!("is writable by others (mode {mode:04o})"));
    }
    None
}
