//! report.html: the report for people, as one self-contained page (inline
//! CSS, a few lines of JS, inline SVG; nothing fetched). A timeline of the
//! processes that matter, then the certificates and side findings, all from
//! the same [`Report`] as report.json, so the two never disagree. Every text
//! is escaped (argv is attacker-controlled); the output is deterministic.
mod cards;
mod findings;
mod lanes;
mod marks;
mod resources;
mod scale;
mod timeline;

use std::fmt::Write as _;

use super::Report;
use crate::{analysis::Rank, eventlog::EventLog, model::Model};

const STYLE: &str = include_str!("html/style.css");
const SCRIPT: &str = include_str!("html/script.js");

/// What the timeline needs beyond report.json (model/positions.rs).
pub use crate::model::Positions as Context;

impl Context {
    pub fn from_log(log: &EventLog, r: &Report) -> Context {
        Self::from_model(&Model::build(log), r)
    }

    /// Only what `r` can draw: the processes it names (every lane is one of
    /// them or one of their ancestors) and the seqs of its near misses and
    /// snapshots. A copy of every process's end and parent, and of every
    /// kill call's seq, was a fifth of a big log's report memory.
    pub fn from_model(m: &Model, r: &Report) -> Context {
        let mut cx = Context::default();
        let mut keep = |p: &crate::analysis::ProcRef| {
            cx.note(
                m,
                crate::eventlog::ProcKey {
                    pid: p.pid,
                    start: p.start,
                },
            )
        };
        let a = &r.analysis;
        r.run.root.iter().for_each(&mut keep);
        for c in a.shown_certificates() {
            keep(&c.victim.process);
            if let Some(k) = &c.killer {
                keep(&k.process);
            }
            c.history.iter().for_each(|h| keep(&h.sender));
        }
        a.leftovers.iter().for_each(|l| keep(&l.process));
        a.near_misses
            .iter()
            .filter_map(|n| a.entry(n.sender_id))
            .for_each(&mut keep);
        for f in &a.foreign_signals {
            keep(&f.sender);
            keep(&f.target);
        }
        a.ancestors.iter().for_each(|x| keep(&x.process));
        // As before: a later record with the same seq wins, snapshots last.
        let wanted: std::collections::BTreeSet<u64> = a
            .near_misses
            .iter()
            .map(|n| n.seq)
            .chain(r.snapshots.iter().map(|s| s.seq))
            .collect();
        for kc in &m.kill_calls {
            if wanted.contains(&kc.ev.at.seq) {
                cx.note_seq(kc.ev.at.seq, kc.ev.at.t);
            }
        }
        for s in &m.snapshots {
            if wanted.contains(&s.at.seq) {
                cx.note_seq(s.at.seq, s.at.t);
            }
        }
        cx
    }
}

/// The one HTML escaper lives with the others (`text::html`).
pub use crate::text::html::esc;

/// The whole page.
pub fn render(r: &Report, cx: &Context) -> String {
    let mut o = String::with_capacity(64 * 1024);
    let outbound = r.analysis.foreign_signals.iter().any(|f| f.outbound_kill);
    let verdict_class = banner(r, outbound);
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n\
         <title>tracer: {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<header>\n\
         <h1 id=\"verdict\" class=\"verdict {verdict_class}\">{}</h1>\n",
        esc(&crate::analysis::wording::short_command(&r.verdict)),
        crate::text::html::inline(&r.verdict)
    );
    if let Some(n) = &r.next_step {
        let _ = writeln!(
            o,
            "<p class=\"next-step\"><strong>Next:</strong> {}</p>",
            crate::text::html::inline(&n.line)
        );
    }
    let loss = super::loss::loss_line(r).replace("**", "");
    let undelivered = r.log.export.as_ref().is_some_and(|x| x.undelivered > 0);
    let loss_class = if r.log.complete && !undelivered {
        "loss"
    } else {
        "loss warn"
    };
    let _ = writeln!(o, "<p class=\"{loss_class}\">{}</p>", esc(&loss));
    if !r.run.hooks_missing.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"loss warn\">Hooks missing: {}</p>",
            esc(&r.run.hooks_missing.join(", "))
        );
    }
    for wmsg in &r.log.warnings {
        let _ = writeln!(o, "<p class=\"warn\">{}</p>", esc(wmsg));
    }
    o.push_str("</header>\n<main>\n");

    let (svg, left_out, scale) = timeline::svg(r, cx);
    o.push_str(
        "<section id=\"timeline\">\n<h2>Timeline</h2>\n<p class=\"legend\">\
         <span class=\"k unexpected\">✕ unexpected death</span> \
         <span class=\"k oom\">◆ OOM kill</span> \
         <span class=\"k nonzero\">■ non-zero exit</span> \
         <span class=\"k expected\">✕ expected stop</span> \
         <span class=\"k leak\">▶ still running (leak)</span> \
         <span class=\"k arrowk\">→ signal (sender → receiver; dashed: survived)</span> \
         <span class=\"k miss\">⊗ near miss (failed kill)</span> \
         <span class=\"k call\">● one call, several signals</span></p>\n\
         <div class=\"scroll\">\n",
    );
    o.push_str(&svg);
    o.push_str("</div>\n");
    // Memory and CPU on the same time scale, right under the lanes.
    if let Some(chart) = resources::svg(r, &scale) {
        let _ = write!(
            o,
            "<h3>Memory and CPU</h3>\n<p class=\"legend\"><span class=\"k memrun\">— the run's \
             cgroup</span> <span class=\"k memproc\">— its largest processes</span> \
             <span class=\"k limitk\">- - memory limit</span> <span class=\"k testk\">▮ a test's \
             window</span> <span class=\"k oom\">| OOM kill</span></p>\n<div class=\"scroll\">\n\
             {chart}</div>\n"
        );
    }
    if !left_out.is_empty() {
        let _ = writeln!(
            o,
            "<p id=\"left-out\" class=\"note\">{}.</p>",
            esc(&left_out)
        );
    }
    o.push_str("</section>\n<section id=\"run\">\n<h2>Run</h2>\n");
    cards::run_facts(&mut o, r);
    o.push_str("</section>\n");

    cards::certificates(&mut o, r);
    cards::groups(&mut o, r);
    findings::side_findings(&mut o, r);
    let _ = write!(
        o,
        "</main>\n<footer><p>{}</p><p>Rendered by tracer {} from events.ndjson; the same data as \
         report.json.</p></footer>\n<script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        esc(&r.ranking_rule),
        esc(&r.rendered_by)
    );
    o
}

