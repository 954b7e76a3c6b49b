//! Table cells of report.md: untrusted text made safe, and a process in
//! one cell.
use crate::{
    analysis::{wording as w, Ancestor, ProcRef},
    text::markdown as md,
};

pub(super) fn proc_cell(p: &ProcRef) -> String {
    let side = if p.in_run { "" } else { ", outside the run" };
    let fork = w::fork_note(p);
    format!(
        "{} ({}{fork}{side})",
        code(&w::short_command(&w::prose_command(p))),
        w::pid_label(p)
    )
}

pub(super) fn ancestry(table: &[Ancestor], id: Option<usize>) -> String {
    super::chains::render(table, id, proc_cell)
}

/// Untrusted text as inline code inside a table cell.
pub(super) fn code(s: &str) -> String {
    md::cell(&md::code(s))
}

/// Untrusted text as prose inside a table cell.
pub(super) fn cell(s: &str) -> String {
    md::cell(&md::text(s))
}
