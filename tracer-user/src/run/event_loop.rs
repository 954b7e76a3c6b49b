//! The runtime the event loop runs on: one thread, with the reactor (ring
//! buffer, signal pipe, pidfds) and timers only. One thread because the
//! tracer must not compete with the workload for CPUs, and because the
//! tracer forks (the watchdog, the command) while it runs: a process with
//! no other thread forks safely.
use std::future::Future;

use crate::error::TracerError;

pub fn block_on<F: Future>(f: F) -> Result<F::Output, TracerError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(TracerError::Runtime)?;
    Ok(runtime.block_on(f))
}
