//! One log line to a [`Record`], without serde's internally-tagged path.
//!
//! Serde reads an internally tagged enum by first buffering the whole line
//! into a generic tree (every string and map copied), then reading the
//! variant from that tree: most of the cost of reading a big log. Tracer
//! writes the tag first (`{"type":"signal",...`), so the tag is peeked and
//! the line is read straight into that variant's struct, which ignores the
//! `type` key like any unknown field. Anything else (another key order, an
//! escaped tag, an unknown type) takes serde's generic path, so what is
//! accepted, and how it is read, does not change.
use serde::de::DeserializeOwned;

use super::{
    flat::{ExecFlat, ExitFlat, ForkFlat},
    schema::Record,
};

/// The `type` of a line that starts with it, as tracer writes them.
pub fn peek_tag(line: &[u8]) -> Option<&[u8]> {
    line.strip_prefix(br#"{"type":""#)
        .and_then(|rest| rest.split(|&b| b == b'"').next().map(|t| (t, rest)))
        // The tag must be a plain string ending in a quote followed by the
        // next key (or the end of the object).
        .filter(|(t, rest)| matches!(rest.get(t.len() + 1), Some(b',' | b'}')))
        .map(|(t, _)| t)
}

pub fn parse_record(line: &[u8]) -> serde_json::Result<Record> {
    fn direct<T: DeserializeOwned>(
        line: &[u8],
        wrap: fn(T) -> Record,
    ) -> serde_json::Result<Record> {
        serde_json::from_slice::<T>(line).map(wrap)
    }
    /// Through a struct without `flatten` ([`super::flat`]); a line it
    /// refuses takes `direct` (whose error is the one reported).
    fn flat<F: DeserializeOwned, T: DeserializeOwned + From<F>>(
        line: &[u8],
        wrap: fn(T) -> Record,
    ) -> serde_json::Result<Record> {
        match serde_json::from_slice::<F>(line) {
            Ok(f) => Ok(wrap(T::from(f))),
            Err(_) => direct(line, wrap),
        }
    }
    match peek_tag(line) {
        Some(b"signal") => direct(line, Record::Signal),
        Some(b"kill_call") => direct(line, Record::KillCall),
        Some(b"fork") => flat::<ForkFlat, _>(line, Record::Fork),
        Some(b"exec") => flat::<ExecFlat, _>(line, Record::Exec),
        Some(b"exit") => flat::<ExitFlat, _>(line, Record::Exit),
        Some(b"last_words") => direct(line, Record::LastWords),
        _ => serde_json::from_slice::<Record>(line),
    }
}
