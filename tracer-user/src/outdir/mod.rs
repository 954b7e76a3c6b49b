//! The output directory, held open: every file tracer writes as root is
//! created, renamed, read back and handed over relative to one directory fd,
//! never by a path the wrapped command could swap under it.
//!
//! The command may own the directory (a CI workspace): it can plant symlinks,
//! FIFOs or directories under any name, and rename the directory itself
//! away. So: files are created `O_EXCL|O_NOFOLLOW` under unpredictable temp
//! names and renamed into place (a rename replaces a planted link, it never
//! follows it); reads refuse anything but a regular file; ownership moves with
//! `fchown` on the open file. See docs/security.md.
mod checked;
pub mod names;
mod walk;

pub use checked::{as_user, open_checked};

use std::{
    ffi::OsStr,
    fs::File,
    io::{self, Write},
    os::{
        fd::{AsFd, OwnedFd},
        unix::ffi::OsStrExt,
    },
    path::{Path, PathBuf},
};

use nix::{
    errno::Errno,
    fcntl::{self, AtFlags, OFlag},
    sys::stat::{self, Mode, SFlag},
    unistd::{self, Gid, Uid, UnlinkatFlags},
};

/// Files tracer writes hold argv, stderr and paths: owner-only.
const FILE_MODE: u32 = 0o600;
/// Directories tracer creates: owner-only.
const DIR_MODE: u32 = 0o700;

#[derive(Debug, thiserror::Error)]
pub enum OutDirError {
    #[error("cannot open output directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("output directory {path}: {reason}; choose a directory only root or the run's user can write (e.g. --output ./tracer-report)")]
    Unsafe { path: PathBuf, reason: String },
    #[error("{path} names no file (it ends in `/`, `.` or `..`): give a file name, e.g. tracer-report/junit.xml")]
    NotAFile { path: PathBuf },
}

/// Who may own the output directory, and who gets the files at the end.
#[derive(Clone, Copy, Debug, Default)]
pub struct Policy {
    /// The run's user: the files are handed to them, and a directory they
    /// own is accepted. `None`: tracer's own user (files stay root's).
    pub owner: Option<(Uid, Gid)>,
    /// Accept a directory owned by any user (`tracer report` run on someone
    /// else's directory); a world-writable one is refused all the same.
    pub any_owner: bool,
}

pub struct OutDir {
    fd: OwnedFd,
    /// As given: for messages, and to notice the path being swapped.
    path: PathBuf,
    dev_ino: (u64, u64),
    owner: Option<(Uid, Gid)>,
    /// Directories this open created, outermost first: handed over at the end.
    created: Vec<OwnedFd>,
}

impl OutDir {
    /// Open `path`, creating what is missing (0700). Symlinks on the way are
    /// followed only where nobody but root could have made them.
    pub fn open(path: &Path, policy: Policy) -> Result<Self, OutDirError> {
        let (walked, st) = walk_to(path, true)?;
        check_dir(&st, policy).map_err(|reason| OutDirError::Unsafe {
            path: path.to_owned(),
            reason,
        })?;
        // Someone else's directory (`tracer report` as root on a job's
        // directory): the files go to the directory's owner.
        let owner = match policy.owner {
            None if policy.any_owner && st.st_uid != Uid::effective().as_raw() => {
                Some((Uid::from_raw(st.st_uid), Gid::from_raw(st.st_gid)))
            }
            owner => owner,
        };
        Ok(Self {
            fd: walked.fd,
            path: path.to_owned(),
            dev_ino: (st.st_dev, st.st_ino),
            owner,
            created: walked.created,
        })
    }

