//! The integrations' directory: made for one run in a temporary directory,
//! removed at its end. tracer writes it as root, so every step is relative
//! to a held fd and follows no link: the directory is created under a name
//! nobody can guess (`tracer-tests-<16 random hex>`, as mkdtemp(3) does),
//! opened `O_NOFOLLOW` and checked to be the one made, its files created
//! `O_EXCL|O_NOFOLLOW`. It is 0700, tracer's own, or the command's user's
//! when the command runs as another (`--user`, sudo): that user reads it,
//! nobody else.
//!
//! The command's user may then write there (Python's `__pycache__`), so
//! the removal walks the held directory by fd, never by path, deleting
//! without following links, bounded in depth and entries.
use std::{
    ffi::{OsStr, OsString},
    fs::File,
    io::{self, Write},
    os::{fd::OwnedFd, unix::ffi::OsStrExt},
    path::{Path, PathBuf},
};

use nix::{
    errno::Errno,
    fcntl::{self, AtFlags, OFlag},
    sys::stat::{self, Mode, SFlag},
    unistd::{self, Gid, Uid, UnlinkatFlags},
};

use crate::error::TracerError;

/// Deepest a removal goes below the directory (Python writes one level).
const MAX_DEPTH: usize = 8;
/// Most entries a removal deletes: the directory is the command's to
/// write into, and tracer's exit must not wait on a tree it filled.
const MAX_ENTRIES: usize = 10_000;

pub struct IntegrationDir {
    base: OwnedFd,
    name: OsString,
    fd: OwnedFd,
    path: PathBuf,
    dev_ino: (u64, u64),
}

impl IntegrationDir {
    /// A new directory holding `files` (name, content), readable by the
    /// command's user: `owner` when the command runs as another user than
    /// tracer. `tmpdir`: tracer's `TMPDIR`, used when it is safe and the
    /// command keeps tracer's user (another user's command gets /tmp: root's
    /// TMPDIR may be a place that user cannot reach).
    pub fn create(
        files: &[(&str, &str)],
        owner: Option<(Uid, Gid)>,
        tmpdir: Option<&OsStr>,
    ) -> Result<Self, TracerError> {
        let mut refused = Vec::new();
        let candidates = tmpdir
            .filter(|_| owner.is_none())
            .map(Path::new)
            .filter(|p| p.is_absolute())
            .into_iter()
            .chain([Path::new("/tmp")]);
        for base in candidates {
            match open_base(base, owner.is_some()) {
                Ok(fd) => return Self::create_in(fd, base, files, owner),
                Err(why) => refused.push(format!("{}: {why}", base.display())),
            }
        }
        Err(TracerError::TestsDir {
            path: PathBuf::from("/tmp"),
            source: io::Error::other(refused.join("; ")),
        })
    }

    fn create_in(
        base: OwnedFd,
        base_path: &Path,
        files: &[(&str, &str)],
        owner: Option<(Uid, Gid)>,
    ) -> Result<Self, TracerError> {
        let err = |path: PathBuf| move |e: io::Error| TracerError::TestsDir { path, source: e };
        let (name, fd) = make_dir(&base).map_err(err(base_path.to_owned()))?;
        let path = base_path.join(&name);
        let st = stat::fstat(&fd).map_err(|e| err(path.clone())(e.into()))?;
        let dir = Self {
            base,
            name,
            fd,
            path: path.clone(),
            dev_ino: (st.st_dev, st.st_ino),
        };
        // From here on a failure removes what was made (Drop).
        dir.fill(files, owner).map_err(err(path))?;
        Ok(dir)
    }

