//! Live findings from real logs (tests/fixtures): each once, the metrics'
//! new series at 0 first, the OTLP request as a collector decodes it.
use std::path::Path;

use prost::Message;

use super::{fresh_in, Seen};
use crate::{analysis::AnalysisOptions, eventlog::read_log, metrics::Metrics};

fn fixture(name: &str) -> crate::eventlog::EventLog {
    read_log(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

/// Every fixture log that reads, with its path.
fn fixtures() -> impl Iterator<Item = (std::path::PathBuf, crate::eventlog::EventLog)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    std::fs::read_dir(dir).unwrap().filter_map(|entry| {
        let path = entry.unwrap().path();
        let log = read_log(&path).ok()?;
        Some((path, log))
    })
}

#[test]
fn each_finding_is_fresh_once() {
    let log = fixture("real_pgroup_kill.ndjson");
    let mut seen = Seen::default();
    let first = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert!(!first.certificates.is_empty());
    let again = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn a_new_series_is_scraped_at_zero_before_it_counts() {
    let log = fixture("real_memcg_oom.ndjson");
    let (metrics, registry, staged) = Metrics::new(&log.header, 2);
    let found = fresh_in(&log, &AnalysisOptions::default(), &mut Seen::default());
    assert!(found.certificates.iter().any(|c| c.oom.is_some()));
    metrics.observe(&found);
    let scrape = || {
        let mut s = String::new();
        staged.encode(&registry, &mut s).unwrap();
        s
    };
    let line = |text: &str, prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
            .to_string()
    };
    let first = scrape();
    assert!(
        line(&first, "tracer_oom_kills_total{memcg=").ends_with(" 0"),
        "{first}"
    );
    let second = scrape();
    let oom = line(&second, "tracer_oom_kills_total{memcg=");
    assert!(oom.ends_with(" 1"), "{second}");
    // The label is the cgroup path cut to two components, never a pid.
    assert!(!oom.contains("pid"), "{oom}");
    assert!(line(&second, "tracer_deaths_total{").contains("rank=\""));
    assert!(second.contains("tracer_build_info{"));
    assert!(second.ends_with("# EOF\n"));
}

#[test]
fn otlp_request_round_trips_through_protobuf() {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    let log = fixture("real_pgroup_kill.ndjson");
    let found = fresh_in(&log, &AnalysisOptions::default(), &mut Seen::default());
    let ctx = crate::otlp::Context::from_vars(&log.header, |k| {
        (k == "GITLAB_CI" || k == "CI_JOB_ID")
            .then(|| if k == "GITLAB_CI" { "true" } else { "77" }.into())
    });
    let req = ctx.request(&found, log.header.boot_to_wall_ns).unwrap();
    let back = ExportLogsServiceRequest::decode(&req.encode_to_vec()[..]).unwrap();
    assert_eq!(back, req);
    let rl = &back.resource_logs[0];
    let res: Vec<&str> = rl
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|a| a.key.as_str())
        .collect();
    assert!(res.contains(&"cicd.pipeline.task.run.id"), "{res:?}");
    let records = &rl.scope_logs[0].log_records;
    assert_eq!(
        records.len(),
        found.certificates.len()
            + found.near_misses.len()
            + found.foreign_signals.len()
            + found.leaks.len()
    );
    for (r, c) in records.iter().zip(&found.certificates) {
        assert_eq!(r.event_name, "tracer.death");
        let want = match c.rank {
            crate::analysis::Rank::Unexpected => 17,
            crate::analysis::Rank::NonzeroExit | crate::analysis::Rank::Consequence => 13,
            crate::analysis::Rank::Expected => 9,
        };
        assert_eq!(r.severity_number, want);
    }
}

