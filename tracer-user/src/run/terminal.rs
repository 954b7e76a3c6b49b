//! Interactive use: the wrapped command runs in its own process group, so when
//! the tracer holds the terminal it hands the foreground to the command (as a
//! shell does) and takes it back afterwards. Irrelevant in CI (no terminal).
//!
//! Under `--user` (or sudo) the command must not share root's terminal as its
//! controlling terminal: TIOCSTI on it would type commands into root's shell.
//! Such a command gets a session of its own without a controlling terminal
//! (`detach_from_terminal`); it still reads and writes the terminal through
//! the fds it inherited, and tracer forwards Ctrl-C to it.
//!
//! The foreground calls are libc's: most run in the child between fork and
//! exec (docs/architecture.md, "System calls"), and the rest are the same
//! family.
use std::{
    os::unix::fs::OpenOptionsExt,
    sync::atomic::{AtomicBool, Ordering},
};

use nix::fcntl::OFlag;
use signal_hook::low_level::siginfo::{Cause, Origin};

static HELD_BY_CHILD: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy)]
pub struct Foreground {
    active: bool,
}

impl Foreground {
    /// Active when stdin is a terminal whose foreground group is ours.
    pub fn take_if_terminal() -> Self {
        // SAFETY: isatty, tcgetpgrp and getpgrp take or return plain
        // integers; fd 0 need not be open (they then fail).
        let active = unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() };
        HELD_BY_CHILD.store(active, Ordering::SeqCst);
        Self { active }
    }

    /// The command does not take the terminal (it is detached from it).
    pub fn none() -> Self {
        HELD_BY_CHILD.store(false, Ordering::SeqCst);
        Self { active: false }
    }

    /// In the child, between fork and exec: async-signal-safe calls only.
    pub fn give_to_self(&self) {
        if self.active {
            // SAFETY: async-signal-safe calls on plain integers (see
            // with_sigttou_blocked), as the child between fork and exec needs.
            unsafe { with_sigttou_blocked(|| libc::tcsetpgrp(0, libc::getpid())) };
        }
    }

    pub fn held_by_child() -> bool {
        HELD_BY_CHILD.load(Ordering::SeqCst)
    }

    pub fn restore() {
        if HELD_BY_CHILD.swap(false, Ordering::SeqCst) {
            // SAFETY: as in give_to_self: calls on plain integers.
            unsafe { with_sigttou_blocked(|| libc::tcsetpgrp(0, libc::getpgrp())) };
        }
    }
}

/// A background group calling tcsetpgrp gets SIGTTOU unless it is blocked.
///
/// # Safety
/// Async-signal-safe calls only (it runs between fork and exec): `f` must
/// be one too.
unsafe fn with_sigttou_blocked(f: impl FnOnce() -> libc::c_int) {
    // SAFETY: sigset_t is plain data (all-zero is a valid value that
    // sigemptyset then sets); every pointer is to a local that outlives
    // the call.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
        f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

/// Whether tracer has a controlling terminal, which a child would inherit
/// (whatever its stdin, stdout and stderr are).
pub fn has_controlling_terminal() -> bool {
    // O_NOCTTY: asking must not give tracer one. std adds O_CLOEXEC.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(OFlag::O_NOCTTY.bits())
        .open("/dev/tty")
        .is_ok()
}

/// In the child, between fork and exec (async-signal-safe): a new session
/// and process group, with no controlling terminal. TIOCSTI needs the
/// terminal to be the caller's controlling one (or CAP_SYS_ADMIN), and an
/// unprivileged process cannot make root's terminal its own (TIOCSCTTY
/// refuses a terminal another session controls), so no keystroke can be
/// pushed into root's input.
pub fn detach_from_terminal() -> std::io::Result<()> {
    // SAFETY: setsid takes nothing and is async-signal-safe.
    if unsafe { libc::setsid() } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sent by the kernel on a terminal's behalf (Ctrl-C, hang-up), not by a process.
pub fn is_from_terminal(origin: &Origin) -> bool {
    matches!(origin.cause, Cause::Kernel)
}
