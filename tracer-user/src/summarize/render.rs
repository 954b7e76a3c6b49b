//! The Markdown rendering of a summary: signatures first (unexpected deaths
//! lead), then folded near misses, leaks, and the runs read.
use std::fmt::Write as _;

use super::{Seen, Summary};
use crate::text::markdown as md;

/// Run ids listed per row before "and N more".
const MAX_IDS: usize = 5;

/// Every string here comes from report.json files, which are input like
/// any other: inline code and prose inside table cells, escaped by the one
/// Markdown escaper.
fn code(s: &str) -> String {
    md::cell(&md::code(s))
}

fn cell(s: &str) -> String {
    md::cell(&md::text(s))
}

fn ids(seen: &Seen) -> String {
    let mut v: Vec<String> = seen.run_ids.iter().take(MAX_IDS).map(|i| cell(i)).collect();
    if seen.run_ids.len() > MAX_IDS {
        v.push(format!("and {} more", seen.run_ids.len() - MAX_IDS));
    }
    v.join(", ")
}

fn when(seen: &Seen) -> String {
    if seen.first_seen == seen.last_seen {
        cell(&seen.first_seen)
    } else {
        format!("{} → {}", cell(&seen.first_seen), cell(&seen.last_seen))
    }
}

fn rank_word(rank: &str) -> &str {
    match rank {
        "unexpected" => "**unexpected**",
        "nonzero_exit" => "non-zero exit",
        other => other,
    }
}

pub fn markdown(s: &Summary) -> String {
    let mut o = String::new();
    let n = s.runs.len();
    let _ = writeln!(
        o,
        "# Death signatures across {n} run{}\n",
        if n == 1 { "" } else { "s" }
    );
    let unexpected: Vec<_> = s
        .signatures
        .iter()
        .filter(|g| g.rank == "unexpected")
        .collect();
    if unexpected.is_empty() {
        o.push_str("No unexpected deaths in any run.\n\n");
    } else {
        let hit = s.runs.iter().filter(|r| r.unexpected > 0).count();
        let _ = writeln!(
            o,
            "{hit} of {n} runs lost a process unexpectedly; {} signature{} below, most \
             frequent first.\n",
            unexpected.len(),
            if unexpected.len() == 1 { "" } else { "s" }
        );
    }
    for r in &s.skipped {
        let _ = writeln!(
            o,
            "> skipped {}: {}\n",
            md::code(&r.path),
            md::text(&r.error)
        );
    }

    if !s.signatures.is_empty() {
        o.push_str("## Deaths\n\n");
        o.push_str(
            "| # | rank | runs | deaths | victim | cause | killer | calls | seen | run ids |\n",
        );
        o.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
        for (i, g) in s.signatures.iter().enumerate() {
            let signals = if g.signals.is_empty() {
                String::new()
            } else {
                format!(" ({})", g.signals.join(", "))
            };
            let killer = g.killer_shape.as_deref().map_or("—".to_string(), code);
            let rel = if g.relations.is_empty() {
                String::new()
            } else {
                format!(", {}", cell(&g.relations.join("/")))
            };
            let calls: Vec<String> = g.calls.iter().map(|c| code(c)).collect();
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {}{} | {killer}{rel} | {} | {} | {} |",
                i + 1,
                rank_word(&g.rank),
                g.seen.runs,
                g.seen.count,
                code(&g.victim_shape),
                cell(&g.cause),
                cell(&signals),
                calls.join(" "),
                when(&g.seen),
                ids(&g.seen)
            );
        }
        o.push_str("\nFirst occurrence of each:\n\n");
        for (i, g) in s.signatures.iter().enumerate() {
            let _ = writeln!(o, "{}. {}", i + 1, md::inline(&g.example));
        }
        o.push('\n');
    }

    if !s.near_misses.is_empty() {
        o.push_str("## Near misses (failed kill calls)\n\n");
        o.push_str("| call → error | from | signals | runs | calls | seen | run ids |\n");
        o.push_str("|---|---|---|---|---|---|---|\n");
        for m in &s.near_misses {
            let probe = if m.probe { " (liveness probe)" } else { "" };
            let _ = writeln!(
                o,
                "| {} → {}{probe} | {} | {} | {} | {} | {} | {} |",
                code(&m.call_shape),
                cell(&m.errno),
                code(&m.sender_shape),
                cell(&m.signals.join(", ")),
                m.seen.runs,
                m.seen.count,
                when(&m.seen),
                ids(&m.seen)
            );
        }
        o.push('\n');
    }

    if !s.leaks.is_empty() {
        o.push_str("## Leaked processes (outlived their parent)\n\n");
        o.push_str("| process | runs | count | seen | run ids |\n|---|---|---|---|---|\n");
        for l in &s.leaks {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} |",
                code(&l.process_shape),
                l.seen.runs,
                l.seen.count,
                when(&l.seen),
                ids(&l.seen)
            );
        }
        o.push('\n');
    }

    o.push_str("## Runs\n\n| run | started | host | unexpected | non-zero | verdict |\n");
    o.push_str("|---|---|---|---|---|---|\n");
    for r in &s.runs {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            cell(&r.id),
            cell(&r.started_at),
            cell(&r.hostname),
            r.unexpected,
            r.nonzero_exit,
            md::cell(&md::inline(&r.verdict))
        );
    }
    o
}
