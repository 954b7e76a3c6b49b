//! RLIMIT_NOFILE: tracer's own soft limit raised to the hard one at start,
//! the command's given back before it runs.
//!
//! The soft limit is 1024 on most systems (kept low for programs that still
//! use select(2)), the hard one far higher (524288 under systemd). A daemon
//! holding the ring, the log, its segments, /proc files and the metrics
//! server's connections must not be the first to run out; what it holds is
//! bounded elsewhere (the metrics server's connection cap), so a higher soft
//! limit is only headroom. The wrapped command keeps the limit it would have
//! had without tracer.
use std::sync::OnceLock;

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// The soft limit tracer started with, when it raised it.
static STARTED_WITH: OnceLock<libc::rlim_t> = OnceLock::new();

/// Raise the soft limit to the hard one. Never fails: a limit that cannot
/// be read or raised is left as it is (said at debug level only, since
/// nothing is lost: the old limit still holds).
pub fn raise() {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(lim) => lim,
        Err(e) => {
            log::debug!("RLIMIT_NOFILE: cannot read it: {e}");
            return;
        }
    };
    if soft >= hard {
        return;
    }
    if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
        log::debug!("RLIMIT_NOFILE: cannot raise {soft} to {hard}: {e}");
        return;
    }
    let _ = STARTED_WITH.set(soft);
}

/// The soft limit to give back to a command, if [`raise`] changed it. Read
/// it before fork: [`restore`] runs between fork and exec.
pub fn for_child() -> Option<libc::rlim_t> {
    STARTED_WITH.get().copied()
}

/// Set the soft limit back to `soft` (from [`for_child`]), keeping the hard
/// one. Async-signal-safe: one getrlimit and one setrlimit, no allocation
/// (libc: it runs between fork and exec, docs/architecture.md).
/// Lowering a soft limit is always allowed; should it fail all the same,
/// the command runs with tracer's higher limit rather than not at all.
pub fn restore(soft: libc::rlim_t) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on locals, allowed between fork and exec.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = soft.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
