//! The text half of report.html: run facts, certificates (verdict-first, as
//! in report.md), near misses, foreign signals, leftovers, other exits and
//! snapshots.
use std::fmt::Write as _;

use super::{esc, rank_css};
use crate::{
    analysis::{
        wording as w, Ancestor, Certificate, CrashRef, HistoryEntry, Killer, OomInfo, ProcRef,
        Victim,
    },
    report::{last_words, Report},
};

/// Certificates beyond this are listed by headline only.
const MAX_CARDS: usize = 200;
/// Signals listed per certificate.
const MAX_ROWS: usize = 500;
/// Groups whose example gets a card; every group gets its row.
const MAX_GROUP_CARDS: usize = 20;

pub(super) fn proc_cell(p: &ProcRef) -> String {
    let never = if p.argv_inherited {
        " <span class=\"note\">(a fork that never exec'd)</span>"
    } else {
        ""
    };
    let outside = if p.in_run {
        ""
    } else {
        " <span class=\"note\">(outside the run)</span>"
    };
    format!(
        "<code>{}</code> <span class=\"pid\">pid {}</span>{never}{outside}",
        esc(&p.command),
        p.pid
    )
}

pub(super) fn ancestry(table: &[Ancestor], id: Option<usize>) -> String {
    super::super::chains::render(table, id, |p| {
        format!(
            "<code>{}</code> ({})",
            esc(&w::short_command(&w::prose_command(p))),
            p.pid
        )
    })
}

fn row(o: &mut String, k: &str, v: &str) {
    let _ = writeln!(o, "<tr><th>{k}</th><td>{v}</td></tr>");
}

pub(super) fn run_facts(o: &mut String, r: &Report) {
    let run = &r.run;
    o.push_str("<table class=\"facts\">\n");
    match run.daemon_phrase(|s| format!("<code>{}</code>", esc(s))) {
        Some(daemon) => row(o, "run", &daemon),
        None => row(
            o,
            "command",
            &format!("<code>{}</code>", esc(&run.command.join(" "))),
        ),
    }
    if let Some(u) = &run.command_user {
        row(o, "user", &esc(u));
    }
    if run.redactions > 0 {
        row(
            o,
            "redacted",
            &esc(&format!(
                "secrets masked as [REDACTED] ({})",
                w::plural(
                    run.redactions as usize,
                    "--redact pattern",
                    "--redact patterns"
                )
            )),
        );
    }
    if !run.env_changes.is_empty() {
        let changes: Vec<String> = run
            .env_changes
            .iter()
            .map(|c| {
                super::super::facts::env_change_phrase(c, |v| format!("<code>{}</code>", esc(v)))
            })
            .collect();
        row(
            o,
            "environment changed by tracer (--tests)",
            &changes.join("<br>"),
        );
    }
    if !run.test_integrations.is_empty() {
        let lines: Vec<String> = run
            .test_integrations
            .iter()
            .map(|l| l.phrase(|v| format!("<code>{}</code>", esc(v)), esc))
            .collect();
        row(o, "test names", &lines.join("<br>"));
    }
    if let Some(s) = &run.command_status {
        row(o, "ended", &esc(&w::status_phrase(s)));
    }
    row(
        o,
        "ran",
        &format!(
            "{} from {}, {}",
            esc(&w::duration(run.duration_ns)),
            esc(&run.started_at),
            w::plural(run.processes, "process", "processes")
        ),
    );
    row(
        o,
        "host",
        &format!(
            "{} ({}, kernel {}, {} mode)",
            esc(&run.hostname),
            esc(&format!("tracer {}", run.captured_by)),
            esc(&run.kernel),
            esc(&run.mode)
        ),
    );
    let c = &r.analysis.counts;
    row(
        o,
        "deaths",
        &format!(
            "<a href=\"#certificates\">{} unexpected, {} non-zero exits, {}{} expected</a>",
            c.unexpected,
            c.nonzero_exit,
            consequences(c.consequence),
            c.expected
        ),
    );
    o.push_str("</table>\n");
}

/// "2 consequences, " when deaths followed from others (none: nothing, so
/// a report without cascades reads as before).
fn consequences(n: usize) -> String {
    if n == 0 {
        return String::new();
    }
    format!(
        "{}, ",
        crate::analysis::wording::plural(n, "consequence", "consequences")
    )
}

