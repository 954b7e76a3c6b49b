//! The side findings of report.html: near misses, foreign signals,
//! leftovers, other non-zero exits and snapshots, as tables.
use std::fmt::Write as _;

use super::{
    cards::{ancestry, proc_cell},
    esc,
};
use crate::{
    analysis::{wording as w, Analysis, Direction},
    report::{leak, Report},
};

/// Rows per table.
const MAX_ROWS: usize = 500;

fn table(o: &mut String, id: &str, title: &str, head: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "<section id=\"{id}\">\n<h2>{title} ({})</h2>\n<table class=\"list\"><tr>{}</tr>",
        rows.len(),
        head.iter()
            .map(|h| format!("<th>{h}</th>"))
            .collect::<String>()
    );
    let n = rows.len();
    for r in rows.into_iter().take(MAX_ROWS) {
        let _ = writeln!(
            o,
            "<tr>{}</tr>",
            r.iter()
                .map(|c| format!("<td>{c}</td>"))
                .collect::<String>()
        );
    }
    o.push_str("</table>\n");
    if n > MAX_ROWS {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} more in report.json.</p>",
            n - MAX_ROWS
        );
    }
    o.push_str("</section>\n");
}

pub(super) fn side_findings(o: &mut String, r: &Report) {
    let a = &r.analysis;
    near_misses(o, a);
    foreign(o, a);
    leftovers(o, a);
    other_exits(o, a);
    snapshots(o, r);
}

/// Failed signal calls, with notes for the liveness probes not listed and
/// for the kinds report.json itself left out.
fn near_misses(o: &mut String, a: &Analysis) {
    let probes: u64 = a
        .near_misses
        .iter()
        .filter(|n| n.probe)
        .map(|n| n.count)
        .sum();
    let misses = a
        .near_misses
        .iter()
        .filter(|n| !n.probe)
        .filter_map(|n| Some((n, a.entry(n.sender_id)?)))
        .map(|(n, sender)| {
            // Folded calls: how many, and when the last one was.
            let time = match n.count {
                1 => esc(&n.time),
                c => format!("{} (×{c}, last {})", esc(&n.time), esc(&n.last_time)),
            };
            vec![
                time,
                proc_cell(sender),
                format!(
                    "<code>{}</code>",
                    esc(&w::call_notation(
                        &n.syscall,
                        n.target_arg,
                        n.tid_arg,
                        &n.sig_name
                    ))
                ),
                esc(&n.aimed_at),
                esc(n.errno.as_deref().unwrap_or("failed")),
            ]
        })
        .collect();
    table(
        o,
        "near-misses",
        "Near misses",
        &["time", "sender", "call", "aimed at", "error"],
        misses,
    );
    if probes > 0 {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} (signal 0) not listed.</p>",
            w::plural(
                probes as usize,
                "failed liveness probe",
                "failed liveness probes"
            )
        );
    }
    let left = a.near_misses_left_out;
    if !left.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"note\">{} ({}) not listed, not even in report.json: it keeps the first {}.</p>",
            w::plural(left.entries, "more kind of failed call", "more kinds of failed calls"),
            w::plural(left.events as usize, "call", "calls"),
            crate::analysis::MAX_NEAR_MISSES
        );
    }
}

fn foreign(o: &mut String, a: &Analysis) {
    let foreign = a
        .foreign_signals
        .iter()
        .map(|f| {
            vec![
                esc(&f.signal.time),
                match f.direction {
                    Direction::RunToOutside => "run → outside".to_string(),
                    Direction::OutsideToRun => "outside → run".to_string(),
                },
                proc_cell(&f.sender),
                proc_cell(&f.target),
                format!(
                    "{} <code>{}</code>",
                    esc(&f.signal.sig_name),
                    esc(f.call.as_deref().unwrap_or(""))
                ),
            ]
        })
        .collect();
    table(
        o,
        "foreign",
        "Signals crossing the run's boundary",
        &["time", "direction", "sender", "target", "signal"],
        foreign,
    );
}