/// The daemon's live window finds every death the whole log's analysis
/// certifies, whatever the interval cuts the records into, and each once:
/// the context it keeps of older records is enough.
#[test]
fn the_window_finds_what_the_whole_log_finds() {
    use std::collections::BTreeSet;

    use crate::{
        eventlog::ProcKey,
        live::{fresh_in_window, Window},
    };
    let mut compared = 0;
    for (path, mut log) in fixtures() {
        // A live look has no trailer yet (a record run's "could not be
        // run" is in it): the whole log is judged without it too.
        log.trailer = None;
        let opts = AnalysisOptions::default();
        // Who died, and how the first look ranks and explains it.
        let id = |c: &crate::analysis::Certificate| {
            let key = ProcKey {
                pid: c.victim.process.pid,
                start: c.victim.process.start,
            };
            (key, format!("{:?} {:?}", c.rank, c.cause.kind))
        };
        let all = fresh_in(&log, &opts, &mut Seen::default());
        let whole: BTreeSet<_> = all.certificates.iter().map(id).collect();
        let calls = |f: &super::Findings| f.near_misses.iter().map(|n| n.count).sum::<u64>();
        let whole_calls = calls(&all) + all.near_misses_unlisted;
        for chunk in [1, 7, 100] {
            let (mut window, mut seen) = (Window::default(), Seen::default());
            let mut found = Vec::new();
            let mut found_calls = 0;
            let looks = log.events.chunks(chunk).map(<[_]>::to_vec);
            for part in looks.chain([Vec::new()]) {
                let fresh = fresh_in_window(&mut window, &log.header, part, &opts, &mut seen);
                found.extend(fresh.certificates.iter().map(id));
                found_calls += calls(&fresh) + fresh.near_misses_unlisted;
            }
            // Every failed kill-family call counted once.
            assert_eq!(
                found_calls,
                whole_calls,
                "{} in chunks of {chunk}",
                path.display()
            );
            let set: BTreeSet<_> = found.iter().cloned().collect();
            assert_eq!(
                set.len(),
                found.len(),
                "{}: a death found twice",
                path.display()
            );
            assert_eq!(set, whole, "{} in chunks of {chunk}", path.display());
        }
        compared += 1;
    }
    assert!(compared > 30, "{compared} fixtures");
}

/// A crash's stack logged looks before its exit (the core dump took that
/// long) is still on the certificate the window makes at the exit, as the
/// whole log's analysis has it.
#[test]
fn the_window_keeps_a_crash_stack_until_its_process_dies() {
    use crate::{
        eventlog::Record,
        live::{fresh_in_window, Window},
    };
    let mut log = fixture("real_crash_stack_segv.ndjson");
    log.trailer = None;
    let at = log
        .events
        .iter()
        .position(|r| matches!(r, Record::CrashStack(_)))
        .expect("the fixture has a crash_stack");
    let crash = log.events.remove(at);
    let exec = log
        .events
        .iter()
        .position(|r| matches!(r, Record::Exec(_)))
        .unwrap();
    log.events.insert(exec + 1, crash);
    let opts = AnalysisOptions::default();
    let whole = fresh_in(&log, &opts, &mut Seen::default());
    let want = &whole.certificates[0];
    assert!(want.crash.is_some() && want.headline.contains(" in parse_header"));
    let (mut window, mut seen) = (Window::default(), Seen::default());
    let mut found = Vec::new();
    let looks = log.events.chunks(1).map(<[_]>::to_vec);
    for part in looks.chain([Vec::new(), Vec::new()]) {
        let fresh = fresh_in_window(&mut window, &log.header, part, &opts, &mut seen);
        found.extend(fresh.certificates);
    }
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].headline, want.headline);
}

/// What the window holds is what is alive and what ended in the last look
/// (certified at the next): 20,000 short processes forked by one shell in
/// looks of 100 leave it holding the shell and one look's 100, not 20,000;
/// and what was handed on is forgotten once no look can make it again:
/// every one of the 20,000 failures is handed on once, and the daemon
/// remembers a few looks' worth of them, not 20,000; its ledger folds them
/// into one group as they settle.
#[test]
fn the_window_holds_what_is_alive() {
    use crate::live::Live;
    let header = fixture("daemon.ndjson").header;
    let mut job = Synthetic::new();
    let mut live = Live::default();
    let (mut most, mut handed, mut remembered, mut ledgered) = (0, 0, 0, 0);
    for i in 0..20_000u64 {
        // Each lives 1.5 s: a worker's non-zero exit is a death
        // (`is_worker`), a silent helper's is not.
        let t = 10 + i * 2_000_000_000;
        job.child(1000 + (i % 30_000) as u32, t, 1_500_000_000, 1 << 8);
        if i % 100 == 99 {
            let found = live.look(&header, job.take(), &AnalysisOptions::default(), false);
            handed += found.certificates.len();
            most = most.max(live.window.held());
            remembered = remembered.max(live.seen.held());
            ledgered = ledgered.max(live.ledger.held());
        }
    }
    let last = live.look(&header, Vec::new(), &AnalysisOptions::default(), true);
    handed += last.certificates.len();
    // The shell, one look's 100, and the child that ended just before the
    // look's first failed one (kept as its possible pipe reader).
    assert!(most <= 102, "the window held {most} processes");
    assert_eq!(handed, 20_000, "each failure handed on once");
    assert!(
        remembered <= 600,
        "the daemon remembered {remembered} findings"
    );
    // The report it writes at the stop holds one story of 20,000 deaths,
    // and held a few looks' worth while it ran.
    assert!(ledgered <= 700, "the ledger held {ledgered}");
    let a = live.ledger.finish().analysis;
    assert_eq!(a.counts.nonzero_exit, 20_000);
    assert!(a.certificates.is_empty(), "{:?}", a.certificates.len());
    let g = &a.death_groups[..];
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].count, 20_000);
    assert_eq!(g[0].members.len() + g[0].members_left_out, 20_000);
}

