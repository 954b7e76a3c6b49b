//! Signals for the event loop, with their origin (who sent them: the
//! Ctrl-C de-duplication needs to tell a terminal's SIGINT from a
//! process's). signal-hook's handlers write to a self-pipe; the loop waits
//! on its read end through the reactor and reads what arrived.
use std::{io, os::unix::net::UnixStream};

use signal_hook::{
    iterator::{backend::SignalDelivery, exfiltrator::WithOrigin},
    low_level::siginfo::Origin,
};
use tokio::io::unix::AsyncFd;

use crate::{capture::readable::watch_readable, error::TracerError};

pub struct Signals {
    delivery: SignalDelivery<UnixStream, WithOrigin>,
    /// A second fd of the pipe's read end, registered with the reactor on
    /// first use (the handlers are installed before any runtime exists).
    watch: Option<UnixStream>,
    ready: Option<AsyncFd<UnixStream>>,
}

impl Signals {
    /// Install the handlers now: from here on no signal is lost.
    pub fn new(signals: &[i32]) -> Result<Self, TracerError> {
        let (read, write) = UnixStream::pair().map_err(TracerError::Signals)?;
        for end in [&read, &write] {
            end.set_nonblocking(true).map_err(TracerError::Signals)?;
        }
        let watch = read.try_clone().map_err(TracerError::Signals)?;
        let delivery = SignalDelivery::with_pipe(read, write, WithOrigin::default(), signals)
            .map_err(TracerError::Signals)?;
        Ok(Self {
            delivery,
            watch: Some(watch),
            ready: None,
        })
    }

    /// Wait for signals; every one that arrived since the last call (one
    /// per signal number, as signal-hook folds repeats).
    pub async fn recv(&mut self) -> io::Result<Vec<Origin>> {
        loop {
            if let Some(watch) = self.watch.take() {
                self.ready = Some(watch_readable(watch)?);
            }
            let got: Vec<Origin> = self.delivery.pending().collect();
            if !got.is_empty() {
                return Ok(got);
            }
            let fd = self.ready.as_ref().expect("registered above");
            // Cleared before the next read: a byte written after it is a
            // new edge, so nothing is missed.
            fd.readable().await?.clear_ready();
        }
    }
}