pub(super) fn certificates(o: &mut String, r: &Report) {
    let certs = &r.analysis.certificates;
    let _ = writeln!(
        o,
        "<section id=\"certificates\">\n<h2>Death certificates ({})</h2>",
        certs.len()
    );
    if certs.is_empty() {
        o.push_str("<p>No process of the run died abnormally.</p>\n");
    }
    for c in certs.iter().take(MAX_CARDS) {
        card(o, c, &r.analysis.ancestors);
    }
    if certs.len() > MAX_CARDS {
        let _ = writeln!(
            o,
            "<details><summary>{} more certificates (report.json has them all)</summary><ol>",
            certs.len() - MAX_CARDS
        );
        for c in &certs[MAX_CARDS..] {
            let _ = writeln!(
                o,
                "<li id=\"cert-{}\">#{} {}</li>",
                c.id,
                c.id,
                esc(&c.headline)
            );
        }
        o.push_str("</ol></details>\n");
    }
    o.push_str("</section>\n");
}

/// Deaths of one signature (report/groups.rs), as report.md shows them: a
/// row each, the first groups' examples as cards.
pub(super) fn groups(o: &mut String, r: &Report) {
    let groups = &r.analysis.death_groups;
    if groups.is_empty() {
        return;
    }
    let total: usize = groups.iter().map(|g| g.count).sum();
    let _ = writeln!(
        o,
        "<section id=\"groups\">\n<h2>Deaths of one kind, folded ({}, {})</h2>\n\
         <p class=\"note\">Expected stops and non-zero exits that share a signature ({} or more, \
         none in a cascade); the first death of each is its example. report.json lists them \
         under <code>death_groups</code>.</p>\n<table class=\"groups\">\n<tr><th>#</th>\
         <th>rank</th><th>deaths</th><th>death</th><th>first → last</th><th>processes</th></tr>",
        w::plural(groups.len(), "group", "groups"),
        w::plural(total, "death", "deaths"),
        super::super::groups::GROUP_MIN
    );
    for g in groups {
        let _ = writeln!(
            o,
            "<tr class=\"{}\"><td><a href=\"#cert-{}\">#{}</a></td><td>{}</td><td>{}</td>\
             <td><code>{}</code></td><td>{} → {}</td><td>{}</td></tr>",
            rank_css(g.rank),
            g.id,
            g.id,
            esc(&rank_css(g.rank).replace("nonzero", "non-zero exit")),
            g.count,
            esc(&g.signature),
            esc(&g.first_time),
            esc(&g.last_time),
            esc(&super::super::groups::member_list(g))
        );
    }
    o.push_str("</table>\n");
    for g in groups.iter().take(MAX_GROUP_CARDS) {
        card(o, &g.example, &r.analysis.ancestors);
    }
    if groups.len() > MAX_GROUP_CARDS {
        let _ = writeln!(
            o,
            "<p class=\"note\">The other {} groups' examples are in report.json.</p>",
            groups.len() - MAX_GROUP_CARDS
        );
    }
    o.push_str("</section>\n");
}

fn card(o: &mut String, c: &Certificate, anc: &[Ancestor]) {
    card_head(o, c);
    victim_rows(o, &c.victim, anc);
    row(
        o,
        "cause",
        &format!("<code>{}</code>", esc(c.cause.kind.as_str())),
    );
    if let Some(k) = &c.killer {
        killer_rows(o, k, anc);
    }
    if let Some(m) = &c.oom {
        oom_row(o, m);
    }
    if let Some(crash) = &c.crash {
        crash_row(o, crash);
    }
    let ev: Vec<String> = c.evidence.iter().map(u64::to_string).collect();
    row(o, "evidence", &format!("events {}", esc(&ev.join(", "))));
    o.push_str("</table>\n");
    if !c.history.is_empty() {
        history(o, &c.history);
    }
    if let Some(lw) = &c.last_words {
        last_words(o, lw);
    }
    o.push_str("</article>\n");
}

/// The card's opening: its badge and headline, the rank's reason, and the
/// start of its table of facts.
fn card_head(o: &mut String, c: &Certificate) {
    let class = if c.cause.kind == crate::analysis::CauseKind::Oom {
        "oom"
    } else {
        rank_css(c.rank)
    };
    let rank = rank_css(c.rank).replace("nonzero", "non-zero exit");
    let _ = writeln!(
        o,
        "<article class=\"cert {class}\" id=\"cert-{}\" data-pid=\"{}\">\n<h3><span \
         class=\"badge\">#{} {rank}</span> {}</h3>\n<p class=\"reason\">{}</p>\n<table>",
        c.id,
        c.victim.process.pid,
        c.id,
        crate::text::html::inline(&c.headline),
        esc(&c.rank_reason)
    );
}