    fn fill(&self, files: &[(&str, &str)], owner: Option<(Uid, Gid)>) -> io::Result<()> {
        write_files(&self.fd, files, owner, Create::Fresh)?;
        if let Some((uid, gid)) = owner {
            unistd::fchown(&self.fd, Some(uid), Some(gid))?;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Delete the directory and whatever the command left in it.
    pub fn remove(&self) -> io::Result<()> {
        let mut budget = MAX_ENTRIES;
        empty(&self.fd, 0, &mut budget)?;
        // The name may have been renamed away and replaced (the command's
        // user owns the directory): only ours is removed.
        let now = stat::fstatat(
            &self.base,
            self.name.as_os_str(),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )?;
        if (now.st_dev, now.st_ino) != self.dev_ino {
            return Err(io::Error::other("it was renamed during the run"));
        }
        Ok(unistd::unlinkat(
            &self.base,
            self.name.as_os_str(),
            UnlinkatFlags::RemoveDir,
        )?)
    }
}

impl Drop for IntegrationDir {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            crate::say!(
                "tracer: warning: --tests: cannot remove {} ({e}); delete it by hand",
                self.path.display()
            );
        }
    }
}

/// How [`write_files`] creates a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Create {
    /// In a directory just made: `O_EXCL`, nothing may be there.
    Fresh,
    /// In a directory kept from an earlier call (`tracer integrations`
    /// run again, or by a newer tracer): each file written under a fresh
    /// name, then renamed over the old one. A rename replaces the entry,
    /// never follows it: a link left there is replaced, not written
    /// through.
    Replace,
}

/// Write `files` (name, content) into the directory `at`, each 0444; a
/// name `sub/file` goes into the subdirectory `sub` (made 0755 when
/// first named: pytest's entry point lives in a `.dist-info` directory),
/// one level deep, opened without following a link like the rest.
/// `owner`: who gets the subdirectories (the command's user under
/// `--user`).
pub(super) fn write_files(
    at: &OwnedFd,
    files: &[(&str, &str)],
    owner: Option<(Uid, Gid)>,
    how: Create,
) -> io::Result<()> {
    let mut subs: Vec<(&str, OwnedFd)> = Vec::new();
    for (name, text) in files {
        let (dir, name) = match name.split_once('/') {
            None => (at, *name),
            Some((sub, file)) => {
                if file.contains('/') || sub.is_empty() || sub == "." || sub == ".." {
                    return Err(io::Error::other(format!(
                        "{name}: one level of directory only"
                    )));
                }
                if !subs.iter().any(|(s, _)| *s == sub) {
                    subs.push((sub, subdir(at, sub, owner, how)?));
                }
                let fd = &subs.iter().find(|(s, _)| *s == sub).expect("just made").1;
                (fd, file)
            }
        };
        match how {
            Create::Fresh => write_new(dir, name, text)?,
            Create::Replace => {
                let tmp = format!(".{name}.{}.tmp", crate::outdir::random_hex()?);
                write_new(dir, &tmp, text)?;
                if let Err(e) = fcntl::renameat(dir, tmp.as_str(), dir, name) {
                    let _ = unistd::unlinkat(dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
                    return Err(e.into());
                }
            }
        }
    }
    Ok(())
}

/// A new file `name` in `dir` holding `text`, 0444, created without
/// following a link (`O_EXCL|O_NOFOLLOW`).
fn write_new(dir: &OwnedFd, name: &str, text: &str) -> io::Result<()> {
    let fd = fcntl::openat(
        dir,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o444),
    )?;
    stat::fchmod(&fd, Mode::from_bits_truncate(0o444))?;
    File::from(fd).write_all(text.as_bytes())
}

