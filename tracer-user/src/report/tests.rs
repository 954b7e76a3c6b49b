//! Report-level tests over the fixtures: determinism, the loss line and the
//! summary (report.json's schema: schema_tests.rs).
use std::path::{Path, PathBuf};

use super::*;
use crate::eventlog::read_log;

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    v.sort();
    assert!(v.len() >= 9, "fixtures missing");
    v
}

fn report(name: &str) -> Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    build_report(&read_log(&path).unwrap(), &ReportOptions::default())
}

fn held(dir: &Path) -> crate::outdir::OutDir {
    crate::outdir::OutDir::open(dir, Default::default()).unwrap()
}

/// The reports of a log read whole, through the one write path.
fn write_reports(
    log: &crate::eventlog::EventLog,
    out: &crate::outdir::OutDir,
    opts: &ReportOptions,
) -> io::Result<Rendered> {
    write(Loaded::of(log), out, opts, |_| None).rendered
}

#[test]
fn same_log_gives_byte_identical_reports() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for path in fixtures() {
        let log = read_log(&path).unwrap();
        let ra = write_reports(&log, &held(a.path()), &ReportOptions::default()).unwrap();
        // A fresh read, so nothing cached in the first pass can leak.
        let rb = write_reports(
            &read_log(&path).unwrap(),
            &held(b.path()),
            &ReportOptions::default(),
        )
        .unwrap();
        let read = |p: &Path| std::fs::read(p).unwrap();
        assert_eq!(
            read(&ra.json_path),
            read(&rb.json_path),
            "{path:?}: report.json differs"
        );
        assert_eq!(
            read(&ra.md_path),
            read(&rb.md_path),
            "{path:?}: report.md differs"
        );
        assert_eq!(ra.unexpected_deaths, rb.unexpected_deaths);
        assert!(
            !a.path().join("report.tmp").exists(),
            "no temp file left behind"
        );
    }
}

#[test]
fn losses_are_shown_and_qualify_the_verdict() {
    let r = report("lossy.ndjson");
    assert_eq!(r.log.lost_total, 15);
    assert!(!r.log.complete);
    assert_eq!(
        r.verdict,
        "No unexpected deaths (incomplete: 15 events were lost, so deaths may be missing)"
    );
    let md = render_markdown(&r);
    let line = md.lines().nth(3).unwrap();
    assert!(
        line.starts_with(
            "**Loss: 15 events lost** (ring buffer full: 12, in-flight kill map full: 3)"
        ),
        "{line}"
    );
}

#[test]
fn truncated_log_is_flagged() {
    let r = report("truncated.ndjson");
    assert!(r.log.truncated && !r.log.complete);
    assert!(
        r.verdict
            .ends_with("(incomplete: the log is truncated, so deaths may be missing)"),
        "{}",
        r.verdict
    );
    assert!(render_markdown(&r).contains("**Loss: unknown — the log is truncated**"));
}

#[test]
fn every_report_starts_with_the_verdict_and_has_a_loss_line() {
    for path in fixtures() {
        let r = build_report(&read_log(&path).unwrap(), &ReportOptions::default());
        let md = render_markdown(&r);
        // The verdict as Markdown prose: what it quotes from /proc is escaped.
        let first = crate::text::markdown::inline(&r.verdict);
        assert_eq!(md.lines().next(), Some(first.as_str()), "{path:?}");
        assert!(
            md.lines().any(|l| l.starts_with("**Loss")),
            "{path:?} has no loss line"
        );
        for c in &r.analysis.certificates {
            assert!(
                c.history.iter().all(|h| h.signal.sig_name != "SIGCHLD"),
                "SIGCHLD is noise"
            );
        }
    }
}

