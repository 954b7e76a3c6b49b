//! Runners' own reports as an approximate source (`--test-report
//! FORMAT:PATH`): `go test -json` output (`go-json`) and JUnit XML
//! (`junit`), read into test windows on the log's clock.
//!
//! The file is written by the traced job, so it is hostile input: opened
//! without following a link, only a regular file, at most [`MAX_BYTES`],
//! [`MAX_TESTS`] tests, [`MAX_LINES`] lines or XML events and [`MAX_DEPTH`]
//! nested elements. Anything malformed is refused whole (one warning line,
//! no labels from it): a half-read report would name the wrong test.
//!
//! How far the times are off (`uncertainty_ms`, docs/report.md "Which
//! test"): [`BASE_UNCERTAINTY_MS`] for the runner's own stamping, the
//! format's resolution, and the wall clock's drift from the log's
//! anchor since the log began ([`DRIFT_PPM`]).
use std::{io::Read, path::PathBuf};

use serde::Deserialize;

use crate::eventlog::{Stamp, TestWindow};

/// A report larger than this is refused: a 10,000-test package's `go test
/// -json` output is about 3 MB (one run, one output and one pass line of
/// ~150 bytes each per test, plus its output), so 64 MiB is far beyond any
/// real report and bounds what the job can make tracer read.
pub const MAX_BYTES: u64 = 64 << 20;
/// Tests (windows) one report may bring; past it the report is refused.
pub const MAX_TESTS: usize = 100_000;
/// Lines of a go report, or XML events of a JUnit one.
pub const MAX_LINES: usize = 2_000_000;
/// Nested XML elements: JUnit is `testsuites > testsuite > testcase >
/// failure`, 4 deep; nested suites add a few. quick-xml's reader does not
/// recurse, so this bounds only what a report may be, not the stack.
pub const MAX_DEPTH: usize = 64;
/// What the runner's own stamp may lag the test: test2json stamps a line
/// when it reads it from the test binary's stdout, a pipe the binary writes
/// unbuffered (`=== RUN` before the test's function runs, `--- PASS`
/// after). In the go suite's run here the gap between a test's `run` event
/// and the next line it printed was 0.7 ms on an idle machine; 10 ms
/// leaves room for a loaded 2-core runner's scheduling.
pub const BASE_UNCERTAINTY_MS: u32 = 10;
/// The log maps wall to kernel time by one offset read at its start; NTP
/// may slew the wall clock by up to 500 ppm since (Linux's adjtimex
/// limit), 0.5 ms for each second of the run.
pub const DRIFT_PPM: u64 = 500;

/// A runner's report format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    GoJson,
    Junit,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::GoJson => "go-json",
            Format::Junit => "junit",
        }
    }
}

/// `--test-report FORMAT:PATH`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub format: Format,
    pub path: PathBuf,
}

impl std::str::FromStr for Spec {
    type Err = String;

    fn from_str(s: &str) -> Result<Spec, String> {
        let (f, path) = s.split_once(':').ok_or_else(|| {
            format!("expected FORMAT:PATH (go-json:FILE or junit:FILE), got {s:?}")
        })?;
        let format = match f {
            "go-json" => Format::GoJson,
            "junit" => Format::Junit,
            _ => return Err(format!("unknown report format {f:?}: go-json or junit")),
        };
        if path.is_empty() {
            return Err("empty PATH after FORMAT:".into());
        }
        Ok(Spec {
            format,
            path: PathBuf::from(path),
        })
    }
}

/// One test as a report has it, on the wall clock (ns since the epoch).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub file: Option<String>,
    pub name: String,
    /// Absent: the report does not say when it began.
    pub from: Option<i128>,
    /// Absent: the report never saw it end.
    pub until: Option<i128>,
    /// The format's own resolution of these times, ms.
    pub resolution_ms: u32,
}

