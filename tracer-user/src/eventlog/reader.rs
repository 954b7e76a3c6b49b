//! Reads `events.ndjson` back, strictly: a log that is empty, corrupt, or from
//! a newer tracer is an error naming the line; a log cut short (tracer killed)
//! is readable and flagged `truncated`.
use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
};

use super::{
    parse::parse_record,
    schema::{Header, Record, Trailer, SCHEMA_VERSION},
};

#[derive(Debug)]
pub struct EventLog {
    pub header: Header,
    /// Every event line, in log order (no header, no trailer).
    pub events: Vec<Record>,
    pub trailer: Option<Trailer>,
    /// The log ended without a trailer: capture was interrupted.
    pub truncated: bool,
    /// Files not read as part of the log, and why (see [`Frame::ignored`]).
    pub ignored: Vec<String>,
    /// Event lines longer than [`MAX_LINE_BYTES`], skipped unread.
    pub lines_skipped: u64,
    /// A daemon's series that is not whole, and how (see [`Frame::not_whole`]).
    pub not_whole: Option<String>,
}

impl EventLog {
    /// The events read within `frame`.
    pub fn of(frame: Frame, events: Vec<Record>) -> Self {
        EventLog {
            header: frame.header,
            events,
            trailer: frame.trailer,
            truncated: frame.truncated,
            ignored: frame.ignored,
            lines_skipped: frame.lines_skipped,
            not_whole: frame.not_whole,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is empty: it holds no event log header")]
    Empty { path: PathBuf },
    #[error("{path}:{line}: not a tracer event log line ({source})")]
    Corrupt {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("{path}: the first line is not an event log header")]
    NoHeader { path: PathBuf },
    #[error(
        "{path}:{line}: a line longer than {MAX_LINE_BYTES} bytes before any header; this is not a tracer event log"
    )]
    LineTooLong { path: PathBuf, line: usize },
    #[error(
        "{path}: event log schema {found} is newer than this tracer understands ({SCHEMA_VERSION}); use a newer tracer"
    )]
    NewerSchema { path: PathBuf, found: u32 },
}

/// The longest line read: a hostile file cannot make tracer buffer without
/// bound. A longer event line is skipped, counted (`lines_skipped`) and
/// named in the reports' loss line; the rest of the log is read (one such
/// line once cost every report of the run). Tracer never writes one
/// (`writer::MAX_RECORD_BYTES`).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// Read a log file. The last component is not followed and must be a regular
/// file: a link or FIFO planted under the log's name is refused.
pub fn read_log(path: &Path) -> Result<EventLog, LogError> {
    let file =
        crate::outdir::open_regular(nix::fcntl::AT_FDCWD, path).map_err(|source| LogError::Io {
            path: path.to_owned(),
            source,
        })?;
    read_from(file, path)
}

/// Read a log from an open file (tracer's own, held since it was created);
/// `path` names it in messages.
pub fn read_from(file: impl Read, path: &Path) -> Result<EventLog, LogError> {
    let mut events = Vec::new();
    let frame = stream_from(file, path, &mut |_: &Header, rec| events.push(rec))?;
    Ok(EventLog::of(frame, events))
}

/// Where [`stream_from`] hands a log's events, in log order.
pub trait Sink {
    /// An event line, offered first: `true` if the sink read it itself
    /// (a fast lane for lines it knows); it must then be exactly the line
    /// `record` would have been given. Default: no.
    fn line(&mut self, _header: &Header, _line: &[u8]) -> bool {
        false
    }

    /// An event, with the log's header.
    fn record(&mut self, header: &Header, rec: Record);
}

impl<F: FnMut(&Header, Record)> Sink for F {
    fn record(&mut self, header: &Header, rec: Record) {
        self(header, rec)
    }
}

/// A log's header and trailer: what [`stream_from`] returns once every event
/// has been handed over.
#[derive(Debug)]
pub struct Frame {
    pub header: Header,
    pub trailer: Option<Trailer>,
    /// The log ended without a trailer: capture was interrupted.
    pub truncated: bool,
    /// Files of the directory that were not read as part of the log, and
    /// why (see `series`): every report lists them.
    pub ignored: Vec<String>,
    /// Event lines longer than [`MAX_LINE_BYTES`], skipped unread.
    pub lines_skipped: u64,
    /// A daemon's series read from its directory that does not end with the
    /// stop's trailer, or lacks a segment that trailer names: cut short or
    /// rewritten by whoever could write the directory. Why, in one
    /// sentence; `report --fail-on` refuses to judge it.
    pub not_whole: Option<String>,
}

