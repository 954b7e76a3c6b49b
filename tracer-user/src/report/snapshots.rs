//! Hang and cancellation snapshots in the reports: what every process was
//! blocked on, the deadlocks found, first in a hung run's verdict.
use std::fmt::Write as _;

use serde::Serialize;

use crate::{model::Model, snapshot::Snapshot, text::markdown as md};

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct SnapshotReport {
    /// The `snapshot` event's sequence number.
    pub seq: u64,
    pub time: String,
    /// `timeout`, `cancelled` or `requested`.
    pub reason: String,
    #[serde(flatten)]
    pub snapshot: Snapshot,
}

pub fn collect(model: &Model) -> Vec<SnapshotReport> {
    model
        .snapshots
        .iter()
        .map(|s| SnapshotReport {
            seq: s.at.seq,
            time: s.at.time.clone(),
            reason: s.reason.clone(),
            snapshot: s.snapshot.clone(),
        })
        .collect()
}

/// Leads the verdict of a run that hung or was cancelled.
pub fn verdict_clause(snaps: &[SnapshotReport]) -> Option<String> {
    let s = snaps
        .iter()
        .find(|s| s.reason == "timeout")
        .or_else(|| snaps.iter().find(|s| s.reason == "cancelled"))?;
    let what = match s.reason.as_str() {
        "timeout" => "Timed out",
        _ => "Cancelled",
    };
    // The detail quotes paths and names as read from /proc: one line here,
    // since the verdict is.
    Some(match s.snapshot.findings.first() {
        Some(f) => format!("{what} while blocked: {}", crate::text::one_line(&f.detail)),
        None => format!("{what}; no deadlock pattern found (see the snapshot)"),
    })
}

pub fn section(o: &mut String, snaps: &[SnapshotReport]) {
    for s in snaps {
        let why = match s.reason.as_str() {
            "timeout" => "--timeout expired",
            "cancelled" => "the tracer was cancelled",
            _ => "SIGUSR1",
        };
        let _ = writeln!(
            o,
            "## Snapshot at {} ({why}, event {})\n",
            md::text(&s.time),
            s.seq
        );
        if s.snapshot.findings.is_empty() {
            let _ = writeln!(o, "No deadlock pattern found.\n");
        }
        for f in &s.snapshot.findings {
            let _ = writeln!(o, "- **{}**: {}", md::text(&f.kind), md::inline(&f.detail));
        }
        let _ = writeln!(
            o,
            "\n<details><summary>every process and thread</summary>\n"
        );
        // render_text escapes what it quotes; the fence outlasts any
        // backtick run left in it.
        let text = crate::snapshot::render_text(&s.snapshot);
        let lines: Vec<String> = text.trim_end().lines().map(str::to_string).collect();
        o.push_str(&md::fence_lines(&lines, ""));
        let _ = writeln!(o, "</details>\n");
    }
}
