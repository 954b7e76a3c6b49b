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

/// When to drain again after a drain at `now` that found `seen` records,
/// `by_timer` when the catch-up time (not a readiness) brought it.
/// - Records came: more may follow without a wake-up, so again `CATCH_UP`
///   from now.
/// - None came, though a wake-up brought the drain: its record may be
///   behind one another CPU has reserved and not yet committed (that one's
///   commit may not wake), or an earlier drain took it and its batching
///   period may still hide a record with no wake-up of its own. Again
///   `CATCH_UP` from now: an empty wake-up arms the timer, it never disarms
///   it (a daemon's live log once missed a burst's last exit so: CI,
///   `daemon::a_burst_reaches_the_live_log_without_a_later_event`).
/// - None came at the catch-up time: every batching period began before
///   the last drain that found records, so has ended; the timer stops and
///   an idle tracer stays asleep.
fn next_catch_up(
    seen: u64,
    by_timer: bool,
    now: tokio::time::Instant,
) -> Option<tokio::time::Instant> {
    (seen > 0 || !by_timer).then(|| now + CATCH_UP)
}

impl Session {
    /// Wait until the ring buffer has records (or may have: the readiness
    /// is cleared first, so a record committed later wakes the loop again),
    /// or until the catch-up time `drain` armed (`next_catch_up`): the
    /// kernel side commits most records without waking the reader (see
    /// `WAKE_BATCH_NS`). Call `drain` after it.
    pub async fn ready(&self) -> Result<(), TracerError> {
        let events = async {
            let mut guard = self.ring.readable().await.map_err(TracerError::PollRing)?;
            guard.clear_ready();
            Ok::<(), TracerError>(())
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
        let by_timer: bool = match self.catch_up {
            Some(at) => tokio::select! {
                r = readable => r.map(|()| false),
                () = tokio::time::sleep_until(at) => Ok(true),
            },
            None => readable.await.map(|()| false),
        }?;
        self.caught_up
            .store(by_timer, std::sync::atomic::Ordering::Relaxed);
        Ok(())
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
            // The kill calls the kernel counted for a process come
            // before its end (stamped first: sequence numbers in order).
            if let Some(key) = wire.group_exit().filter(|k| self.kill_folds.forget(k)) {
                n += self.write_kill_folds(Some(key))?;
            }
            if let Some(key) = wire.opened_fold() {
                self.kill_folds.remember(key);
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
        let by_timer = self
            .caught_up
            .swap(false, std::sync::atomic::Ordering::Relaxed);
        self.catch_up = next_catch_up(seen, by_timer, tokio::time::Instant::now());
        Ok(n)
    }

    /// The kill-family calls the kernel counted for `of` (an exited
    /// process), or for everyone (`None`, at the stop), each kind as one
    /// `kill_call` with its count.
    pub(super) fn write_kill_folds(
        &mut self,
        of: Option<crate::eventlog::ProcKey>,
    ) -> Result<u64, TracerError> {
        let mut n = 0;
        for wire in self.capture.take_kill_folds(of.map(|k| (k.pid, k.start))) {
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

#[cfg(test)]
mod tests {
    use super::{next_catch_up, CATCH_UP};
    use tokio::time::Instant;

    #[test]
    fn records_arm_the_catch_up_from_now() {
        let now = Instant::now();
        assert_eq!(next_catch_up(3, false, now), Some(now + CATCH_UP));
        assert_eq!(next_catch_up(1, true, now), Some(now + CATCH_UP));
    }

    /// The race CI hit: a catch-up drain took the record that woke the
    /// reader, the wake-up then brought an empty drain, and the batching
    /// period's later record came with no wake-up.
    #[test]
    fn an_empty_drain_a_wake_up_brought_arms_the_catch_up() {
        let now = Instant::now();
        assert_eq!(next_catch_up(0, false, now), Some(now + CATCH_UP));
    }

    #[test]
    fn an_empty_drain_at_the_catch_up_time_disarms() {
        assert_eq!(next_catch_up(0, true, Instant::now()), None);
    }
}
