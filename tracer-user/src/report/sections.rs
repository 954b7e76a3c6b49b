//! report.md's side sections: near misses, foreign signals, processes left
//! running, and the log's own facts.
use std::{collections::BTreeMap, fmt::Write};

use super::{
    cells::{ancestry, cell, code, proc_cell},
    json::Report,
    last_words, leak,
    loss::loss_line,
};
use crate::{
    analysis::{wording as w, CrashRef, Direction, LastWordsRef},
    text::markdown as md,
};

/// Rows per side table; report.json always has every event.
const MAX_ROWS: usize = 30;

/// Identical rows (same sender, same call, same outcome) are folded into one
/// with a count: a test that fires the same kill 146 times is one finding.
/// Each row comes with the count it already stands for (a near miss is
/// folded in report.json already).
fn fold(rows: impl Iterator<Item = (String, u64, String, u64)>) -> Vec<(String, u64, String, u64)> {
    let mut out: Vec<(String, u64, String, u64)> = Vec::new();
    let mut index: BTreeMap<String, usize> = BTreeMap::new();
    for (key, seq, row, n) in rows {
        match index.get(&key) {
            Some(&i) => out[i].3 += n,
            None => {
                index.insert(key.clone(), out.len());
                out.push((key, seq, row, n));
            }
        }
    }
    out
}

fn table(o: &mut String, header: &str, rows: &[(String, u64, String, u64)]) {
    let _ = writeln!(o, "{header}");
    for (_, seq, row, n) in rows.iter().take(MAX_ROWS) {
        let _ = writeln!(o, "| {seq} | {n} | {row} |");
    }
    if rows.len() > MAX_ROWS {
        let _ = writeln!(
            o,
            "\n… and {} more kinds in report.json.",
            rows.len() - MAX_ROWS
        );
    }
}

pub(super) fn near_misses(o: &mut String, r: &Report) {
    let a = &r.analysis;
    let misses: Vec<_> = a.near_misses.iter().filter(|n| !n.probe).collect();
    let probes: u64 = a
        .near_misses
        .iter()
        .filter(|n| n.probe)
        .map(|n| n.count)
        .sum();
    let left_out = a.near_misses_left_out;
    if misses.is_empty() && probes == 0 && left_out.is_empty() {
        return;
    }
    let _ = writeln!(o, "## Near misses: kill calls that reached nobody\n");
    let rows = fold(misses.iter().filter_map(|n| {
        let sender = a.entry(n.sender_id)?;
        let call = w::call_notation(&n.syscall, n.target_arg, n.tid_arg, &n.sig_name);
        let errno = n.errno.as_deref().unwrap_or("?");
        let row = format!(
            "{} | {} | {} | {} | {}",
            cell(&w::ms(&n.time)),
            proc_cell(sender),
            code(&call),
            cell(&n.aimed_at),
            cell(errno)
        );
        Some((
            format!("{}/{}/{call}/{errno}", sender.pid, sender.start),
            n.seq,
            row,
            n.count,
        ))
    }));
    if !rows.is_empty() {
        let header = "| first seq | times | first at | sender | call | aimed at | error |\n\
                      |---|---|---|---|---|---|---|";
        table(o, header, &rows);
    }
    if probes > 0 {
        let _ = writeln!(
            o,
            "\n{} (signal 0) failed as well; see report.json.",
            w::plural(probes as usize, "liveness probe", "liveness probes")
        );
    }
    if !left_out.is_empty() {
        let kinds = w::plural(
            left_out.entries,
            "more kind of failed call",
            "more kinds of failed calls",
        );
        let verb = if left_out.entries == 1 { "is" } else { "are" };
        let _ = writeln!(
            o,
            "\n{kinds} ({}) {verb} not listed, not even in report.json: it keeps the first {}.",
            w::plural(left_out.events as usize, "call", "calls"),
            crate::analysis::MAX_NEAR_MISSES
        );
    }
    o.push('\n');
}

pub(super) fn foreign(o: &mut String, r: &Report) {
    let list = &r.analysis.foreign_signals;
    if list.is_empty() {
        return;
    }
    let _ = writeln!(o, "## Signals crossing the run's boundary\n");
    let rows = fold(list.iter().map(|f| {
        let dir = match f.direction {
            Direction::RunToOutside => "run → outside",
            Direction::OutsideToRun if f.sender_is_tracer => "tracer → run",
            Direction::OutsideToRun => "outside → run",
        };
        let call = f.call.as_deref().map_or("—".into(), code);
        let row = format!(
            "{dir} | {} | {} | {} | {call} | {}",
            proc_cell(&f.sender),
            proc_cell(&f.target),
            cell(&f.signal.sig_name),
            cell(&f.signal.result)
        );
        let key = format!(
            "{}/{}>{}/{}/{}/{call}/{}",
            f.sender.pid,
            f.sender.start,
            f.target.pid,
            f.target.start,
            f.signal.sig,
            f.signal.result
        );
        (key, f.signal.seq, row, 1)
    }));
    let header = "| first seq | times | direction | from | to | signal | via | result |\n\
                  |---|---|---|---|---|---|---|---|";
    table(o, header, &rows);
    o.push('\n');
}

