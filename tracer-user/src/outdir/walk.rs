//! Walk a path one component at a time from held directory fds, creating
//! what is missing, following a symlink only where nobody but root could have
//! made it (a root-owned link in a root-owned directory others cannot write,
//! or a sticky one such as /tmp). Everything else refuses: a link the wrapped
//! command planted never redirects where root writes.
use std::{
    collections::VecDeque,
    ffi::{OsStr, OsString},
    io,
    os::fd::OwnedFd,
    path::{Component, Path},
};

use nix::{
    errno::Errno,
    fcntl::{self, AtFlags, OFlag},
    sys::stat::{self, FileStat, Mode, SFlag},
};

/// Links followed on one walk at most (the kernel's own limit).
const MAX_LINKS: usize = 40;

pub(super) struct Walked {
    pub fd: OwnedFd,
    /// The directories the walk created, outermost first.
    pub created: Vec<OwnedFd>,
}

pub(super) enum WalkError {
    Io(io::Error),
    Unsafe(String),
}

impl From<Errno> for WalkError {
    fn from(e: Errno) -> Self {
        WalkError::Io(e.into())
    }
}

enum Step {
    Root,
    Parent,
    Name(OsString),
}

fn steps(path: &Path) -> VecDeque<Step> {
    path.components()
        .filter_map(|c| match c {
            Component::RootDir => Some(Step::Root),
            Component::ParentDir => Some(Step::Parent),
            Component::Normal(n) => Some(Step::Name(n.to_owned())),
            Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn open_at(dir: &OwnedFd, name: &OsStr) -> nix::Result<OwnedFd> {
    fcntl::openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

pub(super) fn open_dir(path: &Path, create: bool) -> Result<Walked, WalkError> {
    if path.as_os_str().is_empty() {
        return Err(WalkError::Io(io::Error::new(
            io::ErrorKind::InvalidInput,
            "empty path",
        )));
    }
    let mut cur = open_at_cwd(if path.is_absolute() { "/" } else { "." })?;
    let mut todo = steps(path);
    let mut created = Vec::new();
    let mut links = 0;
    while let Some(step) = todo.pop_front() {
        let name = match step {
            Step::Root => {
                cur = open_at_cwd("/")?;
                continue;
            }
            Step::Parent => OsString::from(".."),
            Step::Name(n) => n,
        };
        match open_at(&cur, &name) {
            Ok(fd) => {
                cur = fd;
                continue;
            }
            Err(Errno::ENOENT) if create => {
                match stat::mkdirat(&cur, name.as_os_str(), Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                let fd = open_at(&cur, &name)?;
                // Exactly 0700, whatever the umask.
                stat::fchmod(&fd, Mode::from_bits_truncate(super::DIR_MODE))?;
                created.push(fd.try_clone().map_err(WalkError::Io)?);
                cur = fd;
                continue;
            }
            Err(Errno::ELOOP) | Err(Errno::ENOTDIR) => {}
            Err(e) => return Err(e.into()),
        }
        // Not a directory, or a link: follow only a link only root could make.
        let st = stat::fstatat(&cur, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)?;
        if kind(&st) != SFlag::S_IFLNK {
            return Err(WalkError::Io(Errno::ENOTDIR.into()));
        }
        let parent = stat::fstat(&cur)?;
        if !link_trusted(&st, &parent) {
            return Err(WalkError::Unsafe(format!(
                "{} is a symlink that a user other than root could have planted (owner uid {}, in a directory of uid {} mode {:04o})",
                Path::new(&name).display(),
                st.st_uid,
                parent.st_uid,
                parent.st_mode & 0o7777
            )));
        }
        links += 1;
        if links > MAX_LINKS {
            return Err(WalkError::Io(Errno::ELOOP.into()));
        }
        let target = fcntl::readlinkat(&cur, name.as_os_str())?;
        let mut expanded = steps(Path::new(&target));
        expanded.extend(todo);
        todo = expanded;
    }
    Ok(Walked { fd: cur, created })
}

fn open_at_cwd(path: &str) -> Result<OwnedFd, WalkError> {
    Ok(fcntl::openat(
        fcntl::AT_FDCWD,
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?)
}

fn kind(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// Root made the link, and only root can replace it: the directory holding
/// it is root's and either closed to others or sticky.
fn link_trusted(link: &FileStat, parent: &FileStat) -> bool {
    let closed = parent.st_mode & 0o022 == 0;
    let sticky = parent.st_mode & 0o1000 != 0;
    link.st_uid == 0 && parent.st_uid == 0 && (closed || sticky)
}
