//! Reads `events.ndjson` back, strictly: a log that is empty, corrupt, or from
//! a newer tracer is an error naming the line; a log cut short (tracer killed)
//! is readable and flagged `truncated`.
use std::{
    fs::File,
    io::{BufRead, BufReader},
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
        "{path}: event log schema {found} is newer than this tracer understands ({SCHEMA_VERSION}); use a newer tracer"
    )]
    NewerSchema { path: PathBuf, found: u32 },
}

pub fn read_log(path: &Path) -> Result<EventLog, LogError> {
    let io = |source| LogError::Io {
        path: path.to_owned(),
        source,
    };
    let reader = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut header: Option<Header> = None;
    let mut events = Vec::new();
    let mut trailer = None;
    let mut lines = reader.split(b'\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(io)?;
        let is_last = lines.peek().is_none();
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
    let io = |source| LogError::Io {
        path: path.to_owned(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(io)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("events-") && name.ends_with(".ndjson")
        })
        .collect();
    files.sort();
    let live = path.join("events.ndjson");
    if live.exists() {
        files.push(live);
    }
    let mut parts = files.iter().map(|f| read_log(f));
    let mut log = parts.next().ok_or_else(|| LogError::Empty {
        path: path.to_owned(),
    })??;
    for part in parts {
        let part = part?;
        log.events.extend(part.events);
        log.trailer = part.trailer;
        log.truncated = part.truncated;
    }
    Ok(log)
}
