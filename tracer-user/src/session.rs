//! A capture session: ring buffer -> decoded records -> event log, with loss
//! accounting. Shared by every mode that captures.
use std::{os::fd::AsFd, path::PathBuf, time::Duration};

use aya::maps::{MapData, RingBuf};
use nix::{
    poll::{poll, PollFd, PollFlags, PollTimeout},
    time::{clock_gettime, ClockId},
};
use signal_hook::low_level::siginfo::{Cause, Origin};

use crate::{
    capture::{cgroups, decode, Capture},
    error::TracerError,
    eventlog::{wall_time, ExitStatus, LogWriter, Loss, Record, Trailer},
};

pub struct Session {
    capture: Capture,
    ring: RingBuf<MapData>,
    writer: LogWriter,
    log_path: PathBuf,
    undecodable: u64,
}

impl Session {
    pub fn new(
        mut capture: Capture,
        writer: LogWriter,
        log_path: PathBuf,
    ) -> Result<Self, TracerError> {
        let ring = capture.ring()?;
        Ok(Self {
            capture,
            ring,
            writer,
            log_path,
            undecodable: 0,
        })
    }

    /// Wait up to `timeout` for events, then write all that are ready.
    pub fn pump(&mut self, timeout: Duration) -> Result<u64, TracerError> {
        let ms = PollTimeout::try_from(timeout.as_millis().min(60_000) as u16)
            .unwrap_or(PollTimeout::NONE);
        let mut fds = [PollFd::new(self.ring.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, ms) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(TracerError::Other(format!("polling the ring buffer: {e}"))),
        }
        self.drain()
    }

    /// Write every event already in the ring buffer.
    pub fn drain(&mut self) -> Result<u64, TracerError> {
        let mut n = 0;
        while let Some(item) = self.ring.next() {
            let wire = match decode::decode(&item) {
                Ok(w) => w,
                Err(e) => {
                    log::warn!("undecodable record: {e}");
                    self.undecodable += 1;
                    continue;
                }
            };
            drop(item);
            let at = self.writer.stamp(wire.ktime());
            let mut rec = wire.into_record(at);
            if let Record::Oom(oom) = &mut rec {
                if let Some(m) = oom.memcg.as_mut() {
                    if let Some(info) = cgroups::resolve(m.id) {
                        m.path = Some(info.path);
                        m.limit_bytes = info.limit_bytes;
                    }
                }
            }
            if let Err(source) = self.writer.write(&rec) {
                return Err(TracerError::Output {
                    path: self.log_path.clone(),
                    source,
                });
            }
            n += 1;
        }
        self.writer
            .flush()
            .map_err(|source| self.output_error(source))?;
        Ok(n)
    }

    /// Drain what is left, read the loss counters, and close the log.
    pub fn finish(mut self, command_status: Option<ExitStatus>) -> Result<(), TracerError> {
        self.drain()?;
        let per_cpu = self.capture.drops()?;
        let sum = |i: usize| per_cpu.iter().map(|c| c[i]).sum::<u64>();
        let lost = Loss {
            ringbuf_full: sum(0),
            tracked_map_full: sum(1),
            inflight_map_full: sum(2),
            undecodable: self.undecodable,
            per_cpu,
        };
        let trailer = Trailer {
            ended_at: wall_time(boot_ns(), boot_to_wall_ns()),
            events: self.writer.events_written(),
            lost,
            command_status,
        };
        let path = self.log_path.clone();
        self.writer
            .finish(trailer)
            .map_err(|source| TracerError::Output { path, source })
    }

    fn output_error(&self, source: std::io::Error) -> TracerError {
        TracerError::Output {
            path: self.log_path.clone(),
            source,
        }
    }
}

/// CLOCK_BOOTTIME now, in ns: the clock of every kernel timestamp.
pub fn boot_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// wall-clock ns = boot ns + this offset.
pub fn boot_to_wall_ns() -> i64 {
    let real = clock_gettime(ClockId::CLOCK_REALTIME)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0);
    real - boot_ns() as i64
}

/// Sent by the kernel on a terminal's behalf (Ctrl-C, hang-up), not by a process.
pub fn is_from_terminal(origin: &Origin) -> bool {
    matches!(origin.cause, Cause::Kernel)
}
