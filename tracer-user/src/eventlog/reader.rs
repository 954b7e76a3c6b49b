//! Reads `events.ndjson` back, strictly: a log that is empty, corrupt, or from
//! a newer tracer is an error naming the line; a log cut short (tracer killed)
//! is readable and flagged `truncated`.
use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
};

use super::schema::{Header, Record, Trailer, SCHEMA_VERSION};

#[derive(Debug)]
pub struct EventLog {
    pub header: Header,
    /// Every event line, in log order (no header, no trailer).
    pub events: Vec<Record>,
    pub trailer: Option<Trailer>,
    /// The log ended without a trailer: capture was interrupted.
    pub truncated: bool,
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
        "{path}:{line}: a line longer than {MAX_LINE_BYTES} bytes; this is not a tracer event log"
    )]
    LineTooLong { path: PathBuf, line: usize },
    #[error(
        "{path}: event log schema {found} is newer than this tracer understands ({SCHEMA_VERSION}); use a newer tracer"
    )]
    NewerSchema { path: PathBuf, found: u32 },
}

/// The longest line accepted: a hostile file cannot make tracer buffer
/// without bound (a snapshot of a large run is a few MB).
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
    let io = |source| LogError::Io {
        path: path.to_owned(),
        source,
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut header: Option<Header> = None;
    let mut events = Vec::new();
    let mut trailer = None;
    let mut next = |n: usize| -> Result<Option<Vec<u8>>, LogError> {
        let mut line = Vec::new();
        let got = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(io)?;
        if got == 0 {
            return Ok(None);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        } else if line.len() > MAX_LINE_BYTES {
            return Err(LogError::LineTooLong {
                path: path.to_owned(),
                line: n,
            });
        }
        Ok(Some(line))
    };
    let mut lineno = 0;
    let mut pending = next(1)?;
    while let Some(line) = pending.take() {
        let i = lineno;
        lineno += 1;
        pending = next(i + 2)?;
        let is_last = pending.is_none();
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
        match serde_json::from_slice::<Record>(&line) {
            Ok(Record::Header(h)) if header.is_none() => header = Some(h),
            Ok(Record::Trailer(t)) => trailer = Some(t),
            Ok(rec) if header.is_some() => events.push(rec),
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
    Ok(EventLog {
        header,
        events,
        trailer,
        truncated,
    })
}

/// A daemon's rotated series (`events-0001.ndjson`, …, then the live
/// `events.ndjson`) read as one log: the first header, every event, the last
/// trailer (its counters are cumulative). A directory names its series.
pub fn read_series(path: &Path) -> Result<EventLog, LogError> {
    if !path.is_dir() {
        return read_log(path);
    }
    let dir = crate::outdir::OutDir::open_existing(path).map_err(|e| LogError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    read_series_in(&dir, None::<std::fs::File>)
}

/// The series in a held directory: names listed and files opened relative to
/// it, links and non-regular files refused. `live`: the live log as tracer
/// holds it, read instead of whatever the live name now points to.
pub fn read_series_in(
    dir: &crate::outdir::OutDir,
    live: Option<impl Read>,
) -> Result<EventLog, LogError> {
    let io = |name: &str| {
        let path = dir.display(name);
        move |source| LogError::Io { path, source }
    };
    let mut names: Vec<String> = dir
        .names()
        .map_err(io(""))?
        .into_iter()
        .filter(|n| is_segment(n))
        .collect();
    names.sort();
    let live_part = match live {
        Some(held) => Some(read_from(held, &dir.display(LIVE))),
        None if dir.exists(LIVE) => Some(
            dir.open_read(LIVE)
                .map_err(io(LIVE))
                .and_then(|f| read_from(f, &dir.display(LIVE))),
        ),
        None => None,
    };
    let mut parts = names
        .iter()
        .map(|n| {
            let file = dir.open_read(n).map_err(io(n))?;
            read_from(file, &dir.display(n))
        })
        .chain(live_part);
    let mut log = parts.next().ok_or_else(|| LogError::Empty {
        path: dir.path().to_owned(),
    })??;
    for part in parts {
        let part = part?;
        log.events.extend(part.events);
        log.trailer = part.trailer;
        log.truncated = part.truncated;
    }
    Ok(log)
}

/// The live log of a run or daemon (the names live in `outdir::names`).
pub use crate::outdir::names::{is_segment, segment_name, EVENTS as LIVE};
