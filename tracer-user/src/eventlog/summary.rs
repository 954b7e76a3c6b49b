//! What the reports need of a log besides its model: header, trailer, and
//! counts of its events, gathered as the events stream past.
use std::collections::BTreeMap;

use super::{
    reader::{EventLog, Frame},
    schema::{Header, Record, Trailer},
};

#[derive(Debug, Clone, PartialEq)]
pub struct LogSummary {
    pub header: Header,
    pub trailer: Option<Trailer>,
    /// The log ended without a trailer: capture was interrupted.
    pub truncated: bool,
    /// Event lines (no header, no trailer).
    pub events: usize,
    /// Events by `type`.
    pub by_type: BTreeMap<String, usize>,
    /// `seq` of the first event: above 1 when a daemon's oldest segments
    /// were deleted.
    pub first_seq: Option<u64>,
    /// `leak` records.
    pub leaks: usize,
    /// Files of the log's directory that were not read, and why.
    pub ignored: Vec<String>,
    /// Event lines over the reader's limit, skipped unread.
    pub lines_skipped: u64,
    /// A daemon's series that is not whole, and how (see `Frame::not_whole`).
    pub not_whole: Option<String>,
}

/// Counts events as they are read; [`Counter::finish`] adds the frame.
#[derive(Debug, Default, Clone)]
pub struct Counter {
    events: usize,
    by_type: BTreeMap<&'static str, usize>,
    first_seq: Option<u64>,
    leaks: usize,
}

impl Counter {
    pub fn count(&mut self, rec: &Record) {
        self.events += 1;
        *self.by_type.entry(type_name(rec)).or_default() += 1;
        if self.events == 1 {
            self.first_seq = rec.stamp().map(|s| s.seq);
        }
        if matches!(rec, Record::Leak(_)) {
            self.leaks += 1;
        }
    }

    /// An event read from its line, not as a record: its `type` and `seq`.
    pub fn count_line(&mut self, kind: &'static str, seq: u64) {
        self.events += 1;
        *self.by_type.entry(kind).or_default() += 1;
        if self.events == 1 {
            self.first_seq = Some(seq);
        }
    }

    pub fn finish(self, frame: Frame) -> LogSummary {
        LogSummary {
            header: frame.header,
            trailer: frame.trailer,
            truncated: frame.truncated,
            events: self.events,
            by_type: self
                .by_type
                .into_iter()
                .map(|(k, n)| (k.to_string(), n))
                .collect(),
            first_seq: self.first_seq,
            leaks: self.leaks,
            ignored: frame.ignored,
            lines_skipped: frame.lines_skipped,
            not_whole: frame.not_whole,
        }
    }
}

impl LogSummary {
    pub fn of(log: &EventLog) -> LogSummary {
        let mut c = Counter::default();
        for rec in &log.events {
            c.count(rec);
        }
        c.finish(Frame {
            header: log.header.clone(),
            trailer: log.trailer.clone(),
            truncated: log.truncated,
            ignored: log.ignored.clone(),
            lines_skipped: log.lines_skipped,
            not_whole: log.not_whole.clone(),
        })
    }
}

/// The `type` a record has in the log.
pub fn type_name(r: &Record) -> &'static str {
    match r {
        Record::Header(_) => "header",
        Record::Fork(_) => "fork",
        Record::Exec(_) => "exec",
        Record::Exit(_) => "exit",
        Record::Signal(_) => "signal",
        Record::SignalSummary(_) => "signal_summary",
        Record::KillCall(_) => "kill_call",
        Record::Oom(_) => "oom",
        Record::LastWords(_) => "last_words",
        Record::CrashStack(_) => "crash_stack",
        Record::Leak(_) => "leak",
        Record::Snapshot(_) => "snapshot",
        Record::Existing(_) => "existing",
        Record::TestMark(_) => "test_mark",
        Record::TestWindow(_) => "test_window",
        Record::Resources(_) => "resources",
        Record::Trailer(_) => "trailer",
    }
}
