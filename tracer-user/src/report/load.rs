//! A log streamed into what the reports need: its model and its summary,
//! each record read, folded in and let go. A million-event log is never in
//! memory as records.
use std::path::Path;

use crate::{
    eventlog::{self, Counter, Header, LogError, LogSummary, Record, Sink, Trailer},
    model::{
        lines::{KillLine, SignalLine},
        Builder, Model,
    },
    redact::Redactor,
};

/// A log as the reports read it.
pub struct Loaded {
    pub log: LogSummary,
    pub model: Model,
}

impl Loaded {
    /// A log already read whole (fixtures, tests): the same summary and
    /// model as streaming it.
    pub fn of(log: &eventlog::EventLog) -> Self {
        Loaded {
            log: LogSummary::of(log),
            model: Model::build(log),
        }
    }
}

/// Read a log file or a daemon's series (a directory), masking with
/// `redactor` as it goes (`tracer report --redact`).
pub fn load(path: &Path, redactor: &Redactor) -> Result<Loaded, LogError> {
    let mut folded = Folded::new(redactor);
    let frame = eventlog::stream_series(path, &mut folded)?;
    Ok(folded.finish(frame))
}

/// As [`load`], from the log as tracer holds it (`record`'s own reports):
/// the segments of `series` (tracer's own; none for `record`), then the live
/// file through tracer's descriptor — never reopened by a name the command
/// could have swapped, never a directory listing.
/// `trailer`: the run's trailer where the disk refused it (the log is then
/// complete up to what its loss counters say).
pub fn load_held(
    series: &eventlog::Series,
    dir: &crate::outdir::OutDir,
    live: impl std::io::Read,
    trailer: Option<Trailer>,
) -> Result<Loaded, LogError> {
    let redactor = Redactor::default();
    let mut folded = Folded::new(&redactor);
    let mut frame = series.stream(dir, Some(live), &mut folded)?;
    if let Some(t) = trailer {
        frame.trailer = Some(t);
        frame.truncated = false;
    }
    Ok(folded.finish(frame))
}

/// The segments of `series` alone (a restarted daemon's earlier runs: its
/// ledger starts from their analysis).
pub fn load_segments(
    series: &eventlog::Series,
    dir: &crate::outdir::OutDir,
) -> Result<Loaded, LogError> {
    let redactor = Redactor::default();
    let mut folded = Folded::new(&redactor);
    let frame = series.stream(dir, None::<std::io::Empty>, &mut folded)?;
    Ok(folded.finish(frame))
}

struct Folded<'r> {
    redactor: &'r Redactor,
    counter: Counter,
    builder: Option<Builder>,
}

impl Sink for Folded<'_> {
    /// Signal and kill-call lines (a signal storm's million) are read in
    /// place, nothing allocated; not when masking, which needs the record.
    fn line(&mut self, header: &Header, line: &[u8]) -> bool {
        if self.redactor.is_active() {
            return false;
        }
        match eventlog::peek_tag(line) {
            Some(b"signal") => match eventlog::from_line::<SignalLine>(line) {
                Ok(s) => {
                    self.counter.count_line("signal", s.seq);
                    self.builder(header).push_signal(&s);
                    true
                }
                Err(_) => false,
            },
            Some(b"kill_call") => match eventlog::from_line::<KillLine>(line) {
                Ok(k) => {
                    self.counter.count_line("kill_call", k.seq);
                    self.builder(header).push_kill_call(&k);
                    true
                }
                Err(_) => false,
            },
            _ => false,
        }
    }

    fn record(&mut self, header: &Header, mut rec: Record) {
        self.redactor.record(&mut rec);
        self.counter.count(&rec);
        self.builder(header).push(&rec);
    }
}

impl<'r> Folded<'r> {
    fn new(redactor: &'r Redactor) -> Self {
        Folded {
            redactor,
            counter: Counter::default(),
            builder: None,
        }
    }

    fn builder(&mut self, header: &Header) -> &mut Builder {
        if self.builder.is_none() {
            self.builder = Some(Builder::new(&self.masked(header)));
        }
        self.builder.as_mut().expect("just made")
    }

    fn masked(&self, header: &Header) -> Header {
        let mut rec = Record::Header(Box::new(header.clone()));
        self.redactor.record(&mut rec);
        match rec {
            Record::Header(h) => *h,
            _ => unreachable!("a header stays a header"),
        }
    }

    fn finish(self, mut frame: eventlog::Frame) -> Loaded {
        frame.header = self.masked(&frame.header);
        let builder = self.builder.unwrap_or_else(|| Builder::new(&frame.header));
        let model = builder.finish(frame.trailer.as_ref(), frame.truncated);
        Loaded {
            log: self.counter.finish(frame),
            model,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast lane (signal and kill-call lines read in place) and the
    /// record path fold every fixture into the same summary and model.
    #[test]
    fn lines_fold_like_records() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
        let mut seen_signals = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "ndjson") {
                continue;
            }
            let Ok(log) = eventlog::read_log(&path) else {
                continue; // the bad-log fixtures
            };
            // Every signal and kill-call line takes the fast lane.
            for line in std::fs::read(&path).unwrap().split(|&b| b == b'\n') {
                match eventlog::peek_tag(line) {
                    Some(b"signal") => {
                        serde_json::from_slice::<SignalLine>(line).unwrap();
                    }
                    Some(b"kill_call") => {
                        serde_json::from_slice::<KillLine>(line).unwrap();
                    }
                    _ => {}
                }
            }
            let fast = load(&path, &Redactor::default()).unwrap();
            let slow = Model::build(&log);
            assert_eq!(fast.log, LogSummary::of(&log), "{}", path.display());
            let m = &fast.model;
            let same = |a: &Model, b: &Model| {
                format!("{:?}{:?}{:?}{:?}", a.signals, a.kill_calls, a.procs, a.ooms)
                    == format!("{:?}{:?}{:?}{:?}", b.signals, b.kill_calls, b.procs, b.ooms)
                    && (a.first_t, a.last_t, a.root) == (b.first_t, b.last_t, b.root)
                    && a.signals
                        .iter()
                        .all(|s| a.time_at(&s.ev.at) == b.time_at(&s.ev.at))
            };
            assert!(same(m, &slow), "{}", path.display());
            seen_signals += m.signals.len() + m.kill_calls.len();
        }
        assert!(
            seen_signals > 100,
            "the fixtures hold signals: {seen_signals}"
        );
    }
}
