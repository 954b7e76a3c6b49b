//! Line 1's budget keeps what identifies a death: over every fixture log,
//! as captured and with every command line made long enough to press the
//! 300 characters, no verdict loses an identifying element (the lead
//! death's victim pid, its killer's pid, the tests or workers that tell
//! victim and killer apart, the pid of a victim outside the run) while it
//! keeps a routine one (a leak clause, a second cause, the example of a
//! non-zero exit beside a lead clause); a leftover that ended by itself
//! within a second of the command is never named on it. No root needed.
use crate::records::Records;
use std::path::{Path, PathBuf};

use tracer_user::{
    analysis::{DeathMention, Rank},
    eventlog::{read_log, EventLog, Record},
    report::{build_report, Report, ReportOptions},
    text::{one_line, MAX_VERDICT_CHARS},
};

fn fixtures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .collect();
    all.sort();
    assert!(all.len() > 50, "the fixtures are there: {}", all.len());
    all
}

/// Every exec's argv and every leak's argv, each argument past the first
/// made long: a CI job's command lines (paths, flags, test filters).
fn lengthened(mut log: EventLog) -> EventLog {
    let long = |a: &mut Vec<String>| {
        for (i, arg) in a.iter_mut().enumerate().skip(1) {
            arg.push_str(&format!("-{}", "x".repeat(30 + i)));
        }
        a.push("--reporter=verbose --coverage.enabled=true".into());
    };
    for e in &mut log.events {
        match e {
            Record::Exec(x) => long(&mut x.argv),
            Record::Leak(l) => long(&mut l.argv),
            _ => {}
        }
    }
    log
}

/// `log` with a process the run's root forked at the end, given a long
/// command line and left running at the command's exit (a `leak` record):
/// a leak clause, routine beside what identifies the lead death, competes
/// for line 1. Appended after the last record, in its own seq and time.
fn with_a_leak(mut log: EventLog) -> EventLog {
    let Some(root) = log
        .events
        .iter()
        .forks()
        .find(|f| f.parent.pid == log.header.tracer_pid)
        .map(|f| f.child.clone())
    else {
        return log;
    };
    let (seq, t) = log
        .events
        .iter()
        .filter_map(|e| e.stamp())
        .map(|s| (s.seq, s.t))
        .max()
        .unwrap_or((0, 0));
    let child =
        serde_json::json!({"pid": 4_000_000, "tid": 4_000_000, "start": t + 1, "comm": "daemon"});
    let argv = [
        "device-daemon",
        "--listen",
        "/tmp/a-rather-long-socket-path-for-a-test.sock",
    ];
    let lines = [
        serde_json::json!({"type": "fork", "seq": seq + 1, "t": t + 1, "time": "2026-01-01T00:00:00Z",
            "parent": serde_json::to_value(&root).unwrap(), "child": child, "thread": false}),
        serde_json::json!({"type": "exec", "seq": seq + 2, "t": t + 2, "time": "2026-01-01T00:00:00Z",
            "task": child, "filename": "/usr/bin/device-daemon", "argv": argv, "argv_truncated": false}),
        serde_json::json!({"type": "leak", "seq": seq + 3, "t": t + 3, "time": "2026-01-01T00:00:00Z",
            "task": child, "ppid": root.pid, "pgid": root.pid, "sid": root.pid, "argv": argv,
            "exe": "/usr/bin/device-daemon", "reparented": true, "detached": true, "fds": []}),
    ];
    // Before the trailer, if there is one.
    let at = log
        .events
        .iter()
        .position(|e| e.stamp().is_none() && matches!(e, Record::Trailer(_)))
        .unwrap_or(log.events.len());
    for (i, l) in lines.into_iter().enumerate() {
        let rec: Record = serde_json::from_value(l).expect("a record");
        log.events.insert(at + i, rec);
    }
    log
}

/// `(pid N` as a process is named: "(pid N)", "(pid N, a fork …)".
fn names_pid(verdict: &str, pid: u32) -> bool {
    verdict.contains(&format!("(pid {pid})")) || verdict.contains(&format!("(pid {pid},"))
}