/// What [`stream_from`] read into its buffer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Got {
    /// The end of the file.
    End,
    /// A line (its newline removed).
    Line,
    /// A line longer than [`MAX_LINE_BYTES`]: read past, the buffer empty.
    TooLong,
}

/// Reads past the rest of a line (through its newline, or to the end),
/// keeping none of it.
fn skip_line(reader: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let (done, used) = {
            let avail = reader.fill_buf()?;
            match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (true, i + 1),
                None => (avail.is_empty(), avail.len()),
            }
        };
        reader.consume(used);
        if done {
            return Ok(());
        }
    }
}

/// Read a log line by line, handing each event (with the log's header) to
/// `each` as it is parsed: the events are never all in memory at once (a
/// million-event log is hundreds of MB as records). Same rules as
/// [`read_from`].
pub fn stream_from(file: impl Read, path: &Path, sink: &mut impl Sink) -> Result<Frame, LogError> {
    let io = |source| LogError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut header: Option<Header> = None;
    let mut trailer = None;
    // Two line buffers, reused: the current line and the one after it (a
    // bad last line is forgiven, so each line must know if it is the last).
    let mut line = Vec::new();
    let mut ahead = Vec::new();
    let mut next = |buf: &mut Vec<u8>| -> Result<Got, LogError> {
        buf.clear();
        let got = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', buf)
            .map_err(io)?;
        if got == 0 {
            return Ok(Got::End);
        }
        if buf.last() == Some(&b'\n') {
            buf.pop();
        } else if buf.len() > MAX_LINE_BYTES {
            buf.clear();
            skip_line(&mut reader).map_err(io)?;
            return Ok(Got::TooLong);
        }
        Ok(Got::Line)
    };
    let mut lines_skipped = 0;
    let mut lineno = 0;
    let mut ahead_kind = next(&mut ahead)?;
    while ahead_kind != Got::End {
        std::mem::swap(&mut line, &mut ahead);
        let this = ahead_kind;
        let i = lineno;
        lineno += 1;
        ahead_kind = next(&mut ahead)?;
        let is_last = ahead_kind == Got::End;
        if this == Got::TooLong {
            // Without a header first, nothing says this is a log at all.
            if header.is_none() {
                return Err(LogError::LineTooLong {
                    path: path.to_owned(),
                    line: i + 1,
                });
            }
            lines_skipped += 1;
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if header.is_none() {
            // Check the version before the full parse so a newer log gets the
            // right message rather than a field error.
            let probe: serde_json::Value =
                serde_json::from_slice(&line).map_err(|source| LogError::Corrupt {
                    path: path.to_owned(),
                    line: i + 1,
                    source,
                })?;
            if probe.get("type").and_then(|t| t.as_str()) != Some("header") {
                return Err(LogError::NoHeader {
                    path: path.to_owned(),
                });
            }
            let found = probe.get("schema").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
            if found > SCHEMA_VERSION {
                return Err(LogError::NewerSchema {
                    path: path.to_owned(),
                    found,
                });
            }
        }
        if let Some(h) = &header {
            if sink.line(h, &line) {
                continue;
            }
        }
        match parse_record(&line) {
            Ok(Record::Header(h)) if header.is_none() => header = Some(*h),
            Ok(Record::Trailer(t)) => trailer = Some(t),
            Ok(rec) if header.is_some() => sink.record(header.as_ref().expect("checked"), rec),
            Ok(_) => {
                return Err(LogError::NoHeader {
                    path: path.to_owned(),
                })
            }
            // A killed tracer can leave half a line at the very end.
            Err(_) if is_last && header.is_some() && trailer.is_none() => break,
            Err(source) => {
                return Err(LogError::Corrupt {
                    path: path.to_owned(),
                    line: i + 1,
                    source,
                })
            }
        }
    }
    let header = header.ok_or_else(|| LogError::Empty {
        path: path.to_owned(),
    })?;
    let truncated = trailer.is_none();
    Ok(Frame {
        header,
        trailer,
        truncated,
        ignored: Vec::new(),
        lines_skipped,
        not_whole: None,
    })
}

/// The live log of a run or daemon (the names live in `outdir::names`).
pub use crate::outdir::names::EVENTS as LIVE;
