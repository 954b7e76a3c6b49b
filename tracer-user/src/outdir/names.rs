//! The names of the files in a report directory, in one place: the event
//! log (live, and a daemon's rotated segments) and the three reports.

/// The live log of a run or daemon.
pub const EVENTS: &str = "events.ndjson";
/// The reports, in the order they are written.
pub const REPORT_JSON: &str = "report.json";
pub const REPORT_MD: &str = "report.md";
pub const REPORT_HTML: &str = "report.html";

const SEGMENT_PREFIX: &str = "events-";
const SEGMENT_SUFFIX: &str = ".ndjson";

/// `events-NNNN.ndjson`: a rotated segment of a daemon's series.
pub fn segment_name(n: u32) -> String {
    format!("{SEGMENT_PREFIX}{n:04}{SEGMENT_SUFFIX}")
}

/// The number of a rotated segment's file, `None` for any other name (and
/// for a number beyond `u32`, which tracer never writes). The one test of
/// "is a segment".
pub fn segment_number(name: &str) -> Option<u32> {
    segment_digits(name)?.parse().ok()
}

/// Shaped like a segment's name, whether or not its number fits (one that
/// does not is never read or pruned, only listed).
pub fn segment_shaped(name: &str) -> bool {
    segment_digits(name).is_some()
}

fn segment_digits(name: &str) -> Option<&str> {
    name.strip_prefix(SEGMENT_PREFIX)
        .and_then(|r| r.strip_suffix(SEGMENT_SUFFIX))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}
