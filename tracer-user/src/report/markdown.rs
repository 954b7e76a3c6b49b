//! report.md: the verdict on the first line, a paragraph per certificate,
//! details below, and the loss line always.
use std::fmt::Write;

use super::{
    cells::{ancestry, cell, code, proc_cell},
    json::Report,
    loss::loss_line,
    sections,
};
use crate::{
    analysis::{
        terminal_key, timer_source,
        wording::{self as w, proc_phrase, relation_phrase},
        Analysis, Ancestor, Certificate, HistoryEntry, Killer, OomInfo, ProcRef, Rank, Victim,
    },
    text::markdown as md,
};

/// Certificates rendered in full; the rest get one table row each.
const MAX_DETAILED: usize = 25;
/// Groups whose example is rendered in full; every group gets its row.
const MAX_GROUP_EXAMPLES: usize = 5;

fn rank_name(r: Rank) -> &'static str {
    match r {
        Rank::Unexpected => "Unexpected",
        Rank::NonzeroExit => "Non-zero exit",
        Rank::Consequence => "Consequence",
        Rank::Expected => "Expected",
    }
}

pub(super) fn render(r: &Report) -> String {
    let mut o = String::new();
    let a = &r.analysis;
    // Writing to a String cannot fail; `let _ =` keeps that out of the way.
    head(&mut o, r);
    run_facts(&mut o, r);
    deaths_line(&mut o, a);
    // A hung run: what it was blocked on comes before everything else.
    super::snapshots::section(&mut o, &r.snapshots);
    if let Some(res) = &r.resources {
        super::resources::section(&mut o, res);
    }
    certificates(&mut o, a);
    groups(&mut o, a);
    other_exits(&mut o, a);
    sections::near_misses(&mut o, r);
    sections::foreign(&mut o, r);
    sections::leftovers(&mut o, r);
    sections::log_details(&mut o, r);
    let _ = writeln!(
        o,
        "\n<details><summary>How deaths are ranked</summary>\n\n{}\n\n</details>",
        md::inline(&r.ranking_rule)
    );
    o
}

/// The verdict, what followed from its root causes, and what to do next.
fn head(o: &mut String, r: &Report) {
    // `head -n 1 report.md` is a CI summary: one line, whatever the data.
    let _ = writeln!(o, "{}\n", md::inline(&r.verdict));
    // The chains the verdict's root causes started, one line each, right
    // under it: what followed, without reading on.
    for line in super::verdict::then_lines(&r.analysis) {
        let _ = writeln!(o, "{}\n", md::inline(&line));
    }
    // What to do next, when the class is certain (next_step.rs).
    if let Some(n) = &r.next_step {
        let _ = writeln!(o, "**Next:** {}\n", md::inline(&n.line));
    }
}

/// The run's facts, a line each (two trailing spaces: a Markdown line
/// break), then the loss line, missing hooks, and a trailer that does not
/// count what the log holds.
fn run_facts(o: &mut String, r: &Report) {
    let _ = writeln!(o, "{}  ", run_line(r));
    if !r.run.env_changes.is_empty() {
        let changes: Vec<String> = r
            .run
            .env_changes
            .iter()
            .map(|c| super::facts::env_change_phrase(c, md::code))
            .collect();
        let _ = writeln!(
            o,
            "**Environment changed by tracer (--tests):** {}  ",
            changes.join("; ")
        );
    }
    for l in &r.run.test_integrations {
        let _ = writeln!(o, "**Test names:** {}  ", l.phrase(md::code, md::text));
    }
    let _ = writeln!(o, "{}  ", loss_line(r));
    if !r.run.hooks_missing.is_empty() {
        let _ = writeln!(
            o,
            "**Hooks missing:** {}  ",
            md::text(&r.run.hooks_missing.join(", "))
        );
    }
    for warning in r
        .log
        .warnings
        .iter()
        .filter(|w| w.starts_with("the trailer"))
    {
        let _ = writeln!(o, "**Warning:** {}  ", md::text(warning));
    }
}

/// The deaths counted by rank, and the other non-zero exits grouped.
fn deaths_line(o: &mut String, a: &Analysis) {
    // Consequences are named only when there are some: a report without a
    // cascade reads as it always did.
    let consequences = match a.counts.consequence {
        0 => String::new(),
        n => format!(
            ", {} (not counted again)",
            w::plural(n, "consequence", "consequences")
        ),
    };
    let _ = writeln!(
        o,
        "**Deaths:** {} unexpected, {}{consequences}, {} expected; {} grouped below.\n",
        a.counts.unexpected,
        w::plural(
            a.counts.nonzero_exit,
            "worker non-zero exit",
            "worker non-zero exits"
        ),
        a.counts.expected,
        w::plural(
            a.other_exits.iter().map(|g| g.count).sum::<usize>(),
            "other non-zero exit",
            "other non-zero exits"
        ),
    );
}