/// A fold of identical failed calls grows while a daemon runs: each look
/// hands on only the calls added since the last, and the counter counts
/// calls, not folds.
#[test]
fn a_growing_near_miss_is_counted_by_its_new_calls() {
    let mut log = fixture("seed000_group_kill.ndjson");
    let miss = log
        .events
        .iter()
        .find(|e| matches!(e, crate::eventlog::Record::KillCall(k) if k.ret < 0))
        .cloned()
        .unwrap();
    let mut last = log
        .events
        .iter()
        .filter_map(|e| e.stamp())
        .map(|s| s.seq)
        .max()
        .unwrap();
    let mut more = |log: &mut crate::eventlog::EventLog, n: u64| {
        for _ in 0..n {
            let mut again = miss.clone();
            if let crate::eventlog::Record::KillCall(k) = &mut again {
                last += 1;
                k.at.seq = last;
                k.at.t += last;
            }
            log.events.push(again);
        }
    };
    let (metrics, registry, staged) = Metrics::new(&log.header, 2);
    let mut seen = Seen::default();
    let counted = |found: &super::Findings| found.near_misses.iter().map(|n| n.count).sum::<u64>();
    more(&mut log, 4);
    let first = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert_eq!((first.near_misses.len(), counted(&first)), (1, 5));
    metrics.observe(&first);
    more(&mut log, 10);
    let second = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert_eq!((second.near_misses.len(), counted(&second)), (1, 10));
    metrics.observe(&second);
    let third = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert!(third.near_misses.is_empty(), "{third:?}");
    let mut s = String::new();
    staged.encode(&registry, &mut s).unwrap();
    s.clear();
    staged.encode(&registry, &mut s).unwrap();
    let line = s
        .lines()
        .find(|l| l.starts_with("tracer_near_misses_total{errno=\"ESRCH\"}"))
        .unwrap_or_else(|| panic!("{s}"));
    assert!(line.ends_with(" 15"), "{line}");
}