/// The banner's colour follows the outcome: red for an unexpected death, a
/// kill outside the run or a run that timed out; amber for non-zero exits,
/// a cancelled run or a log that misses something; green only for a run
/// that ended by itself with nothing to say.
fn banner(r: &Report, outbound: bool) -> &'static str {
    let reason = |why: &str| r.snapshots.iter().any(|s| s.reason == why);
    if r.analysis.counts.unexpected > 0 || outbound || reason("timeout") {
        "unexpected"
    } else if r.analysis.counts.nonzero_exit > 0 || !r.log.complete || reason("cancelled") {
        "nonzero"
    } else {
        "clean"
    }
}

fn rank_css(r: Rank) -> &'static str {
    match r {
        Rank::Unexpected => "unexpected",
        Rank::NonzeroExit => "nonzero",
        Rank::Consequence => "consequence",
        Rank::Expected => "expected",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{eventlog::read_log, report::ReportOptions};

    fn fixture(name: &str) -> (Report, Context) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        let log = read_log(&path).unwrap();
        let r = super::super::build_report(&log, &ReportOptions::default());
        let cx = Context::from_log(&log, &r);
        (r, cx)
    }

    #[test]
    fn escapes_markup_and_controls() {
        assert_eq!(
            esc("<script>alert('x')</script>&\"\x1b"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;\u{FFFD}"
        );
    }

    #[test]
    fn group_kill_fans_out_from_one_call() {
        let (r, cx) = fixture("seed000_group_kill.ndjson");
        let html = render(&r, &cx);
        // 4000 root, 4100 killer, 4242/4243/4244 victims, 4343 outside.
        assert_eq!(html.matches("<g class=\"lane ").count(), 6, "{html}");
        // 2 signals to 4242, one each to 4243/4244, one foreign.
        assert_eq!(html.matches("<path class=\"arrow").count(), 5);
        assert!(html.contains("×3</text>"), "the group kill is one call");
        // Kill arrows say their signal, once per call.
        assert_eq!(html.matches(">SIGKILL</text>").count(), 1, "{html}");
        assert_eq!(
            html.matches("class=\"siglabel\"").count(),
            2,
            "and the outbound SIGTERM"
        );
        assert_eq!(html.matches("<g class=\"miss\">").count(), 1);
        assert!(html.contains("href=\"#cert-1\""));
        assert!(html.contains("id=\"cert-1\""));
    }

    #[test]
    fn every_fixture_renders_deterministically() {
        for f in [
            "oom.ndjson",
            "daemon.ndjson",
            "crashes.ndjson",
            "truncated.ndjson",
        ] {
            let (r, cx) = fixture(f);
            let a = render(&r, &cx);
            assert_eq!(a, render(&r, &cx), "{f}");
            assert!(!a.contains("<script>alert"), "{f}");
            assert!(a.ends_with("</html>\n"));
        }
    }

    #[test]
    fn a_big_run_keeps_to_the_lane_cap_and_counts_the_rest() {
        let (mut r, cx) = fixture("seed000_group_kill.ndjson");
        let base = r.analysis.certificates[1].clone();
        for i in 0..2000u32 {
            let mut c = base.clone();
            c.id = 10 + i as usize;
            c.victim.process.pid = 10_000 + i;
            c.victim.process.start += u64::from(i);
            r.analysis.certificates.push(c);
        }
        r.run.processes = 2100;
        let html = render(&r, &cx);
        assert_eq!(
            html.matches("<g class=\"lane ").count(),
            lanes::MAX_LANES,
            "lanes"
        );
        assert!(
            html.contains("beyond the first 150 lanes"),
            "the cap is said"
        );
        assert!(html.contains("other processes of the run not shown"));
        assert!(html.contains("more certificates (report.json has them all)"));
    }

    const HOSTILE: &str =
        "<img src=x onerror=alert(1)>`</code></pre></td><script>alert(1)</script>\x1b[31m\u{202e}";

    /// Nothing a run wrote reaches the page as markup, in each field that
    /// report.html shows since #25.5: last words, snapshot threads and fds
    /// with their peers, a leak's fds and spawner, a group's signature.
    #[test]
    fn hostile_strings_in_every_new_field_are_escaped() {
        let check = |what: &str, html: &str| {
            assert!(!html.contains("<img src=x"), "{what}: {html}");
            assert!(
                html.contains("&lt;img src=x onerror=alert(1)&gt;"),
                "{what}"
            );
            let v = crate::text::invariants::html(html);
            assert!(v.is_empty(), "{what}: {v:?}");
        };
        let (mut r, cx) = fixture("real_last_words.ndjson");
        let c = r
            .analysis
            .certificates
            .iter_mut()
            .find(|c| c.last_words.is_some());
        c.unwrap().last_words.as_mut().unwrap().text = format!("ok\n{HOSTILE}\n");
        let html = render(&r, &cx);
        assert!(html.contains("Last words (stderr"), "last words shown");
        check("last words", &html);

        let (mut r, cx) = fixture("real_field_hang_leaked_writer.ndjson");
        let p = &mut r.snapshots[0].snapshot.processes[0];
        p.comm = HOSTILE.into();
        for t in &mut p.threads {
            t.comm = HOSTILE.into();
            t.wchan = Some(HOSTILE.into());
            t.stack = vec![HOSTILE.into()];
        }
        assert!(!p.fds.is_empty(), "the fixture has fds");
        for f in &mut p.fds {
            f.target = HOSTILE.into();
            if let crate::snapshot::FdKind::Pipe { holders, .. } = &mut f.kind {
                holders.iter_mut().for_each(|h| h.comm = HOSTILE.into());
            }
        }
        let html = render(&r, &cx);
        assert!(html.contains("other holders:"), "pipe peers shown: {html}");
        assert!(html.contains("wchan="), "thread waits shown");
        check("snapshot", &html);

        let (mut r, cx) = fixture("real_leak_kill.ndjson");
        let l = r.analysis.leftovers.iter_mut().find(|l| l.leak.is_some());
        let l = l.expect("a leak record");
        l.leak.as_mut().unwrap().fds = vec![HOSTILE.into()];
        if let Some(p) = &mut l.spawned_by {
            p.command = HOSTILE.into();
        }
        let html = render(&r, &cx);
        check("leak fds", &html);

        let (mut r, cx) = fixture("seed000_group_kill.ndjson");
        let mut example = r.analysis.certificates[1].clone();
        example.headline = format!("`{HOSTILE}` killed");
        example.last_words = None;
        r.analysis.death_groups = vec![crate::analysis::DeathGroup {
            id: example.id,
            rank: crate::analysis::Rank::Expected,
            signature: HOSTILE.into(),
            count: 5,
            first_time: HOSTILE.into(),
            last_time: HOSTILE.into(),
            members: Vec::new(),
            members_left_out: 5,
            example,
        }];
        r.verdict = format!("`{HOSTILE}` and {HOSTILE}");
        let html = render(&r, &cx);
        assert!(html.contains("Deaths of one kind"), "groups shown");
        check("group and verdict", &html);
    }

    /// The banner is green only for a run that ended by itself cleanly.
    #[test]
    fn a_timed_out_or_cancelled_run_has_no_green_banner() {
        let banner = |r: &Report| {
            let html = render(r, &Context::default());
            let at = html.find("class=\"verdict ").unwrap() + "class=\"verdict ".len();
            html[at..].split('"').next().unwrap().to_string()
        };
        for (f, want) in [
            ("real_field_hang_socket_daemon.ndjson", "unexpected"),
            ("real_cancel_bash.ndjson", "nonzero"),
        ] {
            let (mut r, _) = fixture(f);
            // Only the snapshot's reason may colour it.
            r.analysis.counts = Default::default();
            r.analysis.foreign_signals.clear();
            r.log.complete = true;
            assert!(!r.snapshots.is_empty(), "{f}");
            assert_eq!(banner(&r), want, "{f}");
            r.snapshots.clear();
            assert_eq!(banner(&r), "clean", "{f} without its snapshot");
        }
    }

    #[test]
    fn hostile_argv_is_escaped() {
        let (mut r, cx) = fixture("seed000_group_kill.ndjson");
        r.analysis.certificates[0].victim.process.command =
            "<img src=x onerror=alert(1)>".to_string();
        let html = render(&r, &cx);
        assert!(!html.contains("<img src=x"));
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
    }
}