#[test]
fn summary_is_plain_and_colour_is_opt_in() {
    let dir = tempfile::tempdir().unwrap();
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed000_group_kill.ndjson");
    let r = write_reports(
        &read_log(&path).unwrap(),
        &held(dir.path()),
        &ReportOptions::default(),
    )
    .unwrap();
    assert_eq!(r.unexpected_deaths, 3);
    // Its SIGTERM to a postgres outside the run comes first.
    assert!(
        r.summary.starts_with(
            "tracer: `node runner-session.test` (pid 4100) in the run sent SIGTERM to `[postgres]` \
             (pid 4343), outside the run, via kill(4343, SIGTERM). Inside the run: 3 unexpected \
             deaths: `node worker.js` (pid 4242)"
        ),
        "{}",
        r.summary
    );
    assert!(r.summary.contains("Loss: none"), "{}", r.summary);
    assert!(r.summary.lines().count() <= 10);
    assert!(!r.summary.contains('\x1b'));
    let mut plain = Vec::new();
    print_summary(&r, &mut plain, false).unwrap();
    assert_eq!(String::from_utf8(plain).unwrap(), r.summary);
    let mut coloured = Vec::new();
    print_summary(&r, &mut coloured, true).unwrap();
    let coloured = String::from_utf8(coloured).unwrap();
    assert!(
        coloured.starts_with("\x1b[1;31mtracer: `node runner-session.test` (pid 4100) in the run"),
        "{coloured}"
    );
    assert!(!use_color(false), "never colour a non-terminal");
}

#[test]
fn repeated_near_misses_fold_into_one_row() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed000_group_kill.ndjson");
    let mut log = read_log(&path).unwrap();
    let miss = log
        .events
        .iter()
        .find(|e| matches!(e, crate::eventlog::Record::KillCall(k) if k.ret < 0))
        .cloned()
        .unwrap();
    let last = log
        .events
        .iter()
        .filter_map(|e| e.stamp())
        .map(|s| s.seq)
        .max()
        .unwrap();
    for i in 1..=145 {
        let mut again = miss.clone();
        if let crate::eventlog::Record::KillCall(k) = &mut again {
            k.at.seq = last + i;
            k.at.t += i;
        }
        log.events.push(again);
    }
    let r = build_report(&log, &ReportOptions::default());
    assert_eq!(r.analysis.near_misses.len(), 1, "the JSON folds them too");
    let n = &r.analysis.near_misses[0];
    assert_eq!(n.count, 146);
    assert!(n.last_seq > n.seq, "{} .. {}", n.seq, n.last_seq);
    let sender = r.analysis.entry(n.sender_id).expect("the sender's entry");
    assert_eq!(sender.pid, 4100);
    let md = render_markdown(&r);
    let rows: Vec<&str> = md
        .lines()
        .filter(|l| l.contains("`kill(4141, SIGTERM)`"))
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(rows[0].starts_with("| 10 | 146 |"), "{}", rows[0]);
}

#[test]
fn last_words_are_fenced_and_trimmed_to_the_last_lines() {
    let r = report("real_last_words.ndjson");
    assert!(
        r.verdict
            .starts_with("No unexpected deaths; 1 non-zero exit: `certificates-"),
        "the program's directory is left out of prose: {}",
        r.verdict
    );
    assert!(r.verdict.ends_with(
        "— last words: `TypeError: Cannot read properties of undefined (reading 'port')`"
    ));
    let md = render_markdown(&r);
    let block = md
        .split("```text\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("a fenced block");
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.len(), 20, "{block}");
    assert_eq!(lines[0], "worker: step 07 done");
    assert_eq!(lines[19], "    at frame10 (/srv/worker.js:10:7)");
    assert!(
        md.contains("Last words (stderr, its last 20 lines of "),
        "{md}"
    );
}

#[test]
fn a_fence_outlasts_backticks_in_the_words() {
    let lw = crate::analysis::LastWordsRef {
        seq: 1,
        text: "a ``` b\n".into(),
        bytes_total: 8,
        truncated: false,
        to_null: false,
        line: None,
    };
    let mut o = String::new();
    super::sections::last_words(&mut o, &lw);
    assert!(o.contains("````text\na ``` b\n````"), "{o}");
}

