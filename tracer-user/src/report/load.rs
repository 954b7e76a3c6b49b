//! A log streamed into what the reports need: its model and its summary,
//! each record read, folded in and let go. A million-event log is never in
//! memory as records.
use std::path::Path;

use crate::{
    eventlog::{self, Counter, Header, LogError, LogSummary, Record, Trailer},
    model::{Builder, Model},
    redact::Redactor,
};

/// A log as the reports read it.
pub struct Loaded {
    pub log: LogSummary,
    pub model: Model,
}

/// Read a log file or a daemon's series (a directory), masking with
/// `redactor` as it goes (`tracer report --redact`).
pub fn load(path: &Path, redactor: &Redactor) -> Result<Loaded, LogError> {
    let mut folded = Folded::new(redactor);
    let frame = eventlog::stream_series(path, |h, rec| folded.push(h, rec))?;
    Ok(folded.finish(frame))
}

/// As [`load`], from the live log as tracer holds it (`record`'s own
/// reports: never reopened by a name the command could have swapped).
/// `trailer`: the run's trailer where the disk refused it (the log is then
/// complete up to what its loss counters say).
pub fn load_held(
    dir: &crate::outdir::OutDir,
    live: impl std::io::Read,
    trailer: Option<Trailer>,
) -> Result<Loaded, LogError> {
    let redactor = Redactor::default();
    let mut folded = Folded::new(&redactor);
    let mut frame = eventlog::stream_series_in(dir, Some(live), |h, rec| folded.push(h, rec))?;
    if let Some(t) = trailer {
        frame.trailer = Some(t);
        frame.truncated = false;
    }
    Ok(folded.finish(frame))
}

struct Folded<'r> {
    redactor: &'r Redactor,
    counter: Counter,
    builder: Option<Builder>,
}

impl<'r> Folded<'r> {
    fn new(redactor: &'r Redactor) -> Self {
        Folded {
            redactor,
            counter: Counter::default(),
            builder: None,
        }
    }

    fn push(&mut self, header: &Header, mut rec: Record) {
        self.redactor.record(&mut rec);
        self.counter.count(&rec);
        if self.builder.is_none() {
            self.builder = Some(Builder::new(&self.masked(header)));
        }
        self.builder.as_mut().expect("just made").push(&rec);
    }

    fn masked(&self, header: &Header) -> Header {
        let mut rec = Record::Header(header.clone());
        self.redactor.record(&mut rec);
        match rec {
            Record::Header(h) => h,
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