/// The certificates, ranked: the first [`MAX_DETAILED`] in full, a table
/// row for each of the rest.
fn certificates(o: &mut String, a: &Analysis) {
    if a.certificates.is_empty() {
        return;
    }
    // The rule is long (1,200 characters): one line here, the whole of
    // it at the end, collapsed.
    let _ = writeln!(
        o,
        "## Death certificates\n\n_Ranked: unexpected deaths, then non-zero exits, then \
         their consequences, then expected stops (the rule: at the end, and docs/report.md, \
         \"Ranking\")._\n"
    );
    for c in a.certificates.iter().take(MAX_DETAILED) {
        certificate(o, c, a);
    }
    // A cancelled `make -j` can leave hundreds of expected deaths: past
    // the first few, one line each keeps the report readable.
    if a.certificates.len() > MAX_DETAILED {
        let _ = writeln!(o, "### More certificates (details in report.json)\n");
        let _ = writeln!(o, "| # | rank | death |\n|---|---|---|");
        for c in &a.certificates[MAX_DETAILED..] {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                c.id,
                rank_name(c.rank),
                md::cell(&md::inline(&c.headline))
            );
        }
        o.push('\n');
    }
}

fn other_exits(o: &mut String, a: &Analysis) {
    if a.other_exits.is_empty() {
        return;
    }
    let _ = writeln!(o, "## Other non-zero exits\n");
    let _ = writeln!(
        o,
        "| program | status | count | example | pids |\n|---|---|---|---|---|"
    );
    for g in &a.other_exits {
        let pids: Vec<String> = g.pids.iter().map(u32::to_string).collect();
        let more = if g.count > g.pids.len() { ", …" } else { "" };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {}{more} |",
            code(&g.program),
            cell(&w::status_phrase(&g.status)),
            g.count,
            code(&g.example),
            pids.join(", ")
        );
    }
    o.push('\n');
}

/// Deaths of one signature (report/groups.rs): a row each, then the first
/// few groups' examples in full.
fn groups(o: &mut String, a: &Analysis) {
    if a.death_groups.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "## Deaths of one kind, folded\n\n_Expected stops and non-zero exits that share a \
         signature ({} or more, none in a cascade): the first death is the example \
         (`#`), report.json lists them under `death_groups`._\n",
        super::groups::GROUP_MIN
    );
    let _ = writeln!(
        o,
        "| # | rank | deaths | death | first → last | processes |\n|---|---|---|---|---|---|"
    );
    for g in &a.death_groups {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} → {} | {} |",
            g.id,
            rank_name(g.rank),
            g.count,
            code(&g.signature),
            cell(&w::ms(&g.first_time)),
            cell(&w::ms(&g.last_time)),
            cell(&super::groups::member_list(g))
        );
    }
    o.push('\n');
    for g in a.death_groups.iter().take(MAX_GROUP_EXAMPLES) {
        certificate(o, &g.example, a);
    }
    if a.death_groups.len() > MAX_GROUP_EXAMPLES {
        let _ = writeln!(o, "_The other groups' examples are in report.json._\n");
    }
}

fn run_line(r: &Report) -> String {
    // A daemon has no command of its own: it says what it watched and how
    // many commands it saw start.
    let what = r.run.daemon_phrase(md::code).unwrap_or_else(|| {
        let cmd = if r.run.command.is_empty() {
            r.run
                .root
                .as_ref()
                .map_or("(no command)".to_string(), |p| p.command.clone())
        } else {
            r.run.command.join(" ")
        };
        let status = r
            .run
            .command_status
            .as_ref()
            .map_or("did not finish in the log".into(), w::status_phrase);
        format!("{} {}", md::code(&cmd), md::text(&status))
    });
    let pid_ns = r.run.pid_namespace.map_or(String::new(), |ns| {
        format!(
            " · pids as seen in pid namespace {} (level {})",
            ns.inum, ns.level
        )
    });
    format!(
        "**Run:** {what} after {} · {} processes · {} mode{} · kernel {} · host {} · started {}{}{pid_ns}",
        w::duration(r.run.duration_ns),
        r.run.processes,
        md::text(&r.run.mode),
        r.run
            .command_user
            .as_ref()
            .map_or(String::new(), |u| format!(" · ran as {}", md::text(u))),
        md::text(&r.run.kernel),
        md::text(&r.run.hostname),
        md::text(&w::ms(&r.run.started_at)),
        redacted_note(r.run.redactions),
    )
}