#[test]
fn leaks_are_reported_with_their_facts_and_spawner() {
    let r = report("real_leak_kill.ndjson");
    let l = &r.analysis.leftovers[0];
    let by = l.spawned_by.as_ref().unwrap();
    assert_eq!(
        r.verdict,
        format!(
            "No unexpected deaths. Leaked: `sleep 300` (pid {}), detached via setsid, spawned by \
             `sh -c (setsid sleep 300 >/dev/null 2>&1 &); sleep 0.2; exit…` (pid {}, a fork that \
             never exec'd), was still running when the command exited.",
            l.process.pid, by.pid
        )
    );
    let md = render_markdown(&r);
    assert!(md.contains("## Leaked: still running when the command exited"));
    let row = md
        .lines()
        .find(|line| line.starts_with("| `sleep 300`"))
        .expect("a leak row");
    for want in [
        "reparented (its parent died)",
        "detached (setsid)",
        "`1: /dev/null`",
        "ended later",
    ] {
        assert!(row.contains(want), "{want} missing from {row}");
    }
}

/// A vitest run: every worker is `node` with the same long flags. The
/// headlines must tell victim and killer apart by entry point and pid, and
/// the details keep the whole argv.
#[test]
fn workers_with_the_same_flags_are_named_apart() {
    let r = report("vitest_workers.ndjson");
    let c = &r.analysis.certificates[0];
    assert_eq!(
        c.headline,
        "`node …/vitest/dist/workers/forks.js` (pid 4242) killed by SIGKILL from \
         `node …/vitest/dist/workers/forks.js` (pid 4100), a sibling, via kill(-4242, SIGKILL) \
         — a process-group kill of group 4242, 5.0 s after a SIGTERM from pid 4100 that it ignored"
    );
    assert!(!r.verdict.contains("--experimental"), "{}", r.verdict);
    let md = render_markdown(&r);
    let full = "| command | `/usr/local/bin/node --experimental-import-meta-resolve --require \
                /work/steward/node_modules/vitest/suppress-warnings.cjs --conditions node \
                --conditions development /work/steward/node_modules/vitest/dist/workers/forks.js` |";
    assert!(md.contains(full), "{md}");
    assert!(
        md.contains(&full.replace("| command |", "| killer command |")),
        "{md}"
    );
    assert_eq!(
        c.victim.process.argv.len(),
        9,
        "report.json keeps argv whole"
    );
}

/// A hook that attached by its fallback (fentry refused here, raw_syscalls
/// taken) reads as the fallback it is, not as `Operation not permitted`;
/// the refusal stays in report.json. The ranking rule and the hooks table
/// are at the end, collapsed, not at the top.
#[test]
fn a_normal_fallback_is_no_error_and_the_long_parts_come_last() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_cascade_make.ndjson");
    let r = build_report(&read_log(&path).unwrap(), &ReportOptions::default());
    let refused = r
        .run
        .hooks
        .iter()
        .find(|h| h.attached && h.detail.is_some());
    assert!(
        refused
            .unwrap()
            .detail
            .as_deref()
            .unwrap()
            .contains("Operation not permitted"),
        "the fixture's fentry refusal"
    );
    let md = render_markdown(&r);
    assert!(!md.contains("Operation not permitted"), "{md}");
    assert!(md.contains("| kill_syscalls | yes | raw_syscalls | fentry passed over, the next way taken: a fallback, not an error"), "{md}");
    let rule = md.find(&r.ranking_rule[..80]).expect("the rule, whole");
    let hooks = md.find("<details><summary>Hooks</summary>").unwrap();
    let certs = md.find("## Death certificates").unwrap();
    assert!(
        certs < hooks && hooks < rule,
        "the rule and the hooks at the end"
    );
    assert!(md.trim_end().ends_with("</details>"));
}

/// An analysis folded as it ranks (a folded death's certificate built only
/// as its group's example) writes the very bytes of one that kept every
/// certificate and was folded after the verdict: report.json, report.md
/// and the JUnit file, for every fixture.
#[test]
fn folding_while_ranking_writes_the_same_reports() {
    let mut folded = 0;
    for path in fixtures() {
        let log = read_log(&path).unwrap();
        let early = build_report(&log, &ReportOptions::default());
        let every = ReportOptions {
            every_certificate: true,
            ..Default::default()
        };
        let late = build_report(&log, &every);
        let name = path.display();
        assert_eq!(render_json(&early), render_json(&late), "{name}");
        assert_eq!(render_markdown(&early), render_markdown(&late), "{name}");
        assert_eq!(junit::render(&early), junit::render(&late), "{name}");
        assert_eq!(early.analysis.counts, late.analysis.counts, "{name}");
        folded += usize::from(!early.analysis.death_groups.is_empty());
        // Its verdict names folded non-zero exits one by one.
        if path.ends_with("real_folded_deaths.ndjson") {
            let ranks: Vec<Rank> = early.analysis.death_groups.iter().map(|g| g.rank).collect();
            assert_eq!(ranks, [Rank::NonzeroExit, Rank::Expected], "{name}");
            assert_eq!(early.analysis.folded_mentions.len(), 4, "{name}");
        }
    }
    assert!(folded > 0, "no fixture folds: the test would prove nothing");
}