/// The subdirectory `sub` of `at`: made 0755, or, with [`Create::Replace`],
/// the one already there when it is this user's and nobody else can
/// write it.
fn subdir(at: &OwnedFd, sub: &str, owner: Option<(Uid, Gid)>, how: Create) -> io::Result<OwnedFd> {
    let made = match stat::mkdirat(at, sub, Mode::from_bits_truncate(0o755)) {
        Ok(()) => true,
        Err(Errno::EEXIST) if how == Create::Replace => false,
        Err(e) => return Err(e.into()),
    };
    let fd = fcntl::openat(
        at,
        sub,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    if !made {
        let st = stat::fstat(&fd)?;
        if st.st_uid != Uid::effective().as_raw() || st.st_mode & 0o022 != 0 {
            return Err(io::Error::other(format!(
                "{sub} is there already and is not yours alone (uid {}, mode {:04o})",
                st.st_uid,
                st.st_mode & 0o7777
            )));
        }
    }
    stat::fchmod(&fd, Mode::from_bits_truncate(0o755))?;
    if let Some((uid, gid)) = owner {
        unistd::fchown(&fd, Some(uid), Some(gid))?;
    }
    Ok(fd)
}

/// The base directory, if tracer may create in it: owned by root (or
/// tracer), and writable by others only when sticky (/tmp), so nobody
/// else can rename or remove what tracer makes there. `traversable`: the
/// command runs as another user, who must reach it. Its path must also
/// read the same in every variable it goes into (no `:`, no control).
pub(super) fn open_base(path: &Path, traversable: bool) -> Result<OwnedFd, String> {
    let bytes = path.as_os_str().as_bytes();
    if bytes.iter().any(|&b| b == b':' || b < 0x20 || b == 0x7f)
        || std::str::from_utf8(bytes).is_err()
    {
        return Err("its path has a `:`, a control character or is not UTF-8".into());
    }
    let fd = fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| e.desc().to_string())?;
    let st = stat::fstat(&fd).map_err(|e| e.desc().to_string())?;
    let mode = st.st_mode & 0o7777;
    if st.st_uid != 0 && st.st_uid != Uid::effective().as_raw() {
        return Err(format!("owned by uid {}, not root", st.st_uid));
    }
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(format!(
            "writable by others and not sticky (mode {mode:04o})"
        ));
    }
    if traversable && mode & 0o001 == 0 {
        return Err(format!(
            "the command's user cannot enter it (mode {mode:04o})"
        ));
    }
    Ok(fd)
}

/// mkdtemp(3) relative to `base`: a fresh name, made 0700, opened without
/// following a link, and checked to be a directory tracer owns.
fn make_dir(base: &OwnedFd) -> io::Result<(OsString, OwnedFd)> {
    for _ in 0..8 {
        let name = OsString::from(format!("tracer-tests-{}", crate::outdir::random_hex()?));
        match stat::mkdirat(base, name.as_os_str(), Mode::from_bits_truncate(0o700)) {
            Ok(()) => {}
            Err(Errno::EEXIST) => continue,
            Err(e) => return Err(e.into()),
        }
        let fd = fcntl::openat(
            base,
            name.as_os_str(),
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let st = stat::fstat(&fd)?;
        if st.st_uid != Uid::effective().as_raw() {
            return Err(io::Error::other("the directory made is not tracer's"));
        }
        // The umask may have taken bits; none may be added.
        stat::fchmod(&fd, Mode::from_bits_truncate(0o700))?;
        return Ok((name, fd));
    }
    Err(io::Error::other("no free name after 8 tries"))
}

/// Delete everything in `dir`, by fd, never following a link.
fn empty(dir: &OwnedFd, depth: usize, budget: &mut usize) -> io::Result<()> {
    let mut names = Vec::new();
    {
        let mut d = nix::dir::Dir::openat(
            dir,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        for e in d.iter() {
            let e = e?;
            let n = e.file_name().to_bytes();
            if n == b"." || n == b".." {
                continue;
            }
            names.push(OsStr::from_bytes(n).to_owned());
        }
    }
    for name in names {
        if *budget == 0 {
            return Err(io::Error::other(format!(
                "more than {MAX_ENTRIES} entries were written into it"
            )));
        }
        *budget -= 1;
        let st = stat::fstatat(dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR {
            if depth >= MAX_DEPTH {
                return Err(io::Error::other(format!(
                    "directories more than {MAX_DEPTH} deep were written into it"
                )));
            }
            let sub = fcntl::openat(
                dir,
                name.as_os_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            empty(&sub, depth + 1, budget)?;
            unistd::unlinkat(dir, name.as_os_str(), UnlinkatFlags::RemoveDir)?;
        } else {
            unistd::unlinkat(dir, name.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
        }
    }
    Ok(())
}
