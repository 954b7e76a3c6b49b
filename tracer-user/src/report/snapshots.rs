//! Hang and cancellation snapshots in the reports: what every process was
//! blocked on, the deadlocks found, first in a hung run's verdict.
use std::fmt::Write as _;

use serde::Serialize;

use crate::{model::Model, snapshot::Snapshot};

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
        .map(|s| {
            // Findings that need the log too (leaked holders, who stopped
            // a process) join the ones taken from /proc alone.
            let facts = crate::analysis::hangs::snapshot_facts(model, s.at.t, &s.snapshot);
            let mut snapshot = s.snapshot.clone();
            snapshot.findings = crate::snapshot::with_log_facts(&s.snapshot, &facts);
            SnapshotReport {
                seq: s.at.seq,
                time: s.at.time.clone(),
                reason: s.reason.clone(),
                snapshot,
            }
        })
        .collect()
}

const LEADS: [&str; 3] = [
    crate::snapshot::HELD_BY_LEAKED,
    crate::snapshot::FROZEN,
    crate::snapshot::STOPPED,
];

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
    // A stuck process's own state (leaked writer, frozen, stopped) says
    // more than the parent waiting on it, so it leads when there is one.
    let lead = s
        .snapshot
        .findings
        .iter()
        .find(|f| LEADS.contains(&f.kind.as_str()))
        .or(s.snapshot.findings.first());
    Some(match lead {
        Some(f) => format!("{what} while blocked: {}", f.detail),
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
        let _ = writeln!(o, "## Snapshot at {} ({why}, event {})\n", s.time, s.seq);
        if s.snapshot.findings.is_empty() {
            let _ = writeln!(o, "No deadlock pattern found.\n");
        }
        for f in &s.snapshot.findings {
            let _ = writeln!(o, "- **{}**: {}", f.kind, f.detail);
        }
        let _ = writeln!(
            o,
            "\n<details><summary>every process and thread</summary>\n\n```"
        );
        o.push_str(crate::snapshot::render_text(&s.snapshot).trim_end());
        let _ = writeln!(o, "\n```\n</details>\n");
    }
}
