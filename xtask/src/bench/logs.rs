//! Reading and synthesizing tracer's NDJSON event logs: trailer counters, time span, line count.
use std::{
    fs,
    io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write},
    path::Path,
};

use anyhow::{bail, Context, Result};

pub(crate) fn count_lines(path: &Path) -> u64 {
    let Ok(f) = fs::File::open(path) else {
        return 0;
    };
    let mut r = BufReader::with_capacity(1 << 20, f);
    let mut n = 0;
    loop {
        let buf = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(b) => b,
        };
        n += buf.iter().filter(|&&b| b == b'\n').count() as u64;
        let len = buf.len();
        r.consume(len);
    }
    n
}

/// A valid log of at least `target` events: the events of `src` repeated,
/// each copy's `seq` renumbered and its `start`/`t` shifted, so every copy's
/// processes are new identities (same pids, later start times: pid reuse).
pub(crate) fn synthesize(src: &Path, dst: &Path, target: u64) -> Result<u64> {
    let text = fs::read_to_string(src).with_context(|| format!("reading {}", src.display()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = lines.next().context("empty log")?;
    let body: Vec<&str> = lines
        .filter(|l| !l.contains(r#""type":"trailer""#))
        .collect();
    if body.is_empty() {
        bail!("{} has no events", src.display());
    }
    let span = field_values(&body, "\"t\":").max().unwrap_or(0)
        - field_values(&body, "\"t\":").min().unwrap_or(0)
        + 1_000_000;
    let copies = target.div_ceil(body.len() as u64);
    let mut out = BufWriter::new(fs::File::create(dst)?);
    writeln!(out, "{header}")?;
    let mut seq = 0u64;
    for k in 0..copies {
        let shift = k * span;
        for line in &body {
            seq += 1;
            let l = set_field(line, "\"seq\":", |_| seq);
            let l = set_field(&l, "\"t\":", |v| v + shift);
            let l = set_field(&l, "\"start\":", |v| v + shift);
            writeln!(out, "{l}")?;
        }
    }
    writeln!(
        out,
        r#"{{"type":"trailer","ended_at":"2000-01-01T00:00:00Z","events":{seq},"lost":{{"ringbuf_full":0,"tracked_map_full":0,"inflight_map_full":0,"undecodable":0,"per_cpu":[]}},"command_status":{{"exited":{{"code":0}}}}}}"#
    )?;
    out.flush()?;
    Ok(seq)
}

fn field_values<'a>(lines: &'a [&str], key: &'a str) -> impl Iterator<Item = u64> + 'a {
    lines.iter().filter_map(move |l| {
        let i = l.find(key)? + key.len();
        let digits: String = l[i..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    })
}

/// Rewrite every unsigned numeric value of `key` in a JSON line.
fn set_field(line: &str, key: &str, f: impl Fn(u64) -> u64) -> String {
    let mut out = String::with_capacity(line.len() + 16);
    let mut rest = line;
    while let Some(i) = rest.find(key) {
        let start = i + key.len();
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find(|c: char| !c.is_ascii_digit())
            .map_or(rest.len(), |e| start + e);
        match rest[start..end].parse::<u64>() {
            Ok(v) => out.push_str(&f(v).to_string()),
            Err(_) => out.push_str(&rest[start..end]),
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// The trailer's counters, read from the log's last line.
pub(crate) struct TrailerCounts {
    pub events: u64,
    pub lost: [(String, u64); 4],
}

impl TrailerCounts {
    pub(crate) fn lost_total(&self) -> u64 {
        self.lost.iter().map(|(_, n)| n).sum()
    }
    pub(crate) fn lost_summary(&self) -> String {
        let parts: Vec<String> = self
            .lost
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if parts.is_empty() {
            "0".into()
        } else {
            parts.join(", ")
        }
    }
}

pub(crate) fn read_trailer(path: &Path) -> Option<TrailerCounts> {
    trailer_counts(&last_line(path)?)
}

/// The last non-empty line of the log at `path`, from its last 64 KiB only.
/// Never the whole log into the bench's memory: a child forked from a
/// bench grown by a 100 MB log inherits that size as its `ru_maxrss` (the
/// kernel keeps the old image's high-water mark at exec), which once
/// showed tracer at 114.6 MB in every row after the self-signal storm's.
pub(crate) fn last_line(path: &Path) -> Option<String> {
    let mut f = fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(64 << 10))).ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    let tail = String::from_utf8_lossy(&tail);
    Some(
        tail.lines()
            .rev()
            .find(|l| !l.trim().is_empty())?
            .to_string(),
    )
}

/// The counts of a trailer line (`None` when `last` is not one).
pub(crate) fn trailer_counts(last: &str) -> Option<TrailerCounts> {
    if !last.contains(r#""type":"trailer""#) {
        return None;
    }
    let num = |key: &str| -> u64 {
        field_values(&[last], &format!("\"{key}\":"))
            .next()
            .unwrap_or(0)
    };
    let lost = [
        "ringbuf_full",
        "tracked_map_full",
        "inflight_map_full",
        "undecodable",
    ]
    .map(|k| (k.to_string(), num(k)));
    Some(TrailerCounts {
        events: num("events"),
        lost,
    })
}

/// Seconds between the log's first and last event (`t`, CLOCK_BOOTTIME ns).
pub(crate) fn event_span_secs(path: &Path) -> Option<f64> {
    let mut f = fs::File::open(path).ok()?;
    let mut head = vec![0u8; 64 << 10];
    let n = f.read(&mut head).ok()?;
    let head = String::from_utf8_lossy(&head[..n]).into_owned();
    let first = head.lines().nth(1)?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(64 << 10))).ok()?;
    let mut tail = String::new();
    f.read_to_string(&mut tail).ok()?;
    let last = tail
        .lines()
        .rev()
        .find(|l| l.contains("\"t\":") && !l.contains(r#""type":"trailer""#))?;
    let t = |l: &str| field_values(&[l], "\"t\":").next();
    let (a, b) = (t(first)?, t(last)?);
    (b > a).then(|| (b - a) as f64 / 1e9)
}
