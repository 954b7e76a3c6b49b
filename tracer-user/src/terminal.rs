//! Interactive use: the wrapped command runs in its own process group, so when
//! the tracer holds the terminal it hands the foreground to the command (as a
//! shell does) and takes it back afterwards. Irrelevant in CI (no terminal).
use std::sync::atomic::{AtomicBool, Ordering};

static HELD_BY_CHILD: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy)]
pub struct Foreground {
    active: bool,
}

impl Foreground {
    /// Active when stdin is a terminal whose foreground group is ours.
    pub fn take_if_terminal() -> Self {
        let active = unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() };
        HELD_BY_CHILD.store(active, Ordering::SeqCst);
        Self { active }
    }

    /// In the child, between fork and exec: async-signal-safe calls only.
    pub fn give_to_self(&self) {
        if self.active {
            unsafe { with_sigttou_blocked(|| libc::tcsetpgrp(0, libc::getpid())) };
        }
    }

    pub fn held_by_child() -> bool {
        HELD_BY_CHILD.load(Ordering::SeqCst)
    }

    pub fn restore() {
        if HELD_BY_CHILD.swap(false, Ordering::SeqCst) {
            unsafe { with_sigttou_blocked(|| libc::tcsetpgrp(0, libc::getpgrp())) };
        }
    }
}

/// A background group calling tcsetpgrp gets SIGTTOU unless it is blocked.
unsafe fn with_sigttou_blocked(f: impl FnOnce() -> libc::c_int) {
    let mut set: libc::sigset_t = std::mem::zeroed();
    let mut old: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigaddset(&mut set, libc::SIGTTOU);
    libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old);
    f();
    libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
}
