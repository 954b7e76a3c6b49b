//! A certificate's last words as report.md and report.html show them: the
//! end of the victim's stderr as a terminal showed it (colours and cursor
//! moves removed; report.json and the log keep the bytes), its last lines,
//! and what their heading says of them. Composed here once; each renderer
//! escapes and frames them for its format.
use crate::{
    analysis::{quote, wording as w, LastWordsRef},
    text,
};

/// The last words a report shows.
pub(super) struct Shown {
    /// Their last lines (at most [`quote::SHOWN_LINES`]).
    pub lines: Vec<String>,
    /// What the heading says they are: "stderr", and ", its last 20 lines
    /// of 4,096 bytes" when earlier ones were left out.
    pub what: String,
    /// ", written to /dev/null: no one saw them", or empty.
    pub null: &'static str,
}

/// `None` when they show no line.
pub(super) fn shown(lw: &LastWordsRef) -> Option<Shown> {
    let display = text::display_text(&lw.text);
    let (lines, cut) = quote::tail_lines(&display, quote::SHOWN_LINES);
    if lines.is_empty() {
        return None;
    }
    let earlier = if cut || lw.truncated {
        format!(
            ", its last {} of {}",
            w::plural(lines.len(), "line", "lines"),
            w::plural(lw.bytes_total as usize, "byte", "bytes")
        )
    } else {
        String::new()
    };
    let null = match lw.to_null {
        true => ", written to /dev/null: no one saw them",
        false => "",
    };
    Some(Shown {
        lines: lines.into_iter().map(str::to_string).collect(),
        what: format!("stderr{earlier}"),
        null,
    })
}
