//! The ring pump: records out of the kernel's ring buffer, decoded,
//! enriched (the `enrich` stage: what only the living process or cgroup
//! still shows) and written.
use super::Session;
use crate::{
    capture::decode,
    error::TracerError,
    eventlog::{Record, Task},
};

/// Twice the kernel side's wake-up batching period: a record committed
/// without a wake-up after the last forced one is found by then.
const CATCH_UP: std::time::Duration =
    std::time::Duration::from_nanos(2 * tracer_common::WAKE_BATCH_NS);

impl Session {
    /// Wait until the ring buffer has records (or may have: the readiness
    /// is cleared first, so a record committed later wakes the loop again),
    /// or until the catch-up time after a drain that found records: the
    /// kernel side commits most records without waking the reader (see
    /// `WAKE_BATCH_NS`). Call `drain` after it.
    pub async fn ready(&self) -> Result<(), TracerError> {
        let events = async {
            let mut guard = self.ring.readable().await.map_err(TracerError::PollRing)?;
            guard.clear_ready();
            Ok(())
        };
        let crashes = async {
            let mut guard = self
                .crashes
                .readable()
                .await
                .map_err(TracerError::PollRing)?;
            guard.clear_ready();
            Ok(())
        };
        let readable = async {
            tokio::select! {
                r = events => r,
                r = crashes => r,
                // The parse child answered, exited or is due: `drain`
                // writes its stacks.
                () = self.symbolizing_ready() => Ok(()),
            }
        };
        match self.catch_up {
            Some(at) => tokio::select! {
                r = readable => r,
                () = tokio::time::sleep_until(at) => Ok(()),
            },
            None => readable.await,
        }
    }

    /// Write every event already in the ring buffer.
    pub fn drain(&mut self) -> Result<u64, TracerError> {
        // Crashes first: their processes may still be there to be read.
        self.read_crashes();
        let mut n = 0;
        let mut seen = 0u64;
        loop {
            // Copy the record out so the ring's borrow ends here.
            let decoded = match self.ring.get_mut().next() {
                Some(item) => decode::decode(&item),
                None => break,
            };
            seen += 1;
            let mut wire = match decoded {
                Ok(w) => w,
                Err(e) => {
                    log::warn!("undecodable record: {e}");
                    self.undecodable += 1;
                    continue;
                }
            };
            if let decode::Wire::Stderr {
                task,
                count,
                data,
                to_null,
                ..
            } = &wire
            {
                let key = crate::eventlog::ProcKey {
                    pid: task.tgid,
                    start: task.start_ns,
                };
                log::debug!("stderr: {} bytes of {count} from {}", data.len(), task.tgid);
                self.last_words.push(key, data, *count, *to_null);
                continue;
            }
            if let decode::Wire::Existing(e) = &wire {
                self.existing.push(*e);
                continue;
            }
            if self.enricher.keep(&mut wire) {
                continue;
            }
            // The failed calls the kernel counted for a process come
            // before its end (stamped first: sequence numbers in order).
            if let Some(key) = wire.group_exit().filter(|k| self.kill_fails.forget(k)) {
                n += self.write_kill_fails(Some(key))?;
            }
            let t = wire.ktime();
            let at = self.writer.stamp(t);
            let Some(mut rec) = wire.into_record(at) else {
                continue;
            };
            if let Record::Exec(e) = &rec {
                self.remember_exe(e.task.key(), &e.filename);
            }
            self.enricher.enrich(&mut rec);
            if let Record::KillCall(k) = &rec {
                if k.ret < 0 && k.deliveries == 0 {
                    self.kill_fails.remember(k.sender.key());
                }
            }
            self.write(&rec)?;
            n += 1;
            // A process's last words follow its death in the log.
            if let Record::Exit(x) = &rec {
                if x.group_dead {
                    self.write_last_words(&x.task, t)?;
                }
            }
        }
        n += self.symbolize()?;
        self.writer.flush();
        // Records came: more may follow without a wake-up. An idle ring
        // arms no timer, so an idle tracer stays asleep.
        self.catch_up = (seen > 0).then(|| tokio::time::Instant::now() + CATCH_UP);
        Ok(n)
    }

    /// The failed kill-family calls the kernel counted for `of` (an exited
    /// process), or for everyone (`None`, at the stop), each kind as one
    /// `kill_call` with its count.
    pub(super) fn write_kill_fails(
        &mut self,
        of: Option<crate::eventlog::ProcKey>,
    ) -> Result<u64, TracerError> {
        let mut n = 0;
        for wire in self.capture.take_kill_fails(of.map(|k| (k.pid, k.start))) {
            let at = self.writer.stamp(wire.ktime());
            if let Some(rec) = wire.into_record(at) {
                self.write(&rec)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Exec filenames of the latest processes, at most `MAX_EXES`.
    fn remember_exe(&mut self, key: crate::eventlog::ProcKey, filename: &str) {
        const MAX_EXES: usize = 1024;
        if self.exes.len() >= MAX_EXES {
            self.exes.pop_front();
        }
        self.exes.push_back((key, filename.to_string()));
    }

    pub(super) fn write_last_words(&mut self, task: &Task, t: u64) -> Result<(), TracerError> {
        // Stamp only what is written: sequence numbers have no gaps.
        if !self.last_words.has(&task.key()) {
            return Ok(());
        }
        let at = self.writer.stamp(t);
        let redactor = &self.redactor;
        match self
            .last_words
            .take_redacted(task, at, |text| redactor.text(text).into_owned())
        {
            Some(lw) => self.write(&Record::LastWords(lw)),
            None => Ok(()),
        }
    }
}