/// A daemon's log: the shell it found running (pid 100), the two commands
/// that shell ran (one of them forked a child and made a thread of its
/// own), so two commands seen, not four.
fn daemon_log(scope: Option<&str>) -> crate::eventlog::EventLog {
    let scope = scope.map_or(String::new(), |s| format!(r#","scope":"{s}""#));
    let task = |pid: u32, start: u64| format!(r#"{{"pid":{pid},"tid":{pid},"start":{start}}}"#);
    let at = |seq: u64| {
        format!(
            r#""seq":{seq},"t":{},"time":"2026-08-18T17:27:0{seq}Z""#,
            seq * 1_000_000_000
        )
    };
    let fork = |seq: u64, parent: String, child: String, thread: bool| {
        format!(
            r#"{{"type":"fork",{},"parent":{parent},"child":{child},"thread":{thread}}}"#,
            at(seq)
        )
    };
    let lines = [
        format!(
            r#"{{"type":"header","schema":1,"tracer_version":"0.1.0","kernel":"6.18.0-ci","hostname":"runner-7","mode":"daemon","command":[],"tracer_pid":1500,"started_at":"2026-08-18T17:27:00Z","boot_to_wall_ns":1787073920000000000,"hooks":[],"ring_buffer_bytes":16777216,"argv_capture_bytes":4096{scope}}}"#
        ),
        format!(
            r#"{{"type":"existing",{},"task":{},"ppid":1,"argv":["bash","-e"]}}"#,
            at(1),
            task(100, 50)
        ),
        fork(2, task(100, 50), task(101, 2_000_000_000), false),
        fork(3, task(101, 2_000_000_000), task(102, 3_000_000_000), false),
        fork(4, task(101, 2_000_000_000), r#"{"pid":101,"tid":103,"start":2000000000}"#.into(), true),
        fork(5, task(100, 50), task(104, 5_000_000_000), false),
        r#"{"type":"trailer","ended_at":"2026-08-18T17:27:06Z","events":5,"lost":{"ringbuf_full":0,"tracked_map_full":0,"inflight_map_full":0,"undecodable":0,"per_cpu":[]}}"#.into(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.ndjson");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    read_log(&path).unwrap()
}

/// A daemon says what its run was, never "(no command) did not finish in
/// the log": the commands it saw start, each forked by a process already
/// running when it began, and what it watched.
#[test]
fn a_daemon_run_says_how_many_commands_it_saw() {
    let r = build_report(&daemon_log(Some("root-pid 100")), &ReportOptions::default());
    assert_eq!(r.run.commands, Some(2));
    assert_eq!(r.run.scope.as_deref(), Some("root-pid 100"));
    let md = markdown::render(&r);
    let run = md.lines().find(|l| l.starts_with("**Run:**")).unwrap();
    assert!(
        run.starts_with("**Run:** daemon run, 2 commands seen (watching `root-pid 100`) after "),
        "{run}"
    );
    assert!(!md.contains("did not finish"), "{run}");
    let html = html::render(&r, &html::Context::default());
    assert!(
        html.contains(
            "<th>run</th><td>daemon run, 2 commands seen (watching <code>root-pid 100</code>)</td>"
        ),
        "{html}"
    );

    // A log from before the scope was written: the count alone.
    let r = build_report(&daemon_log(None), &ReportOptions::default());
    let md = markdown::render(&r);
    assert!(
        md.contains("**Run:** daemon run, 2 commands seen after "),
        "{md}"
    );
    // A record run names its command, as it always did.
    let r = report("exits.ndjson");
    assert_eq!((r.run.commands, r.run.scope.as_deref()), (None, None));
    assert!(!markdown::render(&r).contains("daemon run"));
}