    /// An existing directory, to read from (`tracer report DIR`): walked as
    /// `open` does, no ownership check (reads refuse links and FIFOs anyway).
    pub fn open_existing(path: &Path) -> Result<Self, OutDirError> {
        let (walked, st) = walk_to(path, false)?;
        Ok(Self {
            fd: walked.fd,
            path: path.to_owned(),
            dev_ino: (st.st_dev, st.st_ino),
            owner: None,
            created: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `name` in the directory, for messages.
    pub fn display(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// A new, empty file at `name`, replacing whatever was there (a planted
    /// link is replaced, not followed). Root's until `hand_over`.
    pub fn create_replacing(&self, name: &str) -> io::Result<File> {
        let (tmp, file) = self.create_temp(name)?;
        self.rename_temp(&tmp, name)?;
        Ok(file)
    }

    /// Write `data` to `name` all at once: a reader sees the old file or the
    /// new one, never half of it. The file goes to the run's user.
    pub fn write_atomic(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.replace_with(name, |file| file.write_all(data))
    }

    /// Fill a new temp file, hand it over, rename it to `name`; on any
    /// failure the temp file is removed and `name` is untouched.
    fn replace_with(
        &self,
        name: &str,
        fill: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> io::Result<()> {
        let (tmp, mut file) = self.create_temp(name)?;
        let done = fill(&mut file)
            .and_then(|()| self.give(&file))
            .and_then(|()| self.rename_temp(&tmp, name));
        if done.is_err() {
            let _ = unistd::unlinkat(&self.fd, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
        }
        done
    }

    /// Open `name` for reading: a regular file only (a FIFO, device or
    /// symlink planted under a log's name is refused, not read).
    pub fn open_read(&self, name: &str) -> io::Result<File> {
        open_regular(&self.fd, Path::new(name))
    }

    /// Whether an entry `name` exists (a link counts; it is not followed).
    pub fn exists(&self, name: &str) -> bool {
        stat::fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
    }

    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        Ok(fcntl::renameat(&self.fd, from, &self.fd, to)?)
    }

    pub fn remove(&self, name: &str) -> io::Result<()> {
        Ok(unistd::unlinkat(
            &self.fd,
            name,
            UnlinkatFlags::NoRemoveDir,
        )?)
    }

    /// The names in the directory.
    pub fn names(&self) -> io::Result<Vec<String>> {
        let fd = fcntl::openat(
            &self.fd,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let mut dir = nix::dir::Dir::from_fd(fd)?;
        Ok(dir
            .iter()
            .flatten()
            .filter_map(|e| e.file_name().to_str().ok().map(str::to_owned))
            .filter(|n| n != "." && n != "..")
            .collect())
    }

    /// Make `name` hold `held`'s content again (read from `content`) if the
    /// command removed or replaced it during the run (tracer kept writing its
    /// own file): a fresh copy is written in its place. Returns whether it had to.
    pub fn restore(&self, name: &str, held: &File, mut content: impl io::Read) -> io::Result<bool> {
        let held = stat::fstat(held)?;
        let now = stat::fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW).ok();
        if now.is_some_and(|st| (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)) {
            return Ok(false);
        }
        self.replace_with(name, |copy| io::copy(&mut content, copy).map(drop))?;
        Ok(true)
    }

    /// A copy of `content` under `name`, made as every file here is (a fresh
    /// temporary file, `0600`, kept by tracer's own user: a daemon's log
    /// stays root's) and renamed into place: over whatever is there when
    /// `replace`, else only where the name is free (`RENAME_NOREPLACE`: a
    /// file the job put there is left alone). `Ok(None)`: the name was taken.
    pub fn copy_in(
        &self,
        name: &str,
        mut content: impl io::Read,
        replace: bool,
    ) -> io::Result<Option<File>> {
        let (tmp, mut file) = self.create_temp(name)?;
        let done = io::copy(&mut content, &mut file)
            .and_then(|_| file.sync_data())
            .and_then(|()| self.rename_no_replace(&tmp, name, replace));
        match done {
            Ok(()) => Ok(Some(file)),
            Err(e) => {
                let _ = unistd::unlinkat(&self.fd, tmp.as_os_str(), UnlinkatFlags::NoRemoveDir);
                match e.raw_os_error() {
                    Some(libc::EEXIST) if !replace => Ok(None),
                    _ => Err(e),
                }
            }
        }
    }

    /// renameat2(2) within the directory, `RENAME_NOREPLACE` unless
    /// `replace`. A raw syscall: nix wraps renameat2 for glibc only, and the
    /// release binary is static musl.
    fn rename_no_replace(&self, from: &OsStr, to: &str, replace: bool) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let c = |s: &[u8]| std::ffi::CString::new(s).map_err(io::Error::other);
        let (from, to) = (c(from.as_bytes())?, c(to.as_bytes())?);
        let flags = if replace { 0 } else { libc::RENAME_NOREPLACE };
        let dir = self.fd.as_raw_fd();
        // SAFETY: NUL-terminated paths and a directory fd held by self.
        let r = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                dir,
                from.as_ptr(),
                dir,
                to.as_ptr(),
                flags,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Whether `name` is `file` itself (not a link to it, not another file).
    pub fn holds(&self, name: &str, file: &File) -> bool {
        let Ok(held) = stat::fstat(file) else {
            return false;
        };
        stat::fstatat(&self.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .is_ok_and(|st| (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino))
    }

    /// Hand an open file to the run's user (no-op without one).
    pub fn give(&self, file: &File) -> io::Result<()> {
        match self.owner {
            Some((uid, gid)) => Ok(unistd::fchown(file.as_fd(), Some(uid), Some(gid))?),
            None => Ok(()),
        }
    }

    /// At the end of a run: the directories this open created go to the run's
    /// user (a directory that existed keeps its owner). Best effort.
    pub fn hand_over_dirs(&self) {
        let Some((uid, gid)) = self.owner else { return };
        for fd in &self.created {
            if let Err(e) = unistd::fchown(fd, Some(uid), Some(gid)) {
                log::warn!("cannot hand {} over to uid {uid}: {e}", self.path.display());
            }
        }
    }

    /// `Err` with a message when the path no longer names the directory
    /// tracer holds (the command moved it away or put a link in its place).
    /// The files are still in the held directory, wherever it is now.
    pub fn check_in_place(&self) -> Result<(), String> {
        // Walked again as `open` walked it: a root-made link to the
        // directory (`--output /srv/reports`, a link only root could make)
        // still leads to it, where `lstat` saw the link's own inode and
        // warned of a swap that never happened. A link the command planted
        // is refused by the walk, and so reported as a swap.
        let now = walk::open_dir(&self.path, false)
            .ok()
            .and_then(|w| stat::fstat(&w.fd).ok())
            .map(|st| (st.st_dev, st.st_ino));
        if now == Some(self.dev_ino) {
            return Ok(());
        }
        Err(format!(
            "output directory {} was replaced during the run (moved away or swapped for a link); \
             nothing was written through the new path: the reports are in the original directory, \
             wherever it was moved",
            self.path.display()
        ))
    }

    fn create_temp(&self, name: &str) -> io::Result<(std::ffi::OsString, File)> {
        for _ in 0..8 {
            let tmp = temp_name(name)?;
            match fcntl::openat(
                &self.fd,
                tmp.as_os_str(),
                // Read too: the event log is read back through this file.
                OFlag::O_RDWR
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(FILE_MODE),
            ) {
                Ok(fd) => {
                    // The mode at creation is masked by the umask: set it exactly.
                    stat::fchmod(&fd, Mode::from_bits_truncate(FILE_MODE))?;
                    return Ok((tmp, File::from(fd)));
                }
                Err(Errno::EEXIST) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "could not find a free temporary name",
        ))
    }

    fn rename_temp(&self, tmp: &OsStr, name: &str) -> io::Result<()> {
        fcntl::renameat(&self.fd, tmp, &self.fd, name).map_err(|e| {
            let _ = unistd::unlinkat(&self.fd, tmp, UnlinkatFlags::NoRemoveDir);
            io::Error::from(e)
        })
    }
}

/// One file tracer writes outside its output directory (`--junit PATH`):
/// its parent directory is walked, checked and held exactly as an output
/// directory is ([`OutDir::open`], with the same [`Policy`]), from before
/// the command runs, and the file is written into it atomically, created
/// `O_EXCL|O_NOFOLLOW` and renamed into place, `0600`, handed to the run's
/// user: a link the command planted at the path, or at a directory above
/// it, is replaced or refused, never followed.
pub struct OutFile {
    dir: OutDir,
    name: String,
}

impl OutFile {
    pub fn open(path: &Path, policy: Policy) -> Result<Self, OutDirError> {
        let not_a_file = || OutDirError::NotAFile {
            path: path.to_owned(),
        };
        // `file_name` is None for `..` and `/`; a trailing `/.` or `/` is
        // a directory the user meant, not a file.
        let raw = path.as_os_str().as_bytes();
        if raw.ends_with(b"/") || raw.ends_with(b"/.") || raw == b"." {
            return Err(not_a_file());
        }
        let name = path
            .file_name()
            .and_then(OsStr::to_str)
            .ok_or_else(not_a_file)?
            .to_owned();
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        Ok(Self {
            dir: OutDir::open(parent, policy)?,
            name,
        })
    }

    /// The path as given, for messages.
    pub fn display(&self) -> PathBuf {
        self.dir.display(&self.name)
    }

    /// Write the whole file at once (a reader sees the old one or the new
    /// one), handed to the run's user; directories the open created go to
    /// that user too.
    pub fn write(&self, data: &[u8]) -> io::Result<()> {
        self.dir.write_atomic(&self.name, data)?;
        self.dir.hand_over_dirs();
        Ok(())
    }
}

impl std::fmt::Debug for OutFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("OutFile").field(&self.display()).finish()
    }
}

fn walk_to(path: &Path, create: bool) -> Result<(walk::Walked, stat::FileStat), OutDirError> {
    let io_err = |source| OutDirError::Io {
        path: path.to_owned(),
        source,
    };
    let walked = walk::open_dir(path, create).map_err(|e| match e {
        walk::WalkError::Io(source) => io_err(source),
        walk::WalkError::Unsafe(reason) => OutDirError::Unsafe {
            path: path.to_owned(),
            reason,
        },
    })?;
    let st = stat::fstat(&walked.fd).map_err(|e| io_err(e.into()))?;
    Ok((walked, st))
}

/// Open `path` (relative to `dir`) for reading if it is a regular file: the
/// last component is not followed, and a FIFO or device is refused before
/// any read could block or never end.
pub fn open_regular<Fd: AsFd>(dir: Fd, path: &Path) -> io::Result<File> {
    let fd = fcntl::openat(
        dir,
        path,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::ELOOP => io::Error::new(
            io::ErrorKind::InvalidInput,
            "a symbolic link (tracer reads only regular files: pass the file it points to)",
        ),
        e => e.into(),
    })?;
    let st = stat::fstat(&fd)?;
    if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or directory is never read)",
        ));
    }
    // Back to blocking reads: O_NONBLOCK was only for the open.
    let flags = OFlag::from_bits_truncate(fcntl::fcntl(&fd, fcntl::FcntlArg::F_GETFL)?);
    fcntl::fcntl(&fd, fcntl::FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK))?;
    Ok(File::from(fd))
}