/// Tells a reader that `[REDACTED]` in the report is deliberate.
fn redacted_note(patterns: u32) -> String {
    if patterns == 0 {
        return String::new();
    }
    format!(
        " · secrets masked as [REDACTED] ({})",
        w::plural(patterns as usize, "--redact pattern", "--redact patterns")
    )
}

fn certificate(o: &mut String, c: &Certificate, a: &Analysis) {
    let anc = &a.ancestors[..];
    let rank = rank_name(c.rank);
    let v = &c.victim;
    let _ = writeln!(
        o,
        "### {}. {rank}: {}\n",
        c.id,
        md::inline(&proc_phrase(&v.process))
    );
    let _ = writeln!(
        o,
        "{}. _{}._\n",
        md::inline(&c.headline),
        md::inline(&c.rank_reason)
    );
    if let Some(then) = crate::analysis::cascade::then_line(&a.certificates, c) {
        let _ = writeln!(o, "{}\n", md::inline(&then));
    }
    let _ = writeln!(o, "| | |\n|---|---|");
    victim_rows(o, v, anc);
    if let Some(k) = &c.killer {
        killer_rows(o, k, anc);
    }
    // The kernel path behind the death (cgroup.kill, an rlimit, seccomp...).
    if let Some(m) = &c.cause.mechanism {
        let who = m
            .process
            .as_ref()
            .map(|p| format!(" · {}", proc_cell(p)))
            .unwrap_or_default();
        let _ = writeln!(o, "| mechanism | {}{who} |", cell(&m.detail));
    }
    if let Some(m) = &c.oom {
        oom_rows(o, m);
    }
    let seqs: Vec<String> = c.evidence.iter().map(u64::to_string).collect();
    let _ = writeln!(o, "| evidence (seq) | {} |\n", seqs.join(", "));
    if !c.history.is_empty() {
        history_table(o, &c.history);
    }
    if let Some(lw) = &c.last_words {
        sections::last_words(o, lw);
    }
    if let Some(crash) = &c.crash {
        sections::crash_stack(o, crash);
    }
}

/// The victim's rows: who, what it ran, its ancestry, life, status, test.
fn victim_rows(o: &mut String, v: &Victim, anc: &[Ancestor]) {
    let _ = writeln!(o, "| victim | {} |", proc_cell(&v.process));
    full_command(o, "command", &v.process);
    if let Some(f) = &v.process.filename {
        let _ = writeln!(o, "| executable | {} |", code(f));
    }
    if v.execs.len() > 1 {
        let all: Vec<String> = v.execs.iter().map(|e| code(&e.argv.join(" "))).collect();
        let _ = writeln!(o, "| execs | {} |", all.join(" → "));
    }
    let _ = writeln!(o, "| ancestry | {} |", ancestry(anc, v.ancestry));
    let _ = writeln!(
        o,
        "| lifetime | {} (started {}, ended {}) · {} · {} |",
        w::duration(v.lifetime_ns),
        md::text(&w::ms(&v.started_at)),
        md::text(&w::ms(&v.ended_at)),
        w::plural(v.children, "child", "children"),
        w::plural(v.threads, "thread", "threads")
    );
    let core = if v.core_dumped { ", core dumped" } else { "" };
    let _ = writeln!(
        o,
        "| status (as the parent saw it) | {}{core} |",
        cell(&w::status_phrase(&v.status))
    );
    if let Some(t) = &v.test {
        let _ = writeln!(o, "| victim's test | {} |", test_cell(t));
    }
}

/// The killer's rows: who, its command, ancestry and test, and the call.
fn killer_rows(o: &mut String, k: &Killer, anc: &[Ancestor]) {
    let _ = writeln!(
        o,
        "| killer | {}, tid {}, {} |",
        proc_cell(&k.process),
        k.tid,
        relation_phrase(k.relation)
    );
    full_command(o, "killer command", &k.process);
    let _ = writeln!(o, "| killer ancestry | {} |", ancestry(anc, k.ancestry));
    if let Some(t) = &k.test {
        let _ = writeln!(o, "| killer's test | {} |", test_cell(t));
    }
    let deliveries = k
        .deliveries
        .map(|d| format!(", {}", w::plural(d as usize, "delivery", "deliveries")));
    let call = if k.syscall.is_some() {
        code(&k.call)
    } else {
        cell(&k.call)
    };
    let _ = writeln!(
        o,
        "| call | {call} aimed at {}{} |",
        cell(&k.aimed_at),
        deliveries.unwrap_or_default()
    );
}