/// What the verdict must keep of `r`, and what is routine in it.
fn check(name: &str, r: &Report) {
    let v = &r.verdict;
    let shown = tracer_user::text::markdown::inline(v).chars().count();
    assert!(shown <= MAX_VERDICT_CHARS, "{name}: {shown} chars: {v}");
    let a = &r.analysis;
    for l in a.leftovers.iter().filter(|l| l.routine) {
        let at = v.find("Leaked: ").map_or("", |i| &v[i..]);
        assert!(
            !names_pid(at, l.process.pid),
            "{name}: a routine leftover named on line 1: {v}"
        );
    }
    let rank = if a.counts.unexpected > 0 {
        Rank::Unexpected
    } else {
        Rank::NonzeroExit
    };
    // A quiet helper's exit is counted, never named (analysis/quiet.rs):
    // the lead is the first death that is not one.
    for c in a.certificates.iter().filter(|c| c.quiet_helper) {
        assert!(
            !names_pid(v, c.victim.process.pid),
            "{name}: a quiet helper named on line 1: {v}"
        );
    }
    let mut of_rank = a
        .certificates
        .iter()
        .filter(|c| c.rank == rank && !c.quiet_helper);
    let lead = of_rank.next();
    let second = of_rank.next();
    let outbound = a.foreign_signals.iter().find(|f| f.outbound_kill);
    let lead_clause = outbound.is_some() || !r.snapshots.is_empty();
    let named = |c: Option<&tracer_user::analysis::Certificate>| {
        c.is_some_and(|c| names_pid(v, c.victim.process.pid))
    };
    // Routine beside what identifies the lead death: a leak clause, the
    // quiet helpers' count, a second cause, the example of a non-zero exit
    // beside a lead clause.
    let routine = v.contains(". Leaked: ")
        || v.contains(". Routine: ")
        || named(second)
        || (lead_clause && rank == Rank::NonzeroExit && named(lead));
    if !routine {
        return;
    }
    // The tracer as the target is no victim: its pid names nothing in the
    // job's code (the sender's pattern does).
    if let Some(f) = outbound.filter(|f| !f.target_is_tracer) {
        assert!(
            names_pid(v, f.target.pid),
            "{name}: the victim outside the run lost its pid while line 1 keeps a routine clause: {v}"
        );
    }
    let Some(c) = lead.filter(|_| outbound.is_none()) else {
        return;
    };
    assert!(
        names_pid(v, c.victim.process.pid),
        "{name}: the lead death's victim pid lost beside a routine clause: {v}"
    );
    if let Some(k) = c
        .killer
        .as_ref()
        .filter(|k| k.process.pid != c.victim.process.pid)
    {
        assert!(
            names_pid(v, k.process.pid),
            "{name}: the killer's pid lost beside a routine clause: {v}"
        );
    }
    let ids = one_line(&DeathMention::of(c).identifies);
    assert!(
        v.contains(&ids),
        "{name}: the tests/workers telling victim and killer apart ({ids}) lost beside a \
         routine clause: {v}"
    );
}

#[test]
fn no_verdict_loses_what_identifies_a_death_while_it_keeps_routine() {
    for path in fixtures() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Ok(log) = read_log(&path) else { continue };
        let opts = ReportOptions::default();
        check(&name, &build_report(&log, &opts));
        let long = lengthened(log);
        check(
            &format!("{name} (long command lines)"),
            &build_report(&long, &opts),
        );
        check(
            &format!("{name} (long command lines, a leak)"),
            &build_report(&with_a_leak(long), &opts),
        );
    }
}

/// The leaked process of [`with_a_leak`] ends by itself `after_ns` after
/// its leak record.
fn ending(mut log: EventLog, after_ns: u64) -> EventLog {
    let leak = log
        .events
        .iter()
        .leaks()
        .find(|l| l.task.pid == 4_000_000)
        .cloned()
        .expect("the leak");
    let at = log
        .events
        .iter()
        .position(|e| matches!(e, Record::Leak(l) if l.task.pid == 4_000_000))
        .unwrap();
    let exit = serde_json::json!({"type": "exit", "seq": leak.at.seq + 1, "t": leak.at.t + after_ns,
        "time": "2026-01-01T00:00:01Z", "task": serde_json::to_value(&leak.task).unwrap(),
        "exit_code": 0, "status": {"exited": {"code": 0}}, "group_dead": true});
    log.events
        .insert(at + 1, serde_json::from_value(exit).unwrap());
    log
}

/// A worker that winds down 150 ms after the command (vitest's tinypool
/// workers end 12–154 ms after vitest) is routine: not named on line 1,
/// still listed below; one still running 2 s later is a leak line 1 names.
#[test]
fn a_leftover_ending_within_a_second_of_the_command_is_not_named() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/exits.ndjson");
    let log = || with_a_leak(read_log(&path).unwrap());
    let opts = ReportOptions::default();
    let soon = build_report(&ending(log(), 150_000_000), &opts);
    let l = &soon.analysis.leftovers;
    assert!(
        l.iter().any(|l| l.routine && l.process.pid == 4_000_000),
        "{l:?}"
    );
    assert!(!soon.verdict.contains("Leaked:"), "{}", soon.verdict);
    let late = build_report(&ending(log(), 2_000_000_000), &opts);
    assert!(
        late.verdict.contains("Leaked: `device-daemon"),
        "{}",
        late.verdict
    );
}
