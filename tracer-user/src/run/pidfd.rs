//! Processes as file descriptors (pidfd, Linux 5.3+): the loop learns of an
//! exit from the reactor instead of polling, and the wrapped command's status
//! is collected through its own fd, so reaping orphans never takes it.
use std::{
    future::poll_fn,
    io,
    os::fd::{AsFd, FromRawFd, OwnedFd},
    task::Poll,
};

use nix::{
    sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus},
    unistd::Pid,
};
use tokio::io::unix::AsyncFd;

use crate::{
    capture::readable::watch_readable,
    error::TracerError,
    eventlog::{ExitStatus, ProcKey},
    run::procs,
};

pub struct PidFd {
    fd: AsyncFd<OwnedFd>,
}

impl PidFd {
    /// A pidfd for `pid` (in the runtime: it is registered with the reactor).
    pub fn open(pid: u32) -> io::Result<Self> {
        // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
        let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the fd was just returned to us and is owned here only.
        let fd = unsafe { OwnedFd::from_raw_fd(raw as i32) };
        Ok(Self {
            fd: watch_readable(fd)?,
        })
    }

    /// A pidfd for `key` if it is still that very process (opened first,
    /// then checked: the fd cannot follow a recycled pid).
    pub fn of(key: ProcKey) -> Option<Self> {
        let fd = Self::open(key.pid).ok()?;
        procs::alive(key).then_some(fd)
    }

    /// The process has exited (it may still await reaping).
    pub async fn exited(&self) -> io::Result<()> {
        // A pidfd stays readable once its process exited: the readiness is
        // kept (the guard is dropped without clearing it).
        let _ready = self.fd.readable().await?;
        Ok(())
    }

    /// The status of our own child, reaped through its fd once it exited.
    pub async fn status(&self) -> Result<ExitStatus, TracerError> {
        loop {
            self.exited().await.map_err(TracerError::WaitIo)?;
            let id = Id::PIDFd(self.fd.get_ref().as_fd());
            match waitid(id, WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG) {
                Ok(WaitStatus::Exited(_, code)) => return Ok(ExitStatus::Exited { code }),
                Ok(WaitStatus::Signaled(_, sig, core_dumped)) => {
                    return Ok(ExitStatus::Signaled {
                        signal: sig as i32,
                        name: sig.as_str().into(),
                        core_dumped,
                    })
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(TracerError::Wait(e)),
            }
        }
    }
}

/// Wait until one of `fds` has exited; its index.
pub async fn any_exited(fds: &[PidFd]) -> usize {
    poll_fn(|cx| {
        for (i, p) in fds.iter().enumerate() {
            // An error (never expected for a pidfd) counts as gone.
            if p.fd.poll_read_ready(cx).is_ready() {
                return Poll::Ready(i);
            }
        }
        Poll::Pending
    })
    .await
}

/// As a child subreaper the tracer inherits orphans: collect their zombies,
/// but never `keep`'s (the command's status is collected through its pidfd).
pub fn reap_orphans_except(keep: Option<Pid>) {
    let peek = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    while let Ok(status) = waitid(Id::All, peek) {
        let Some(pid) = status.pid() else { break };
        if Some(pid) == keep {
            break;
        }
        let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
    }
}
