//! `--debug-ebpf` / `TRACER_LOG`: the eBPF programs' aya-log records,
//! forwarded to tracer's own logger (target `tracer_ebpf::…`).
//!
//! The kernel side logs only rare failures (see tracer-ebpf/src/diag.rs).
//! Off by default: the loader sets `AYA_LOG_LEVEL` to 0 and the verifier
//! drops the logging code. When on, a small thread drains the log ring: it
//! sleeps in poll(2) on the ring and a stop pipe, so it costs nothing idle.
use std::{
    os::fd::{AsFd, OwnedFd},
    thread::JoinHandle,
};

use aya::Ebpf;
use aya_log::EbpfLogger;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::error::{LoadError, TracerError};

/// The aya-log ring's size when logging is off: one page, the smallest a
/// ring buffer may be (the map exists in the object either way).
pub fn off_ring_bytes() -> u32 {
    procfs::page_size() as u32
}

/// Should the eBPF side log? `--debug-ebpf`, or a `TRACER_LOG` filter that
/// lets `tracer_ebpf` through at debug level (e.g. `TRACER_LOG=debug`).
pub fn wanted(debug_ebpf: bool) -> bool {
    debug_ebpf || log::log_enabled!(target: "tracer_ebpf", log::Level::Debug)
}

/// The value of the object's `AYA_LOG_LEVEL` global: 0 is off, 5 lets
/// every level through (aya_log_common::Level::Trace).
pub fn level(on: bool) -> u8 {
    if on {
        5
    } else {
        0
    }
}

/// Drains the log ring on its own thread until dropped; the last records
/// are flushed on drop.
pub struct Forwarder {
    stop: Option<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl Forwarder {
    pub fn start(ebpf: &mut Ebpf) -> Result<Self, TracerError> {
        let mut logger = EbpfLogger::init(ebpf).map_err(LoadError::LogRing)?;
        let (stop_rx, stop_tx) = nix::unistd::pipe().map_err(LoadError::LogPipe)?;
        let thread = std::thread::Builder::new()
            .name("ebpf-log".into())
            .spawn(move || loop {
                let mut fds = [
                    PollFd::new(logger.as_fd(), PollFlags::POLLIN),
                    PollFd::new(stop_rx.as_fd(), PollFlags::POLLIN),
                ];
                let polled = poll(&mut fds, PollTimeout::NONE);
                let stopping = fds[1].any().unwrap_or(true);
                logger.flush();
                if stopping || matches!(polled, Err(e) if e != nix::errno::Errno::EINTR) {
                    return;
                }
            })
            .map_err(LoadError::LogThread)?;
        Ok(Self {
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        // Closing the write end wakes the thread (POLLHUP); it flushes and ends.
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