fn victim_rows(o: &mut String, v: &Victim, anc: &[Ancestor]) {
    row(o, "victim", &proc_cell(&v.process));
    if let Some(f) = &v.process.filename {
        row(o, "executable", &format!("<code>{}</code>", esc(f)));
    }
    row(o, "ancestry", &ancestry(anc, v.ancestry));
    row(
        o,
        "lifetime",
        &format!(
            "{} ({} → {})",
            esc(&w::duration(v.lifetime_ns)),
            esc(&v.started_at),
            esc(&v.ended_at)
        ),
    );
    let core = if v.core_dumped { ", core dumped" } else { "" };
    row(
        o,
        "status",
        &format!("{}{core}", esc(&w::status_phrase(&v.status))),
    );
}

fn killer_rows(o: &mut String, k: &Killer, anc: &[Ancestor]) {
    row(
        o,
        "killer",
        &format!(
            "{} — {}",
            proc_cell(&k.process),
            esc(w::relation_phrase(k.relation))
        ),
    );
    row(o, "killer ancestry", &ancestry(anc, k.ancestry));
    let deliveries = k
        .deliveries
        .filter(|n| *n > 1)
        .map(|n| format!(" — one call, {n} signals"))
        .unwrap_or_default();
    row(
        o,
        "call",
        &format!(
            "<code>{}</code>, aimed at {}{}",
            esc(&k.call),
            esc(&k.aimed_at),
            esc(&deliveries)
        ),
    );
}

/// The OOM kill's memcg, limit and rss, and the process that triggered it.
fn oom_row(o: &mut String, m: &OomInfo) {
    let memcg = m
        .memcg
        .as_ref()
        .map(|g| g.path.clone().unwrap_or_else(|| g.name.clone()))
        .unwrap_or_else(|| "—".into());
    let limit = m
        .limit_bytes
        .map(w::bytes)
        .unwrap_or_else(|| "unknown".into());
    let rss = m
        .rss
        .as_ref()
        .map(|r| w::bytes((r.anon_rss_kb + r.file_rss_kb + r.shmem_rss_kb) * 1024))
        .unwrap_or_else(|| "unknown".into());
    row(
        o,
        "OOM",
        &format!(
            "memcg <code>{}</code>, limit {}, rss {}; trigger (not the culprit): {}",
            esc(&memcg),
            esc(&limit),
            esc(&rss),
            proc_cell(&m.trigger)
        ),
    );
}

fn crash_row(o: &mut String, crash: &CrashRef) {
    let lines: Vec<String> = crash
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| esc(&crate::analysis::frame_line(i, f)))
        .collect();
    row(
        o,
        "crash stack",
        &format!(
            "{}<pre>{}</pre>",
            esc(&crate::analysis::completeness_words(crash)),
            lines.join("\n")
        ),
    );
}

/// The signals the victim received, open when there are few.
fn history(o: &mut String, history: &[HistoryEntry]) {
    let _ = writeln!(
        o,
        "<details{}><summary>Signals received ({})</summary><ol class=\"history\">",
        if history.len() <= 5 { " open" } else { "" },
        history.len()
    );
    for h in history.iter().take(MAX_ROWS) {
        let from = if h.raised_by_kernel {
            "raised by the kernel".to_string()
        } else {
            format!("from {}", proc_cell(&h.sender))
        };
        let _ = writeln!(
            o,
            "<li{}>+{} <b>{}</b> ({}, {}) {from}{}</li>",
            if h.fatal { " class=\"fatal\"" } else { "" },
            esc(&w::duration(h.since_start_ns)),
            esc(&h.signal.sig_name),
            esc(&h.signal.code_name),
            esc(&h.signal.result),
            h.call
                .as_ref()
                .map(|c| format!(" via <code>{}</code>", esc(c)))
                .unwrap_or_default()
        );
    }
    o.push_str("</ol></details>\n");
}

/// The end of the victim's stderr (`report::last_words` says which), every
/// hazard made visible.
fn last_words(o: &mut String, lw: &crate::analysis::LastWordsRef) {
    let Some(shown) = last_words::shown(lw) else {
        return;
    };
    let _ = writeln!(
        o,
        "<details open><summary>Last words ({}, event {})</summary><pre class=\"last-words\">{}</pre></details>",
        esc(&shown.what),
        lw.seq,
        esc(&shown.lines.join("\n"))
    );
}
