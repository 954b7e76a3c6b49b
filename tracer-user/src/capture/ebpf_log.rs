//! `--debug-ebpf` / `TRACER_LOG`: the eBPF programs' aya-log records,
//! forwarded to tracer's own logger (target `tracer_ebpf::…`).
//!
//! The kernel side logs only rare failures (see tracer-ebpf/src/diag.rs).
//! Off by default: the loader sets `AYA_LOG_LEVEL` to 0 and the verifier
//! drops the logging code. When on, the log ring is drained on the event
//! loop (a task woken by the ring's fd, as aya-template does), not on a
//! thread of its own: tracer forks its watchdog and the command while it
//! runs, and a process with no other thread forks safely.
use std::{
    os::fd::{AsRawFd, RawFd},
    sync::{Arc, Mutex},
};

use aya::Ebpf;
use aya_log::EbpfLogger;
use tokio::io::unix::AsyncFd;

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

/// Drains the log ring on the event loop until dropped; the last records
/// are flushed on drop. In the runtime only.
pub struct Forwarder {
    ring: Arc<AsyncFd<LogRing>>,
    task: tokio::task::JoinHandle<()>,
}

/// The logger, shared by the draining task and `drop`'s last flush (one
/// thread runs both: the lock never waits). Its fd is the ring's, fixed.
struct LogRing {
    fd: RawFd,
    logger: Mutex<EbpfLogger<&'static dyn log::Log>>,
}

impl AsRawFd for LogRing {
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl LogRing {
    fn flush(&self) {
        if let Ok(mut logger) = self.logger.lock() {
            logger.flush();
        }
    }
}

impl Forwarder {
    pub fn start(ebpf: &mut Ebpf) -> Result<Self, TracerError> {
        let logger = EbpfLogger::init(ebpf).map_err(LoadError::LogRing)?;
        let ring = LogRing {
            fd: logger.as_raw_fd(),
            logger: Mutex::new(logger),
        };
        let ring = Arc::new(super::readable::watch_readable(ring).map_err(LoadError::LogPoll)?);
        let drained = Arc::clone(&ring);
        let task = tokio::spawn(async move {
            while let Ok(mut ready) = drained.readable().await {
                ready.clear_ready();
                drained.get_ref().flush();
            }
        });
        Ok(Self { ring, task })
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.task.abort();
        self.ring.get_ref().flush();
    }
}