pub(super) fn leftovers(o: &mut String, r: &Report) {
    let list = &r.analysis.leftovers;
    if list.is_empty() {
        return;
    }
    if list.iter().any(|l| l.leak.is_some()) {
        return leaks(o, r);
    }
    let _ = writeln!(o, "## Still running when the log ended\n");
    if r.log.truncated {
        let _ = writeln!(
            o,
            "_The log is truncated: some of these may have ended after the cut._\n"
        );
    }
    let _ = writeln!(
        o,
        "| process | started | orphaned | ancestry |\n|---|---|---|---|"
    );
    for l in list {
        let orphan = if l.orphaned {
            "**yes** — its parent ended first"
        } else {
            "no"
        };
        let _ = writeln!(
            o,
            "| {} | {} | {orphan} | {} |",
            proc_cell(&l.process),
            l.started_at,
            ancestry(&r.analysis.ancestors, l.ancestry)
        );
    }
    o.push('\n');
}

/// Leftovers with `leak` records: what /proc showed at the command's exit,
/// and which process of the run started each one.
fn leaks(o: &mut String, r: &Report) {
    let _ = writeln!(o, "## Leaked: still running when the command exited\n");
    let _ = writeln!(
        o,
        "| process | spawned by | started | at the command's exit | open fds | ancestry |\n\
         |---|---|---|---|---|---|"
    );
    for l in &r.analysis.leftovers {
        let spawner = l.spawned_by.as_ref().map_or("—".into(), proc_cell);
        let fds = match &l.leak {
            Some(k) => {
                let (listed, more) = leak::fds(k);
                let listed = listed.iter().map(|f| code(f));
                let fds: Vec<String> = listed.chain(more.map(|m| cell(&m))).collect();
                fds.join("<br>")
            }
            None => "—".into(),
        };
        let state = cell(&leak::state(l.leak.as_ref()));
        let ended = cell(&leak::ended(l));
        let _ = writeln!(
            o,
            "| {} | {spawner} | {} | {state}{ended} | {} | {} |",
            proc_cell(&l.process),
            md::text(&w::ms(&l.started_at)),
            if fds.is_empty() { "—".into() } else { fds },
            ancestry(&r.analysis.ancestors, l.ancestry)
        );
    }
    o.push('\n');
}

/// A certificate's last words (`last_words` says which), fenced.
pub(super) fn last_words(o: &mut String, lw: &LastWordsRef) {
    let Some(shown) = last_words::shown(lw) else {
        return;
    };
    let _ = writeln!(
        o,
        "Last words ({}, seq {}):\n",
        md::text(&format!("{}{}", shown.what, shown.null)),
        lw.seq
    );
    let _ = writeln!(o, "{}", md::fence_lines(&shown.lines, "text"));
}

/// A crash's frames, innermost first (names are the binary's: fenced).
pub(super) fn crash_stack(o: &mut String, c: &CrashRef) {
    let fault = c
        .fault
        .as_deref()
        .map(|f| format!(", {f}"))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "Crash stack (seq {}{fault}; {}):\n",
        c.seq,
        crate::analysis::completeness_words(c)
    );
    let mut lines: Vec<String> = c
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| crate::analysis::frame_line(i, f))
        .collect();
    if c.frames_left_out > 0 {
        lines.push(format!("… {} more frames", c.frames_left_out));
    }
    if lines.is_empty() {
        lines.push("(no frame)".into());
    }
    let _ = writeln!(o, "{}", md::fence_lines(&lines, "text"));
}

pub(super) fn log_details(o: &mut String, r: &Report) {
    let _ = writeln!(o, "## The log\n");
    let types: Vec<String> = r
        .log
        .by_type
        .iter()
        .map(|(k, v)| format!("{} {v}", md::text(k)))
        .collect();
    let _ = writeln!(o, "- events: {} ({})", r.log.events, types.join(", "));
    let _ = writeln!(o, "- {}", loss_line(r).replace("**", ""));
    for warning in &r.log.warnings {
        let _ = writeln!(o, "- warning: {}", md::text(warning));
    }
    let _ = writeln!(
        o,
        "- captured by tracer {}, rendered by tracer {}, report schema {}",
        md::text(&r.run.captured_by),
        md::text(&r.rendered_by),
        r.report_schema
    );
    // Collapsed: a reader of a step summary needs the hooks only when one
    // is missing (said at the top). A rung passed over for the next one is
    // how tracer attaches on this kernel, not an error: named, its refusal
    // left to report.json.
    let _ = writeln!(
        o,
        "\n<details><summary>Hooks</summary>\n\n| hook | attached | via | detail |\n|---|---|---|---|"
    );
    for h in &r.run.hooks {
        let detail = match (&h.detail, h.attached) {
            (None, _) => "—".into(),
            (Some(d), true) => cell(&format!(
                "{} passed over, the next way taken: a fallback, not an error (why: report.json, run.hooks)",
                passed_over(d)
            )),
            (Some(d), false) => cell(d),
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {detail} |",
            cell(&h.name),
            if h.attached { "yes" } else { "**no**" },
            h.via.as_deref().map_or("—".into(), cell),
        );
    }
    let _ = writeln!(o, "\n</details>");
}

/// The rungs a hook's detail says were passed over (`fentry: load …;
/// raw_syscalls: …`), by name: `fentry`, `fentry and raw_syscalls`.
fn passed_over(detail: &str) -> String {
    let names: Vec<&str> = detail
        .split("; ")
        .map(|p| p.split_once(": ").map_or(p, |(via, _)| via))
        .collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}