/// `.NAME.<16 random hex>.tmp`: a name the command cannot guess in advance.
fn temp_name(name: &str) -> io::Result<std::ffi::OsString> {
    let hex = random_hex()?;
    Ok(OsStr::from_bytes(format!(".{name}.{hex}.tmp").as_bytes()).to_owned())
}

/// 16 hex digits from the kernel's random pool: the unguessable part of
/// a name tracer creates where others may look (a temp file here, the
/// `--tests` directory in /tmp).
pub fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 8];
    let mut got = 0;
    while got < bytes.len() {
        // SAFETY: writes at most the remaining length into our buffer.
        let n = unsafe { libc::getrandom(bytes[got..].as_mut_ptr().cast(), bytes.len() - got, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        got += n as usize;
    }
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Refuse a directory others could write into (see [`Policy`]).
fn check_dir(st: &nix::sys::stat::FileStat, policy: Policy) -> Result<(), String> {
    let mode = st.st_mode & 0o7777;
    if mode & 0o002 != 0 {
        return Err(format!("it is world-writable (mode {mode:04o})"));
    }
    let uid = st.st_uid;
    let run_user = policy.owner.map(|(u, _)| u.as_raw());
    let me = Uid::effective().as_raw();
    let trusted = uid == 0 || uid == me || Some(uid) == run_user || policy.any_owner;
    if !trusted {
        return Err(format!(
            "it belongs to uid {uid}, neither root nor the run's user"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
