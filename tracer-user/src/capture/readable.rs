//! Registering an object that owns its fd with the event loop's reactor,
//! for readability: the ring buffers and the eBPF log ring here, and the
//! runtime's signal pipe and pidfds (`run/`), which reach it from above.
use std::{io, os::fd::AsRawFd};

use tokio::io::{unix::AsyncFd, Interest};

/// Register an object that owns its fd (a ring buffer map, a pidfd, a
/// socket) with the reactor, for readability. In the runtime only.
pub fn watch_readable<T: AsRawFd>(inner: T) -> io::Result<AsyncFd<T>> {
    // SAFETY: `inner` owns its fd, so it stays open and the same for as
    // long as the AsyncFd holds `inner`.
    unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE) }.map_err(io::Error::from)
}
