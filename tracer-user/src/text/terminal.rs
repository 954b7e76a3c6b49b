//! The terminal escaper: every stderr line tracer prints with process data
//! in it (the summary, snapshot findings, skipped inputs). A CI log is a
//! terminal too: no escape sequence, no line break, no workflow command may
//! reach it from the data.

use super::one_line;

/// Untrusted text inside one stderr line (callers start the line with their
/// own `tracer:` or indent, so it is never first on the line).
pub fn line(s: &str) -> String {
    one_line(s)
}
