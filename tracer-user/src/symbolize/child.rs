//! The parse child at work, off tracer's drain: spawned with its request
//! (`Running::spawn`), its answer read whenever its stdout is readable
//! (`pump`, never blocking), ended by EOF and its exit, by its answer's
//! cap, or by its wall-clock deadline (then killed through its pidfd: the
//! pid may be an adopted orphan's once tracer's reaper collected it).
//! Only at the stop does tracer wait for it (`wait`), bounded by the same
//! deadline.
use std::{
    fs::File,
    io::Read,
    os::{
        fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd},
        unix::process::{CommandExt, ExitStatusExt},
    },
    process::{ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use super::identity::Identity;

/// The hidden subcommand the child runs (`cli.rs`).
pub const SUBCOMMAND: &str = "__parse-crash-stacks";
/// Wall-clock time a child has for its crashes before it is killed.
pub const WALL_LIMIT: Duration = Duration::from_secs(10);
/// CPU seconds a child may use (SIGXCPU, then SIGKILL a second later).
pub const CPU_LIMIT_S: u64 = 10;

/// A parse child that has been spawned and not yet ended.
pub struct Running {
    stdout: ChildStdout,
    pidfd: OwnedFd,
    out: Vec<u8>,
    cap: usize,
    deadline: Instant,
    started: Instant,
    /// Why reading stopped short (cap, deadline, a read error).
    stopped: Option<String>,
    eof: bool,
    /// Its status once reaped (`None`: not yet, or reaped elsewhere).
    status: Option<std::process::ExitStatus>,
    exited: bool,
    killed: bool,
    pub(super) as_limit: u64,
}

impl Running {
    /// Spawn `tracer __parse-crash-stacks` as `who`, `input` its stdin,
    /// `fds` the memfds it inherits, `cap` bytes of answer at most.
    pub(super) fn spawn(
        input: File,
        fds: &[i32],
        who: Identity,
        as_limit: u64,
        cap: usize,
    ) -> Result<Running, String> {
        let fd_list = fds.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0("tracer").arg(SUBCOMMAND).args([
            "--uid",
            &who.uid.to_string(),
            "--gid",
            &who.gid.to_string(),
            "--fs-uid",
            &who.fs_uid.to_string(),
            "--fs-gid",
            &who.fs_gid.to_string(),
        ]);
        if !fds.is_empty() {
            cmd.args(["--fds", &fd_list]);
        }
        cmd.env_clear()
            .stdin(Stdio::from(input))
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let inherit = fds.to_vec();
        // SAFETY: only async-signal-safe calls (fcntl, setrlimit, prctl)
        // between fork and exec, on memory allocated before the fork.
        unsafe {
            cmd.pre_exec(move || confine_before_exec(&inherit, as_limit));
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("the parse child did not start: {e}"))?;
        // Opened before tracer's loop runs again: nothing can have reaped it.
        let pidfd = pidfd_open(child.id());
        let stdout = child.stdout.take();
        let (pidfd, stdout) = match (pidfd, stdout) {
            (Ok(p), Some(s)) => (p, s),
            (p, _) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(match p {
                    Err(e) => format!("the parse child's pidfd: {e}"),
                    Ok(_) => "the parse child has no stdout".into(),
                });
            }
        };
        set_nonblocking(stdout.as_raw_fd()).map_err(|e| format!("the parse child's pipe: {e}"))?;
        let now = Instant::now();
        Ok(Running {
            stdout,
            pidfd,
            out: Vec::new(),
            cap,
            deadline: now + WALL_LIMIT,
            started: now,
            stopped: None,
            eof: false,
            status: None,
            exited: false,
            killed: false,
            as_limit,
        })
    }

    /// Its stdout, readable when it answered (or closed it).
    pub fn stdout_fd(&self) -> RawFd {
        self.stdout.as_raw_fd()
    }

    /// Its pidfd, readable once it exited.
    pub fn pidfd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }

    /// When it is killed if not done; `None` once it was (only its exit
    /// is awaited then).
    pub fn deadline(&self) -> Option<Instant> {
        (!self.killed).then_some(self.deadline)
    }

    /// Read what it wrote and see whether it exited, without blocking; past
    /// the deadline (or its answer's cap), kill it. True when it is done:
    /// it exited (answered, failed, or killed) and what it wrote is read.
    pub fn pump(&mut self) -> bool {
        if !self.killed && self.stopped.is_none() && !self.eof {
            self.read_available();
        }
        self.reap();
        if self.exited {
            // Its last words are in the pipe: the writer is gone, so this
            // read ends at EOF.
            if !self.killed && self.stopped.is_none() && !self.eof {
                self.read_available();
            }
            return true;
        }
        if !self.killed && Instant::now() >= self.deadline && self.stopped.is_none() {
            self.stopped = Some(format!(
                "the parse child took longer than {} s (killed)",
                WALL_LIMIT.as_secs()
            ));
        }
        if !self.killed && self.stopped.is_some() {
            self.kill();
        }
        false
    }

    /// Block until [`Running::pump`] says done (the stop): bounded by the
    /// deadline, and a second after it for a killed child to exit.
    pub fn wait(&mut self) {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        while !self.pump() {
            if self.killed && Instant::now() >= self.deadline + Duration::from_secs(1) {
                return;
            }
            let left = match self.killed {
                true => Duration::from_secs(1),
                false => self.deadline.saturating_duration_since(Instant::now()),
            };
            let ms = u16::try_from(left.as_millis().clamp(1, 1000)).unwrap_or(1000);
            let mut fds = vec![PollFd::new(self.pidfd.as_fd(), PollFlags::POLLIN)];
            if !self.eof && !self.killed {
                fds.push(PollFd::new(self.stdout.as_fd(), PollFlags::POLLIN));
            }
            let _ = poll(&mut fds, PollTimeout::from(ms));
        }
    }

    fn read_available(&mut self) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match self.stdout.read(&mut buf) {
                Ok(0) => {
                    self.eof = true;
                    return;
                }
                Ok(k) => {
                    if self.out.len() + k > self.cap {
                        self.stopped = Some(format!(
                            "the parse child wrote more than {} KiB (killed)",
                            self.cap >> 10
                        ));
                        return;
                    }
                    self.out.extend_from_slice(&buf[..k]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    self.stopped = Some(format!("reading the parse child: {e}"));
                    return;
                }
            }
        }
    }

    /// Collect its status through its pidfd if it exited (ECHILD: tracer's
    /// orphan reaper took it first; it exited all the same).
    fn reap(&mut self) {
        use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
        if self.exited {
            return;
        }
        let id = Id::PIDFd(self.pidfd.as_fd());
        match waitid(id, WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Exited(_, code)) => {
                self.status = Some(std::process::ExitStatus::from_raw((code & 0xff) << 8));
                self.exited = true;
            }
            Ok(WaitStatus::Signaled(_, sig, _)) => {
                self.status = Some(std::process::ExitStatus::from_raw(sig as i32));
                self.exited = true;
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => self.exited = true,
        }
    }

    /// SIGKILL through the pidfd (never a bare pid); its exit is reaped
    /// by a later `pump`, when the pidfd says so.
    fn kill(&mut self) {
        // SAFETY: pidfd_send_signal on a pidfd this struct owns.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
        }
        self.killed = true;
    }

    /// Its answer lines, its exit status, why it stopped short, and how
    /// long it took.
    pub(super) fn end(
        self,
    ) -> (
        Vec<u8>,
        Option<std::process::ExitStatus>,
        Option<String>,
        Duration,
    ) {
        (self.out, self.status, self.stopped, self.started.elapsed())
    }
}

fn pidfd_open(pid: u32) -> std::io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fd was just returned to us and is owned here only.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as i32) })
}

fn set_nonblocking(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on an fd the caller holds open.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Between fork and exec (async-signal-safe calls only): the memfds
/// survive the exec, the limits and no_new_privs are set. A failure ends
/// the spawn.
fn confine_before_exec(fds: &[i32], as_limit: u64) -> std::io::Result<()> {
    let fail = || Err(std::io::Error::last_os_error());
    for &fd in fds {
        // SAFETY: fcntl on an fd tracer holds open (the memfds it made).
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } < 0 {
            return fail();
        }
    }
    let limits = [
        (libc::RLIMIT_AS, as_limit, as_limit),
        (libc::RLIMIT_CPU, CPU_LIMIT_S, CPU_LIMIT_S + 1),
        (libc::RLIMIT_CORE, 0, 0),
        (libc::RLIMIT_FSIZE, 0, 0),
    ];
    for (resource, soft, hard) in limits {
        let l = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: a valid rlimit struct on the stack.
        if unsafe { libc::setrlimit(resource, &l) } < 0 {
            return fail();
        }
    }
    // SAFETY: a plain prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } < 0 {
        return fail();
    }
    Ok(())
}