/// The ledger a daemon writes its reports from, merged look by look, holds
/// what the whole log's report holds, whatever the looks cut the records
/// into: the same deaths ranked the same (certificates or group members),
/// the same counts, groups, small exits, failed calls and signals across
/// the boundary. Only certificate ids differ (the ledger numbers what it
/// shows), so cascade sentences are compared with their ids taken out.
#[test]
fn the_ledger_reports_what_the_whole_log_reports() {
    use std::collections::BTreeSet;

    use crate::{analysis::Analysis, eventlog::ProcKey, live::Live};
    let no_ids = |s: &str| {
        let mut out = String::new();
        let mut after_hash = false;
        for ch in s.chars() {
            if after_hash && ch.is_ascii_digit() {
                continue;
            }
            after_hash = ch == '#';
            out.push(ch);
        }
        out
    };
    // Every death as (victim, rank, headline without ids), and the folds.
    type Deaths = BTreeSet<(ProcKey, String, String)>;
    let deaths = |a: &Analysis| -> (Deaths, BTreeSet<(String, String, usize)>) {
        let mut d = BTreeSet::new();
        for c in &a.certificates {
            let k = ProcKey {
                pid: c.victim.process.pid,
                start: c.victim.process.start,
            };
            d.insert((k, format!("{:?}", c.rank), no_ids(&c.headline)));
        }
        let g = a
            .death_groups
            .iter()
            .map(|g| (format!("{:?}", g.rank), g.signature.clone(), g.count))
            .collect();
        (d, g)
    };
    let side = |a: &Analysis| {
        let exits: BTreeSet<_> = a
            .other_exits
            .iter()
            .map(|g| (g.program.clone(), format!("{:?}", g.status), g.count))
            .collect();
        let calls: u64 =
            a.near_misses.iter().map(|n| n.count).sum::<u64>() + a.near_misses_left_out.events;
        (
            a.counts,
            exits,
            calls,
            a.foreign_signals.len(),
            a.leftovers.len(),
        )
    };
    let mut compared = 0;
    for (path, mut log) in fixtures() {
        // `record`'s own facts (a leak it found, a hang's snapshot, its
        // timeout or cancel) are in records a daemon never writes.
        let record_only = |r: &crate::eventlog::Record| {
            matches!(
                r,
                crate::eventlog::Record::Leak(_) | crate::eventlog::Record::Snapshot(_)
            )
        };
        if log.events.iter().any(record_only) {
            continue;
        }
        log.trailer = None;
        let opts = AnalysisOptions {
            fold: true,
            ..AnalysisOptions::default()
        };
        let (_, mut whole) = crate::analysis::analyze(&log, &opts);
        crate::report::groups::fold(&mut whole);
        for chunk in [1, 7, 100] {
            let mut live = Live::default();
            let looks: Vec<Vec<_>> = log.events.chunks(chunk).map(<[_]>::to_vec).collect();
            for part in looks {
                live.look(&log.header, part, &AnalysisOptions::default(), false);
            }
            live.look(&log.header, Vec::new(), &AnalysisOptions::default(), true);
            let got = live.ledger.finish().analysis;
            let at = format!("{} in chunks of {chunk}", path.display());
            if chunk == 1 {
                // One record a look: a kill call logged three records after
                // the death it caused misses the look that certifies it (the
                // window waits one look), and its certificate names the call
                // from the signal alone, as a live finding does.
                let ranked = |a: &Analysis| {
                    let (d, g) = deaths(a);
                    let d: BTreeSet<_> = d.into_iter().map(|(k, r, _)| (k, r)).collect();
                    (d, g, a.counts)
                };
                assert_eq!(ranked(&got), ranked(&whole), "{at}");
            } else {
                assert_eq!(deaths(&got), deaths(&whole), "{at}");
                assert_eq!(side(&got), side(&whole), "{at}");
            }
            // Every id an entry names is in the ledger's table.
            let n = got.ancestors.len();
            for c in &got.certificates {
                assert!(c.victim.ancestry.is_none_or(|i| i < n), "{at}");
            }
            for (i, a) in got.ancestors.iter().enumerate() {
                assert_eq!(a.id, i, "{at}");
                assert!(a.parent_id.is_none_or(|p| p < i), "{at}");
            }
        }
        compared += 1;
    }
    assert!(compared > 30, "{compared} fixtures");
}

/// Past [`crate::live::MAX_STORIES`] certificates, a daemon's ledger folds
/// every further death into its signature's group, whatever its rank, and
/// says how many it folded: 1,500 processes dead of a SIGKILL no signal
/// event explains (unexpected, each a story) leave 1,000 certificates and
/// one group of 500.
#[test]
fn past_the_bound_unexpected_deaths_fold_and_are_counted() {
    use crate::live::{Live, MAX_STORIES};
    let header = fixture("daemon.ndjson").header;
    let mut job = Synthetic::new();
    let mut live = Live::default();
    let n = MAX_STORIES + 500;
    for i in 0..n as u64 {
        job.child(1000 + i as u32, 10 + i * 1_000_000, 500_000, 9);
        if i % 100 == 99 {
            live.look(&header, job.take(), &AnalysisOptions::default(), false);
        }
    }
    live.look(&header, job.take(), &AnalysisOptions::default(), false);
    live.look(&header, Vec::new(), &AnalysisOptions::default(), true);
    let l = live.ledger.finish();
    let a = &l.analysis;
    assert_eq!(a.counts.unexpected, n);
    assert_eq!(a.certificates.len(), MAX_STORIES);
    assert_eq!(l.stories_folded, 500);
    assert_eq!(a.death_groups.len(), 1, "{:?}", a.death_groups);
    let g = &a.death_groups[0];
    assert_eq!((g.count, g.rank), (500, crate::analysis::Rank::Unexpected));
    // Ids number what is shown, in the ranked order: the group after the
    // certificates of the deaths before its first member.
    let ids: Vec<usize> = a.certificates.iter().map(|c| c.id).collect();
    assert_eq!(ids, (1..=MAX_STORIES).collect::<Vec<_>>());
    assert_eq!(g.id, MAX_STORIES + 1);
}