fn leftovers(o: &mut String, a: &Analysis) {
    let left = a
        .leftovers
        .iter()
        .map(|l| {
            let fds = match &l.leak {
                Some(k) => {
                    let (listed, more) = leak::fds(k);
                    let listed = listed.iter().map(|f| format!("<code>{}</code>", esc(f)));
                    let fds: Vec<String> = listed.chain(more.map(|m| esc(&m))).collect();
                    fds.join("<br>")
                }
                None => String::new(),
            };
            let state = esc(&leak::state(l.leak.as_ref()));
            let ended = esc(&leak::ended(l));
            vec![
                proc_cell(&l.process),
                l.spawned_by.as_ref().map_or("—".into(), proc_cell),
                esc(&w::ms(&l.started_at)),
                if l.orphaned {
                    "<b>yes — leaked</b>".into()
                } else {
                    "no".into()
                },
                format!("{state}{ended}"),
                if fds.is_empty() { "—".into() } else { fds },
                ancestry(&a.ancestors, l.ancestry),
            ]
        })
        .collect();
    table(
        o,
        "leftovers",
        "Still running when the log ended",
        &[
            "process",
            "spawned by",
            "started",
            "orphaned",
            "state",
            "open fds",
            "ancestry",
        ],
        left,
    );
}

fn other_exits(o: &mut String, a: &Analysis) {
    let exits = a
        .other_exits
        .iter()
        .map(|e| {
            vec![
                format!("<code>{}</code>", esc(&e.program)),
                esc(&w::status_phrase(&e.status)),
                e.count.to_string(),
                format!("<code>{}</code>", esc(&e.example)),
            ]
        })
        .collect();
    table(
        o,
        "other-exits",
        "Other non-zero exits",
        &["program", "status", "count", "example"],
        exits,
    );
}

fn snapshots(o: &mut String, r: &Report) {
    if r.snapshots.is_empty() {
        return;
    }
    o.push_str("<section id=\"snapshots\">\n<h2>Snapshots</h2>\n");
    for s in &r.snapshots {
        let snap = &s.snapshot;
        let _ = writeln!(
            o,
            "<h3>{} at {} (event {})</h3>",
            esc(&s.reason),
            esc(&w::ms(&s.time)),
            s.seq
        );
        if snap.findings.is_empty() {
            o.push_str("<p>No deadlock pattern found.</p>\n");
        } else {
            o.push_str("<ul class=\"findings\">\n");
            for f in &snap.findings {
                let _ = writeln!(
                    o,
                    "<li><b>{}</b> (pid {}): {}</li>",
                    esc(&f.kind),
                    f.pid,
                    esc(&f.detail)
                );
            }
            o.push_str("</ul>\n");
        }
        for n in &snap.notes {
            let _ = writeln!(o, "<p class=\"note\">{}</p>", esc(n));
        }
        // What report.md's block shows, line for line: every thread's
        // wait and syscall, every fd with the processes at its other end.
        let rows = snap
            .processes
            .iter()
            .map(|p| {
                let mut threads: Vec<String> = p
                    .threads
                    .iter()
                    .map(|t| esc(&crate::snapshot::thread_line(t)))
                    .collect();
                if p.threads_left_out > 0 {
                    threads.push(format!("… {} more, not read", p.threads_left_out));
                }
                let mut fds: Vec<String> = p
                    .fds
                    .iter()
                    .map(|f| esc(&crate::snapshot::fd_line(f)))
                    .collect();
                if p.fds_left_out > 0 {
                    fds.push(format!("… {} more, not read", p.fds_left_out));
                }
                let withheld = p
                    .withheld
                    .as_ref()
                    .map(|w| format!("<br><span class=\"note\">withheld: {}</span>", esc(w)))
                    .unwrap_or_default();
                vec![
                    p.pid.to_string(),
                    format!(
                        "<code>{}</code>{withheld}",
                        esc(&if p.argv.is_empty() {
                            p.comm.clone()
                        } else {
                            p.argv.join(" ")
                        })
                    ),
                    esc(&p.state.to_string()),
                    threads.join("<br>"),
                    if fds.is_empty() {
                        "—".into()
                    } else {
                        fds.join("<br>")
                    },
                ]
            })
            .collect();
        let id = format!("snapshot-{}", s.seq);
        table(
            o,
            &id,
            "Processes",
            &[
                "pid",
                "command",
                "state",
                "threads (state, wchan, syscall, stack)",
                "fds (and who holds the other end)",
            ],
            rows,
        );
    }
    o.push_str("</section>\n");
}
