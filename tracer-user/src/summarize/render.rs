//! The Markdown rendering of a summary: signatures first (unexpected deaths
//! lead), then folded near misses, signals across the run's boundary,
//! leaks, and the runs read with their CI context.
use std::fmt::Write as _;

use super::{ForeignFold, LeakFold, MissFold, RunRow, Seen, Signature, Summary};
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

/// `kill(4242) in 6/6 runs: a hard-coded pid?`, one per repeated target.
fn repeated(seen: &Seen) -> String {
    seen.repeated_targets
        .iter()
        .map(|r| format!(" **{}**", md::text(&r.note())))
        .collect()
}

/// The CI context of a run: a link to it, the commit, branch, job and
/// attempt, whichever report.json has.
fn ci(r: &super::RunRow) -> (String, String) {
    let Some(c) = &r.ci else {
        return (cell(&r.id), String::new());
    };
    let id = match &c.run_url {
        // Only http(s) URLs become links; anything else stays text.
        Some(url) if url.starts_with("https://") || url.starts_with("http://") => {
            format!("[{}]({})", cell(&r.id), link_target(url))
        }
        _ => cell(&r.id),
    };
    let mut parts = Vec::new();
    if let Some(commit) = &c.commit {
        let short: String = commit.chars().take(12).collect();
        parts.push(code(&short));
    }
    if let Some(b) = &c.branch {
        parts.push(code(b));
    }
    if let Some(j) = &c.job {
        parts.push(format!("job {}", cell(j)));
    }
    if let Some(a) = &c.attempt {
        parts.push(format!("attempt {}", cell(a)));
    }
    (id, parts.join(" "))
}

/// A URL from a report (anyone's file) as a Markdown link target: every
/// byte but the unreserved and a few reserved ones percent-encoded, so no
/// `)`, `|`, space, bracket or line break can end the link or the cell.
fn link_target(url: &str) -> String {
    let mut o = String::with_capacity(url.len());
    for b in url.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~:/?#@!$&'*+,;=%".contains(&b) {
            o.push(b as char);
        } else {
            let _ = write!(o, "%{b:02X}");
        }
    }
    o
}

fn rank_word(rank: &str) -> &str {
    match rank {
        "unexpected" => "**unexpected**",
        "nonzero_exit" => "non-zero exit",
        "consequence" => "consequence of another death",
        other => other,
    }
}

pub fn markdown(s: &Summary) -> String {
    let mut o = String::new();
    intro(&mut o, s);
    deaths(&mut o, &s.signatures);
    near_misses(&mut o, &s.near_misses);
    foreign_signals(&mut o, &s.foreign_signals);
    leaks(&mut o, &s.leaks);
    runs(&mut o, &s.runs);
    o
}

/// The title, how many runs lost a process unexpectedly, the files skipped.
fn intro(o: &mut String, s: &Summary) {
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
}

/// The death signatures' table, then each one's name and first occurrence.
fn deaths(o: &mut String, signatures: &[Signature]) {
    if !signatures.is_empty() {
        o.push_str("## Deaths\n\n");
        o.push_str(
            "| # | rank | runs | deaths | victim | cause | killer | calls | seen | run ids |\n",
        );
        o.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
        for (i, g) in signatures.iter().enumerate() {
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
                "| {} | {} | {} | {} | {} | {}{} | {killer}{rel} | {}{} | {} | {} |",
                i + 1,
                rank_word(&g.rank),
                g.seen.runs,
                g.seen.count,
                code(&g.victim_shape),
                cell(&g.cause),
                cell(&signals),
                calls.join(" "),
                repeated(&g.seen),
                when(&g.seen),
                ids(&g.seen)
            );
        }
        o.push_str("\nEach signature (its JUnit test case's name) and its first occurrence:\n\n");
        for (i, g) in signatures.iter().enumerate() {
            let _ = writeln!(
                o,
                "{}. {} — {}",
                i + 1,
                md::code(&g.signature),
                md::inline(&g.example)
            );
        }
        o.push('\n');
    }
}

/// The folded near misses (failed kill calls).
fn near_misses(o: &mut String, near_misses: &[MissFold]) {
    if !near_misses.is_empty() {
        o.push_str("## Near misses (failed kill calls)\n\n");
        o.push_str("| call → error | from | signals | runs | calls | seen | run ids |\n");
        o.push_str("|---|---|---|---|---|---|---|\n");
        for m in near_misses {
            let probe = if m.probe { " (liveness probe)" } else { "" };
            let _ = writeln!(
                o,
                "| {} → {}{probe}{} | {} | {} | {} | {} | {} | {} |",
                code(&m.call_shape),
                cell(&m.errno),
                repeated(&m.seen),
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
}

/// The folded signals across the run's boundary.
fn foreign_signals(o: &mut String, foreign_signals: &[ForeignFold]) {
    if !foreign_signals.is_empty() {
        o.push_str("## Signals across the run's boundary\n\n");
        o.push_str("| direction | signal | from | to | calls | runs | count | seen | run ids |\n");
        o.push_str("|---|---|---|---|---|---|---|---|---|\n");
        for f in foreign_signals {
            let direction = match f.direction.as_str() {
                "run_to_outside" => "**run → outside**",
                "outside_to_run" => "outside → run",
                other => other,
            };
            let calls: Vec<String> = f.calls.iter().map(|c| code(c)).collect();
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {}{} | {} | {} | {} | {} |",
                md::cell(direction),
                cell(&f.signal),
                code(&f.sender_shape),
                code(&f.target_shape),
                calls.join(" "),
                repeated(&f.seen),
                f.seen.runs,
                f.seen.count,
                when(&f.seen),
                ids(&f.seen)
            );
        }
        o.push('\n');
    }
}

/// The folded leaked processes.
fn leaks(o: &mut String, leaks: &[LeakFold]) {
    if !leaks.is_empty() {
        o.push_str("## Leaked processes (outlived their parent)\n\n");
        o.push_str("| process | runs | count | seen | run ids |\n|---|---|---|---|---|\n");
        for l in leaks {
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
}

/// The runs read, each with its CI context and verdict.
fn runs(o: &mut String, runs: &[RunRow]) {
    o.push_str("## Runs\n\n| run | started | host | CI | unexpected | non-zero | verdict |\n");
    o.push_str("|---|---|---|---|---|---|---|\n");
    for r in runs {
        let (id, context) = ci(r);
        let _ = writeln!(
            o,
            "| {id} | {} | {} | {context} | {} | {} | {} |",
            cell(&r.started_at),
            cell(&r.hostname),
            r.unexpected,
            r.nonzero_exit,
            md::cell(&md::inline(&r.verdict))
        );
    }
}
