//! Hang and cancellation snapshots in the reports: what every process was
//! blocked on, the deadlocks found, first in a hung run's verdict.
use std::fmt::Write as _;

use serde::Serialize;

use crate::{model::Model, snapshot::Snapshot, text::markdown as md};

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct SnapshotReport {
    /// The `snapshot` event's sequence number.
    pub seq: u64,
    /// When it was taken (RFC 3339 UTC).
    pub time: String,
    /// `timeout`, `cancelled` or `requested`.
    pub reason: String,
    /// The run's minute before it: throttling, CPU and pressure, when the
    /// log has resource samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_minute: Option<crate::resources::story::LastMinute>,
    /// The pids the run waits on: from its root (the wrapped command) down
    /// its waits for children, to the first that waits for none. Their
    /// findings lead the list and the verdict. Empty when the root is not
    /// in the snapshot (a daemon's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub holding: Vec<u32>,
    #[serde(flatten)]
    pub snapshot: Snapshot,
}

pub(super) fn collect(model: &Model) -> Vec<SnapshotReport> {
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
                holding: crate::snapshot::holding(&s.snapshot, &facts),
                seq: s.at.seq,
                time: s.at.time.clone(),
                reason: s.reason.clone(),
                last_minute: crate::resources::story::last_minute(&model.resources, s.at.t),
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

/// The snapshot a hung or cancelled run's verdict and next step read: the
/// timeout's, else the cancellation's.
pub(super) fn leading(snaps: &[SnapshotReport]) -> Option<&SnapshotReport> {
    snaps
        .iter()
        .find(|s| s.reason == "timeout")
        .or_else(|| snaps.iter().find(|s| s.reason == "cancelled"))
}

/// Leads the verdict of a run that hung or was cancelled. `stopped_itself`:
/// the "cancellation" was a signal a process of the run sent the tracer.
pub(super) fn verdict_clause(snaps: &[SnapshotReport], stopped_itself: bool) -> Option<String> {
    let s = leading(snaps)?;
    let what = match s.reason.as_str() {
        "timeout" => "Timed out",
        _ if stopped_itself => "Stopped",
        _ => "Cancelled",
    };
    // What the run waits on leads: why a process it waits on is stuck
    // (with who holds the other end of its read). Else a stuck process's
    // own state (leaked writer, frozen, stopped) says more than the
    // parent waiting on it, so it leads when there is one.
    let findings = &s.snapshot.findings;
    let lead = findings
        .iter()
        .find(|f| {
            s.holding.contains(&f.pid) && crate::snapshot::STUCK_KINDS.contains(&f.kind.as_str())
        })
        .or_else(|| findings.iter().find(|f| LEADS.contains(&f.kind.as_str())))
        .or(findings.first());
    // Starved (CPU-throttled, stalled): a few words, first.
    let starved = s
        .last_minute
        .as_ref()
        .and_then(super::resources::starved_clause);
    Some(match (lead, starved) {
        // The detail quotes paths and names as read from /proc: one line
        // here, since the verdict is.
        (Some(f), starved) => format!(
            "{what}{} while blocked: {}",
            starved.map(|s| format!(", {s},")).unwrap_or_default(),
            crate::text::one_line(&f.detail)
        ),
        (None, Some(starved)) => {
            format!("{what}, {starved}; no deadlock pattern found (see the snapshot)")
        }
        (None, None) => format!("{what}; no deadlock pattern found (see the snapshot)"),
    })
}

pub(super) fn section(o: &mut String, snaps: &[SnapshotReport]) {
    for s in snaps {
        let why = match s.reason.as_str() {
            "timeout" => "--timeout expired",
            "cancelled" => "the tracer was cancelled",
            _ => "SIGUSR1",
        };
        let _ = writeln!(
            o,
            "## Snapshot at {} ({why}, event {})\n",
            md::text(&crate::analysis::wording::ms(&s.time)),
            s.seq
        );
        if let Some(m) = &s.last_minute {
            let phrase = super::resources::last_minute_phrase(m);
            let _ = writeln!(o, "Resources {}.\n", md::inline(&phrase));
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        snapshot::{FdEntry, FdKind, Finding, Holder, ProcSnapshot, SyscallState, ThreadSnapshot},
        text::invariants,
    };

    /// A snapshot whose every /proc string is `s`.
    fn snap(s: &str) -> SnapshotReport {
        let holder = Holder {
            pid: 7,
            comm: s.into(),
            fd: 4,
            access: None,
        };
        let p = ProcSnapshot {
            pid: 7,
            start_ns: 1,
            ppid: 1,
            pgid: 7,
            sid: 7,
            comm: s.into(),
            argv: vec![s.into(), s.into()],
            exe: Some(s.into()),
            state: 'S',
            threads: vec![ThreadSnapshot {
                tid: 7,
                comm: s.into(),
                state: 'S',
                wchan: Some(s.into()),
                stack: vec![s.into()],
                syscall: SyscallState::Syscall {
                    nr: 0,
                    name: Some(s.into()),
                    args: [0; 6],
                },
            }],
            fds: vec![
                FdEntry {
                    fd: 3,
                    target: s.into(),
                    access: None,
                    kind: FdKind::Pipe {
                        inode: 9,
                        holders: vec![holder.clone()],
                    },
                },
                FdEntry {
                    fd: 5,
                    target: s.into(),
                    access: None,
                    kind: FdKind::Unix {
                        inode: 10,
                        sock_type: s.into(),
                        name: Some(s.into()),
                        peer: Some(11),
                        peer_holders: vec![holder],
                    },
                },
            ],
            frozen: Some(s.into()),
            withheld: None,
            argv_truncated: false,
            threads_left_out: 0,
            fds_left_out: 0,
            vanished: false,
        };
        SnapshotReport {
            holding: Vec::new(),
            seq: 1,
            time: "t".into(),
            reason: "timeout".into(),
            last_minute: None,
            snapshot: Snapshot {
                processes: vec![p],
                findings: vec![Finding {
                    kind: "orphaned".into(),
                    pid: 7,
                    tid: None,
                    detail: format!("pid 7 ({s}) has ppid 1"),
                    fds: Vec::new(),
                    related_pids: Vec::new(),
                }],
                notes: vec![s.into()],
            },
        }
    }

    #[test]
    fn hostile_proc_strings_stay_inside_the_snapshot_block() {
        let plain = {
            let mut o = String::new();
            section(&mut o, &[snap("x")]);
            o
        };
        for s in [
            "a\n```\n# pwned\n<h1>x</h1>",
            "\x1b[31m`|`\r::error::x",
            "````````````",
            "\n::set-output name=a::b\n##[error]c",
            "\u{202e}</details><script>",
        ] {
            let mut o = String::new();
            section(&mut o, &[snap(s)]);
            let v = invariants::markdown(&o);
            assert!(v.is_empty(), "{s:?}: {v:?}\n{o}");
            assert_eq!(
                invariants::skeleton(&o),
                invariants::skeleton(&plain),
                "{s:?}\n{o}"
            );
            let verdict = verdict_clause(&[snap(s)], false).unwrap();
            assert!(!verdict.contains('\n'), "{verdict}");
        }
    }
}