/// A test's window under the daemon lasts as long as the test runs: its
/// `begin` mark, 40 looks (with the default 5 s look, 200 s) before the
/// death of the process that wrote it, still names the test on the
/// certificate the window makes, as the whole log's analysis names it.
/// Before, the window kept no mark past the look after it came in.
#[test]
fn the_window_keeps_a_tests_mark_while_the_test_runs() {
    use crate::{
        eventlog::{Exit, ExitStatus, Record, TestMark},
        live::{fresh_in_window, Window},
    };
    let mut s = Synthetic::new();
    let at = s.stamp(10);
    let text = r#"tracer-test-mark/1 {"ev":"begin","runner":"pytest","worker":"gw0","file":"t.py","name":"t.py::test_long","phase":"call"}"#;
    s.batch.push(Record::TestMark(TestMark {
        at,
        task: s.shell.clone(),
        text: text.into(),
        bytes: text.len() as u64,
    }));
    let mut looks = vec![s.take()];
    for i in 0..40u64 {
        // Other processes come and go meanwhile: each look has records.
        s.child(1000 + i as u32, 1_000 + i * 100, 10, 0);
        looks.push(s.take());
    }
    let at = s.stamp(100_000);
    s.batch.push(Record::Exit(Exit {
        at,
        task: s.shell.clone(),
        exit_code: 9,
        status: ExitStatus::from_wait_status(9),
        group_dead: true,
    }));
    looks.push(s.take());
    looks.push(Vec::new());
    let header = fixture("real_crash_stack_segv.ndjson").header;
    let opts = AnalysisOptions::default();
    let (mut window, mut seen) = (Window::default(), Seen::default());
    let mut found = Vec::new();
    for part in looks {
        let fresh = fresh_in_window(&mut window, &header, part, &opts, &mut seen);
        found.extend(fresh.certificates);
    }
    let dead: Vec<_> = found
        .iter()
        .filter(|c| c.victim.process.pid == 100)
        .collect();
    assert_eq!(dead.len(), 1, "{found:?}");
    let test = dead[0]
        .victim
        .test
        .as_ref()
        .expect("the test it was running");
    assert_eq!(test.test.name, "t.py::test_long");
}

/// A daemon's log made by hand: a shell found running (`existing`), then
/// children it forks that end as told, batched into looks.
struct Synthetic {
    seq: u64,
    shell: crate::eventlog::Task,
    batch: Vec<crate::eventlog::Record>,
}

impl Synthetic {
    fn new() -> Self {
        let mut s = Synthetic {
            seq: 0,
            shell: Self::task(100, 1),
            batch: Vec::new(),
        };
        let at = s.stamp(2);
        s.batch.push(crate::eventlog::Record::Existing(
            crate::eventlog::Existing {
                at,
                task: s.shell.clone(),
                ppid: 1,
                argv: vec!["sh".into()],
                argv_truncated: false,
                exe: None,
                ns: None,
            },
        ));
        s
    }

    fn task(pid: u32, start: u64) -> crate::eventlog::Task {
        crate::eventlog::Task {
            pid,
            tid: pid,
            start,
            comm: Some("sh".into()),
        }
    }

    fn stamp(&mut self, t: u64) -> crate::eventlog::Stamp {
        self.seq += 1;
        crate::eventlog::Stamp {
            seq: self.seq,
            t,
            time: "2026-08-18T17:27:01Z".into(),
        }
    }

    /// A child `pid` born at `t`, ending `lives` ns later with wait status
    /// `raw`.
    fn child(&mut self, pid: u32, t: u64, lives: u64, raw: i32) {
        use crate::eventlog::{Exit, ExitStatus, Fork, Record};
        let child = Self::task(pid, t);
        let at = self.stamp(t);
        self.batch.push(Record::Fork(Fork {
            at,
            parent: self.shell.clone(),
            child: child.clone(),
            thread: false,
            child_ns: None,
        }));
        let at = self.stamp(t + lives);
        self.batch.push(Record::Exit(Exit {
            at,
            task: child,
            exit_code: raw,
            status: ExitStatus::from_wait_status(raw),
            group_dead: true,
        }));
    }

    fn take(&mut self) -> Vec<crate::eventlog::Record> {
        std::mem::take(&mut self.batch)
    }
}
