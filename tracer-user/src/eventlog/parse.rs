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
use serde::de::{Deserialize, DeserializeOwned};

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

/// A line read as `T`. A line that is UTF-8 throughout (every line tracer
/// writes) is checked once and read as text: `from_slice` checks each
/// string on its own, which cost more than the whole line at once. Any
/// other line takes `from_slice`, whose error is the one reported.
pub fn from_line<'a, T: Deserialize<'a>>(line: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    }
}

pub(super) fn parse_record(line: &[u8]) -> serde_json::Result<Record> {
    fn direct<T: DeserializeOwned>(
        line: &[u8],
        wrap: fn(T) -> Record,
    ) -> serde_json::Result<Record> {
        from_line::<T>(line).map(wrap)
    }
    /// Through a struct without `flatten` ([`super::flat`]); a line it
    /// refuses takes `direct` (whose error is the one reported).
    fn flat<F: DeserializeOwned, T: DeserializeOwned + From<F>>(
        line: &[u8],
        wrap: fn(T) -> Record,
    ) -> serde_json::Result<Record> {
        match from_line::<F>(line) {
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
        _ => from_line::<Record>(line),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Good or bad, a line reads (or fails, with the same message) as
    /// `from_slice` reads it.
    #[test]
    fn from_line_reads_like_from_slice() {
        let lines: [&[u8]; 5] = [
            br#"{"type":"exit","seq":7,"t":5,"time":"x","task":{"pid":1,"tid":1,"start":2,"comm":"a\u00e9\n"},"exit_code":0,"status":{"exited":{"code":0}},"group_dead":true}"#,
            "{\"type\":\"exit\",\"seq\":7,\"t\":5,\"time\":\"é\",\"task\":{\"pid\":1,\"tid\":1,\"start\":2},\"exit_code\":0,\"status\":{\"exited\":{\"code\":0}},\"group_dead\":true}".as_bytes(),
            b"{\"type\":\"exit\",\"seq\":7,\"t\":5,\"time\":\"\xff\"}",
            br#"{"type":"exit","seq":7,"t":5,"time":"x"#,
            b"{\"type\":\"fork\",\"seq\":1,\"time\":\"\x01\"}",
        ];
        let mut read = 0;
        for line in lines {
            let slice = serde_json::from_slice::<Record>(line).map_err(|e| e.to_string());
            let ours = from_line::<Record>(line).map_err(|e| e.to_string());
            assert_eq!(slice, ours, "{}", String::from_utf8_lossy(line));
            read += usize::from(ours.is_ok());
        }
        assert_eq!(read, 2, "two of the lines are good");
    }
}
