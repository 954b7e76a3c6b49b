//! The runtime the event loop runs on: one thread, with the reactor (ring
//! buffer, signal pipe, pidfds) and timers only. One thread because the
//! tracer must not compete with the workload for CPUs, and because the
//! tracer forks (the watchdog, the command) while it runs: a process with
//! no other thread forks safely.
use std::{future::Future, io, os::fd::AsRawFd};

use tokio::io::{unix::AsyncFd, Interest};

use crate::error::TracerError;

pub fn block_on<F: Future>(f: F) -> Result<F::Output, TracerError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(TracerError::Runtime)?;
    Ok(runtime.block_on(f))
}

/// Register an object that owns its fd (a ring buffer map, a pidfd, a
/// socket) with the reactor, for readability. In the runtime only.
pub fn watch_readable<T: AsRawFd>(inner: T) -> io::Result<AsyncFd<T>> {
    // SAFETY: `inner` owns its fd, so it stays open and the same for as
    // long as the AsyncFd holds `inner`.
    unsafe { AsyncFd::register_with_interest(inner, Interest::READABLE) }.map_err(io::Error::from)
}
