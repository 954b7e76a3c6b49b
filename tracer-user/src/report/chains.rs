//! Ancestry chains as Markdown and HTML show them: the nearest few, then
//! "… N more", then the farthest (the run root). A deep recursion would
//! otherwise repeat its whole chain in every certificate and leftover row.
use crate::analysis::{chain, Ancestor, ProcRef};

/// Nearest ancestors shown before the chain is cut.
pub(super) const MAX_SHOWN: usize = 6;

/// One cell's worth of a chain, each part rendered by `cell`: parent first,
/// joined by " ← ", "—" when there is no ancestor.
pub(super) fn render(
    table: &[Ancestor],
    id: Option<usize>,
    cell: impl Fn(&ProcRef) -> String,
) -> String {
    let mut parts = Vec::new();
    let mut omitted = 0usize;
    let mut last = None;
    for (i, p) in chain(table, id).enumerate() {
        if i < MAX_SHOWN {
            parts.push(cell(p));
        } else {
            // The farthest is kept aside: only the ones between are counted.
            omitted += usize::from(last.is_some());
            last = Some(p);
        }
    }
    if parts.is_empty() {
        return "—".into();
    }
    if omitted > 0 {
        parts.push(format!("… {omitted} more"));
    }
    if let Some(p) = last {
        parts.push(cell(p));
    }
    parts.join(" ← ")
}