/// The report's bytes, read safely: with `user`'s filesystem ids (the
/// run's user, whose job wrote it: a path through a directory that user
/// cannot search, a link to root's, yields nothing), no link followed at
/// its end, `O_PATH` first and only a regular file reopened for reading
/// (a FIFO would block, a device's open has effects), bounded.
pub fn read_file(path: &std::path::Path, user: Option<(u32, u32)>) -> Result<Vec<u8>, String> {
    let size = std::cell::Cell::new(0);
    let f = crate::outdir::as_user(user, || {
        crate::outdir::open_checked(
            nix::fcntl::AT_FDCWD,
            path,
            nix::fcntl::ResolveFlag::empty(),
            |st| {
                size.set(st.st_size as u64);
                Ok(())
            },
        )
    })
    .map_err(|e| e.to_string())?;
    if size.get() > MAX_BYTES {
        return Err(format!(
            "{} bytes, over the {} MiB limit",
            size.get(),
            MAX_BYTES >> 20
        ));
    }
    let mut out = Vec::new();
    f.take(MAX_BYTES + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() as u64 > MAX_BYTES {
        return Err(format!("over the {} MiB limit", MAX_BYTES >> 20));
    }
    Ok(out)
}

/// The tests of a report, or why it was refused.
pub fn parse(format: Format, bytes: &[u8]) -> Result<Vec<Reported>, String> {
    match format {
        Format::GoJson => parse_go(bytes),
        Format::Junit => parse_junit(bytes),
    }
}

/// RFC 3339 with an offset, to ns since the epoch.
fn wall(s: &str) -> Option<i128> {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(time::OffsetDateTime::unix_timestamp_nanos)
}

#[derive(Deserialize)]
struct GoEvent {
    #[serde(rename = "Time")]
    time: Option<String>,
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Package")]
    package: Option<String>,
    #[serde(rename = "Test")]
    test: Option<String>,
}

/// `go test -json` (test2json): a test runs from its `run` event to its
/// `pass`, `fail` or `skip`; `pause`/`cont` (t.Parallel) stay inside the
/// window, which is so a superset of when it ran. A test with no end (its
/// binary died) is open to its process's end.
pub fn parse_go(bytes: &[u8]) -> Result<Vec<Reported>, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut out: Vec<Reported> = Vec::new();
    let mut open: std::collections::HashMap<(String, String), usize> = Default::default();
    for (i, line) in text.lines().enumerate() {
        if i >= MAX_LINES {
            return Err(format!("over {MAX_LINES} lines"));
        }
        if line.trim().is_empty() {
            continue;
        }
        let ev: GoEvent = serde_json::from_str(line)
            .map_err(|e| format!("line {}: not a test2json event ({e})", i + 1))?;
        let (Some(pkg), Some(test)) = (ev.package, ev.test) else {
            continue;
        };
        let at = match ev.time.as_deref() {
            Some(t) => Some(wall(t).ok_or_else(|| format!("line {}: bad Time {t:?}", i + 1))?),
            None => None,
        };
        let key = (pkg, test);
        match ev.action.as_str() {
            "run" => {
                if out.len() >= MAX_TESTS {
                    return Err(format!("over {MAX_TESTS} tests"));
                }
                out.push(Reported {
                    file: Some(key.0.clone()),
                    name: key.1.clone(),
                    from: at,
                    until: None,
                    // test2json's Time has ns digits; the lag is the base's.
                    resolution_ms: 0,
                });
                open.insert(key, out.len() - 1);
            }
            "pass" | "fail" | "skip" => {
                if let Some(i) = open.remove(&key) {
                    out[i].until = at;
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// JUnit XML: a case has a name, a classname and a duration only. Where a
/// suite's `timestamp` (with an offset) says when it began, every case of
/// it is in the suite's window, `timestamp` to `timestamp + time`: when in
/// it each ran is not known (a runner may run them in parallel, and the
/// gaps between them are not written), so overlapping cases read "one of".
/// Without a usable timestamp the window is the whole life of the process
/// that ran them.
pub fn parse_junit(bytes: &[u8]) -> Result<Vec<Reported>, String> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_reader(bytes);
    reader.config_mut().check_end_names = true;
    let mut out: Vec<Reported> = Vec::new();
    let mut depth = 0usize;
    // Per open testsuite: (start, end, resolution) of its window.
    let mut suites: Vec<(Option<i128>, Option<i128>, u32)> = Vec::new();
    let mut buf = Vec::new();
    let mut events = 0usize;
    let mut root_seen = false;
    loop {
        events += 1;
        if events > MAX_LINES {
            return Err(format!("over {MAX_LINES} XML events"));
        }
        let ev = reader
            .read_event_into(&mut buf)
            .map_err(|e| format!("XML error at byte {}: {e}", reader.error_position()))?;
        let (start, empty) = match &ev {
            Event::Start(e) => (Some(e.clone()), false),
            Event::Empty(e) => (Some(e.clone()), true),
            Event::End(e) => {
                depth = depth.saturating_sub(1);
                if e.name().as_ref() == b"testsuite" {
                    suites.pop();
                }
                buf.clear();
                continue;
            }
            Event::Eof => break,
            Event::DocType(_) => return Err("a DOCTYPE: refused (entities)".into()),
            _ => (None, false),
        };
        if let Some(e) = start {
            if depth == 0 {
                if root_seen {
                    return Err("more than one root element".into());
                }
                root_seen = true;
                if !matches!(e.name().as_ref(), b"testsuites" | b"testsuite") {
                    return Err("not JUnit: the root is neither testsuites nor testsuite".into());
                }
            }
            if !empty {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(format!("elements nested over {MAX_DEPTH} deep"));
                }
            }
            let attr = |name: &[u8]| -> Result<Option<String>, String> {
                for a in e.attributes() {
                    let a = a.map_err(|x| format!("bad attribute: {x}"))?;
                    if a.key.as_ref() == name {
                        let v = a
                            .unescape_value()
                            .map_err(|x| format!("bad attribute value: {x}"))?;
                        return Ok(Some(v.into_owned()));
                    }
                }
                Ok(None)
            };
            match e.name().as_ref() {
                b"testsuite" => {
                    let from = attr(b"timestamp")?.as_deref().and_then(wall);
                    let dur = attr(b"time")?;
                    let (secs, res) = match dur.as_deref().map(seconds) {
                        Some(Some(x)) => (Some(x.0), x.1),
                        _ => (None, 0),
                    };
                    let until = from.zip(secs).map(|(f, s)| f + s);
                    // Without its length the suite's end is not known:
                    // open, as a test that never ended.
                    if !empty {
                        suites.push((from, until, res));
                    }
                }
                b"testcase" => {
                    let Some(name) = attr(b"name")? else {
                        return Err("a testcase without a name".into());
                    };
                    if out.len() >= MAX_TESTS {
                        return Err(format!("over {MAX_TESTS} tests"));
                    }
                    let (from, until, res) = suites.last().copied().unwrap_or((None, None, 0));
                    out.push(Reported {
                        file: attr(b"classname")?,
                        name,
                        from,
                        until: from.and(until),
                        resolution_ms: res,
                    });
                }
                _ => {}
            }
        }
        buf.clear();
    }
    if !root_seen {
        return Err("no XML element".into());
    }
    if depth != 0 {
        return Err("ends inside an element".into());
    }
    Ok(out)
}

/// `time="1.014"` to ns and its resolution in ms (1 for 3 decimals, 1000
/// for none). A negative, huge or odd text is not a duration.
fn seconds(s: &str) -> Option<(i128, u32)> {
    let s = s.trim();
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |d: &str| !d.is_empty() && d.len() <= 12 && d.bytes().all(|b| b.is_ascii_digit());
    if !digits(int) || (!frac.is_empty() && !digits(frac)) || frac.len() > 9 {
        return None;
    }
    let whole: i128 = int.parse().ok()?;
    let mut ns: i128 = whole * 1_000_000_000;
    if !frac.is_empty() {
        let f: i128 = frac.parse().ok()?;
        ns += f * 10i128.pow(9 - frac.len() as u32);
    }
    let res_ms = match frac.len() {
        0 => 1000,
        1 => 100,
        2 => 10,
        _ => 1,
    };
    Some((ns, res_ms))
}

/// The reported tests as log records: wall times to `t` by the header's
/// offset, and each file's uncertainty. `started_wall`: the log's start
/// (the header's `started_at`), where the offset was read.
pub fn to_windows(
    spec: &Spec,
    tests: &[Reported],
    boot_to_wall_ns: i64,
    started_wall: Option<i128>,
) -> Vec<TestWindow> {
    let to_t = |w: i128| -> Option<u64> { u64::try_from(w - i128::from(boot_to_wall_ns)).ok() };
    // The latest instant of the report: the drift grows with the time since
    // the offset was read.
    let latest = tests.iter().filter_map(|r| r.until.or(r.from)).max();
    let since_ns = match (latest, started_wall) {
        (Some(l), Some(s)) => u64::try_from(l - s).unwrap_or(0),
        _ => 0,
    };
    let drift_ms = since_ns.saturating_mul(DRIFT_PPM) / 1_000_000 / 1_000_000;
    let res = tests.iter().map(|r| r.resolution_ms).max().unwrap_or(0);
    let n = u32::try_from(u64::from(BASE_UNCERTAINTY_MS + res) + drift_ms + 1).unwrap_or(u32::MAX);
    let path = spec.path.to_string_lossy().into_owned();
    tests
        .iter()
        .map(|r| TestWindow {
            at: Stamp::default(),
            format: spec.format.as_str().to_string(),
            path: path.clone(),
            file: r.file.clone(),
            name: r.name.clone(),
            from: r.from.and_then(to_t),
            until: r.until.and_then(to_t),
            uncertainty_ms: n,
        })
        .collect()
}

/// Read (as `user`, see [`read_file`]), parse and map one report; on any
/// refusal, one warning line and nothing from it.
pub fn load(
    spec: &Spec,
    boot_to_wall_ns: i64,
    started_at: &str,
    user: Option<(u32, u32)>,
) -> Vec<TestWindow> {
    let got = read_file(&spec.path, user).and_then(|b| parse(spec.format, &b));
    match got {
        Ok(tests) => {
            let started = crate::eventlog::parse_wall_time(started_at).map(i128::from);
            to_windows(spec, &tests, boot_to_wall_ns, started)
        }
        Err(why) => {
            crate::say!(
                "tracer: warning: --test-report {}:{}: {why}; no test names from it",
                spec.format.as_str(),
                crate::text::one_line(&spec.path.to_string_lossy())
            );
            Vec::new()
        }
    }
}