/// An OOM kill's rows: memcg, limit, rss, score, and the allocating task.
fn oom_rows(o: &mut String, m: &OomInfo) {
    if let Some(mc) = &m.memcg {
        let _ = writeln!(
            o,
            "| memcg | {} (id {}) |",
            code(mc.path.as_deref().unwrap_or(&mc.name)),
            mc.id
        );
    }
    let limit = m.limit_bytes.map_or("unknown".to_string(), w::bytes);
    let _ = writeln!(o, "| memory limit | {limit} |");
    if let Some(rss) = &m.rss {
        let _ = writeln!(
            o,
            "| rss at kill | anon {} · file {} · shmem {} · vm {} · page tables {} |",
            w::bytes(rss.anon_rss_kb * 1024),
            w::bytes(rss.file_rss_kb * 1024),
            w::bytes(rss.shmem_rss_kb * 1024),
            w::bytes(rss.total_vm_kb * 1024),
            w::bytes(rss.pgtables_kb * 1024)
        );
    }
    if let Some(g) = &m.memory {
        let _ = writeln!(
            o,
            "| memory before the kill | {} |",
            super::resources::growth_phrase(g)
        );
    }
    if let Some(adj) = m.oom_score_adj {
        let _ = writeln!(o, "| oom_score_adj | {adj} |");
    }
    let who = if m.trigger_is_victim {
        " (the victim itself)"
    } else {
        ""
    };
    let _ = writeln!(
        o,
        "| allocating task | {}{who} — it triggered the OOM killer by allocating; it is **not** \
         the culprit |",
        proc_cell(&m.trigger)
    );
}

/// The signals the victim received, oldest first, as a table.
fn history_table(o: &mut String, history: &[HistoryEntry]) {
    let _ = writeln!(o, "Signals received, oldest first:\n");
    let _ = writeln!(
        o,
        "| after start | signal | from | via | result |\n|---|---|---|---|---|"
    );
    for h in history {
        let fatal = if h.fatal { " **(fatal)**" } else { "" };
        let (sig, si_code) = (h.signal.sig, h.signal.code);
        let from = match (h.relation, timer_source(sig, si_code)) {
            (Some(rel), _) => format!("{}, {}", proc_cell(&h.sender), relation_phrase(rel)),
            (None, Some(which)) => format!("its own timer ({})", cell(which)),
            (None, None) => match terminal_key(sig, si_code, h.signal.group) {
                Some(key) => format!("its terminal ({})", cell(key)),
                None => format!("the kernel (while {} ran)", proc_cell(&h.sender)),
            },
        };
        let _ = writeln!(
            o,
            "| +{} | {} ({}){fatal} | {from} | {} | {} |",
            w::duration(h.since_start_ns),
            cell(&h.signal.sig_name),
            cell(&h.signal.code_name),
            h.call.as_deref().map_or("—".into(), code),
            cell(&h.signal.result)
        );
    }
    o.push('\n');
}

/// The whole command line, when the abbreviated one left out more than the
/// program's directory (flags, the middle of a path, a cut tail).
fn full_command(o: &mut String, label: &str, p: &ProcRef) {
    let Some((prog, rest)) = p.argv.split_first() else {
        return;
    };
    let plain = std::iter::once(crate::text::command::program(prog))
        .chain(rest.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    if w::short_command(&w::prose_command(p)) != plain {
        let _ = writeln!(o, "| {label} | {} |", code(&p.command));
    }
}

/// A test for a details table: the phrase, how the process ran it, and its
/// source ("spawned by pid 4240, thread 4243 · from argv/env").
fn test_cell(t: &crate::labels::TestAt) -> String {
    let how = match (t.via, t.spawned_by) {
        (crate::labels::Via::Spawned, Some(b)) => {
            format!(" · spawned by pid {}, thread {}", b.pid, b.tid)
        }
        _ => String::new(),
    };
    let source = match t.test.source {
        crate::labels::Source::Exact => "exact (kernel-stamped), name declared by the test",
        crate::labels::Source::ArgvEnv => "from argv/env",
        crate::labels::Source::Approximate => match t.test.uncertainty_ms {
            Some(n) => &format!("approximate (runner report, ±{n} ms)"),
            None => "approximate",
        },
    };
    md::cell(&md::inline(&format!("{}{how} · {source}", t.phrase())))
}
