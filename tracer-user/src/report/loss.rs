//! The loss line: always present, in report.md and the stderr summary.
use super::{json::Report, verdict::skipped_lines};
use crate::analysis::wording as w;

/// Always present, whatever the loss: a reader must never have to guess.
/// An OTLP export made with this rendering says how it went.
pub(crate) fn loss_line(r: &Report) -> String {
    let mut line = capture_loss(r);
    if let Some(x) = &r.log.export {
        line.push(' ');
        line.push_str(&export_sentence(x));
    }
    line
}

fn export_sentence(x: &crate::otlp::ExportFacts) -> String {
    let records = w::plural(x.records as usize, "record", "records");
    if x.undelivered == 0 {
        return format!("OTLP export: {records}, all delivered.");
    }
    format!(
        "**OTLP export: {} of {records} not delivered** ({}).",
        x.undelivered,
        x.error.as_deref().unwrap_or("unknown error")
    )
}

fn capture_loss(r: &Report) -> String {
    let mut line = capture_loss_only(r);
    let l = &r.log;
    // Marks past a thread's rate cost test labels, not events: said apart.
    if l.lost.marks_dropped > 0 {
        line.push_str(&format!(
            " {} over the per-thread rate, not sent (labels of the tests that wrote them may be missing).",
            w::plural(l.lost.marks_dropped as usize, "test mark", "test marks")
        ));
    }
    if l.lines_skipped > 0 {
        line.push_str(&format!(
            " **{}** when reading the log: what it held is missing.",
            skipped_lines(l.lines_skipped)
        ));
    }
    line
}

fn capture_loss_only(r: &Report) -> String {
    let l = &r.log;
    let lost = l.lost.total();
    if l.truncated {
        format!(
            "**Loss: unknown — the log is truncated** (no trailer; capture was interrupted). {} \
             events read; {} counted lost before the cut.",
            l.events, lost
        )
    } else if lost > 0 {
        format!(
            "**Loss: {} events lost** ({}) of {} written — this report may be missing deaths or \
             senders.",
            lost,
            l.lost.breakdown(),
            l.events
        )
    } else if l.lost.crash_ring_full > 0 {
        format!(
            "**Loss:** none — {} events, 0 lost; {} without its stack (crash ring full).",
            l.events,
            w::plural(l.lost.crash_ring_full as usize, "crash", "crashes"),
        )
    } else if l.lost.user_read_failed > 0 {
        let n = l.lost.user_read_failed as usize;
        format!(
            "**Loss:** none — {} events, 0 lost; the text of {} is missing (unreadable process \
             memory).",
            l.events,
            w::plural(
                n,
                "stderr write or command line",
                "stderr writes or command lines"
            ),
        )
    } else {
        format!("**Loss:** none — {} events, 0 lost.", l.events)
    }
}
