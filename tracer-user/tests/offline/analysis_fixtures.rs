//! The analysis over hand-made event logs (tests/fixtures/*.ndjson): one
//! scenario per cause class and relation. Each assertion names what a wrong
//! analysis would get wrong.
use std::path::PathBuf;

use tracer_user::{
    analysis::{CauseKind, Certificate, Direction, LinkEvidence, Rank, Relation},
    eventlog::{read_log, EventLog, ExitStatus, ProcKey},
    model::Model,
    report::{build_report, render_markdown, Report, ReportOptions},
};

fn fixture(name: &str) -> EventLog {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    read_log(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn report(name: &str) -> Report {
    build_report(&fixture(name), &ReportOptions::default())
}

fn cert(r: &Report, pid: u32) -> &Certificate {
    let found: Vec<_> = r
        .analysis
        .certificates
        .iter()
        .filter(|c| c.victim.process.pid == pid)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one certificate for pid {pid}, got {}",
        found.len()
    );
    found[0]
}

#[test]
fn seed000_group_kill_names_the_sibling_and_the_process_group() {
    let r = report("seed000_group_kill.ndjson");
    let c = cert(&r, 4242);
    assert_eq!(c.rank, Rank::Unexpected);
    assert_eq!(c.cause.kind, CauseKind::KilledInRun);
    let k = c.killer.as_ref().expect("a killer");
    assert_eq!(k.process.pid, 4100);
    assert_eq!(k.process.command, "node runner-session.test");
    assert_eq!(k.relation, Relation::Sibling);
    assert_eq!(
        (k.syscall.as_deref(), k.target_arg),
        (Some("kill"), Some(-4242))
    );
    assert_eq!(k.aimed_at, "process group 4242");
    assert_eq!(k.deliveries, Some(3));
    // The runner's SIGTERM to a postgres outside the run leads the verdict;
    // the worker's SIGKILL came 5 s after a SIGTERM it ignored.
    assert!(
        r.verdict.starts_with(
            "`node runner-session.test` (pid 4100) in the run sent SIGTERM to `[postgres]` (pid \
             4343), outside the run, via kill(4343, SIGTERM). Inside the run: 3 unexpected deaths: \
             `node worker.js` (pid 4242) killed by SIGKILL from `node runner-session.test` (pid \
             4100), a sibling, via kill(-4242, SIGKILL)"
        ),
        "verdict: {}",
        r.verdict
    );
    // The verdict is one step-summary line (300 characters): the rest of
    // the cause is the certificate's.
    assert!(r.verdict.chars().count() <= 300, "{}", r.verdict);
    assert!(
        c.headline
            .ends_with("a process-group kill of group 4242, 5.0 s after a SIGTERM from pid 4100 that it ignored"),
        "{}",
        c.headline
    );
    // SIGTERM ignored first, then the fatal SIGKILL; SIGCHLD from its own
    // dying children is noise and stays out.
    let hist: Vec<_> = c
        .history
        .iter()
        .map(|h| {
            (
                h.signal.sig_name.as_str(),
                h.signal.result.as_str(),
                h.fatal,
            )
        })
        .collect();
    assert_eq!(
        hist,
        [
            ("SIGTERM", "ignored", false),
            ("SIGKILL", "delivered", true)
        ]
    );
    // The group's other members: same call, different relation.
    let grandchild = cert(&r, 4243);
    assert_eq!(
        grandchild.killer.as_ref().unwrap().relation,
        Relation::UnrelatedInRun
    );
    assert_eq!(grandchild.killer.as_ref().unwrap().call_seq, k.call_seq);
    assert_eq!(cert(&r, 4244).cause.kind, CauseKind::KilledInRun);
    // The wrapped command's own exit 1 follows from its worker's death
    // (within the cascade window): a consequence, ranked after, pointing
    // back to the kill, and not a second death in the verdict.
    let root = cert(&r, 4000);
    assert_eq!(root.rank, Rank::Consequence);
    let link = root.consequence_of.as_ref().expect("linked to its cause");
    assert_eq!((link.of, link.root), (c.id, c.id));
    assert!(
        root.headline.contains(&format!(
            "exited with code 1 because its child `node worker.js` (pid 4242) was killed by SIGKILL from `node runner-session.test` (pid 4100) (see #{})",
            c.id
        )),
        "{}",
        root.headline
    );
    assert_eq!(c.consequences, [root.id]);
    assert_eq!(r.analysis.counts.consequence, 1);
    assert_eq!(
        r.analysis.certificates.last().unwrap().victim.process.pid,
        4000
    );
}

#[test]
fn group_kill_is_one_call_with_three_deliveries() {
    let log = fixture("seed000_group_kill.ndjson");
    let m = Model::build(&log);
    let calls: Vec<usize> = (0..m.kill_calls.len())
        .filter(|&k| m.kill_calls[k].ev.target_arg == -4242)
        .collect();
    assert_eq!(calls.len(), 1);
    let targets: Vec<u32> = m
        .signals_of(calls[0])
        .map(|i| m.signals[i].target.pid)
        .collect();
    assert_eq!(targets, [4242, 4243, 4244]);
}

#[test]
fn esrch_near_miss_and_foreign_signal_are_reported() {
    let r = report("seed000_group_kill.ndjson");
    let miss: Vec<_> = r
        .analysis
        .near_misses
        .iter()
        .map(|n| {
            let sender = r.analysis.entry(n.sender_id).expect("sender entry");
            (n.target_arg, n.errno.as_deref(), sender.pid)
        })
        .collect();
    assert_eq!(miss, [(4141, Some("ESRCH"), 4100)]);
    let f = &r.analysis.foreign_signals;
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].direction, f[0].target.pid, f[0].sender.pid),
        (Direction::RunToOutside, 4343, 4100)
    );
    assert!(!f[0].target.in_run);
}

#[test]
fn oom_blames_the_kernel_never_the_allocating_task() {
    let r = report("oom.ndjson");
    let c = cert(&r, 210);
    assert_eq!(c.cause.kind, CauseKind::Oom);
    assert!(
        c.killer.is_none(),
        "the allocating task must not be named killer"
    );
    let o = c.oom.as_ref().expect("oom facts");
    assert_eq!(
        (o.trigger.pid, o.trigger_is_victim, o.victim_tid),
        (220, false, 211)
    );
    assert_eq!(
        o.memcg.as_ref().and_then(|m| m.path.as_deref()),
        Some("/ci/job-7")
    );
    assert_eq!(o.limit_bytes, Some(512 << 20));
    assert_eq!(o.oom_score_adj, Some(0));
    assert!(
        c.headline.contains("kernel OOM killer") && c.headline.contains("limit 512 MiB"),
        "{}",
        c.headline
    );
    assert!(!c.headline.contains("alloc.js"), "{}", c.headline);
    // In the history the SIGKILL is the kernel's, with no relation to blame.
    assert!(c.history[0].raised_by_kernel && c.history[0].relation.is_none());
    let md = render_markdown(&r);
    assert!(md.contains("it is **not** the culprit"), "{md}");
    // bash reporting its child's SIGKILL as 137 points back to the OOM kill.
    let bash = cert(&r, 200);
    assert_eq!(bash.rank, Rank::Consequence);
    assert!(
        bash.headline.contains(
            "exited with code 137 because its child `python3 train.py --epochs 3` (pid 210) was killed by the kernel OOM killer"
        ),
        "{}",
        bash.headline
    );
    let link = bash.consequence_of.as_ref().unwrap();
    assert_eq!(link.evidence, LinkEvidence::ExitCode);
    assert_eq!(r.analysis.counts.unexpected, 1);
}

#[test]
fn oom_victim_thread_maps_to_its_process() {
    let log = fixture("oom.ndjson");
    let m = Model::build(&log);
    let victim = m.ooms[0].victim.expect("resolved");
    assert_eq!(victim.pid, 210);
    assert!(
        m.ooms[0].signal.is_some(),
        "paired with the SI_KERNEL SIGKILL"
    );
}

#[test]
fn crashes_are_told_apart() {
    let r = report("crashes.ndjson");
    let kinds: Vec<(u32, CauseKind)> = [310, 320, 330, 340, 350, 360]
        .iter()
        .map(|&p| (p, cert(&r, p).cause.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            (310, CauseKind::Fault),
            (320, CauseKind::SelfInflicted),
            (330, CauseKind::Sigpipe),
            (340, CauseKind::GroupExit),
            // Its own alarm: the kernel fired it while `make` was on the CPU.
            (350, CauseKind::OwnTimer),
            // A complete log (trailer, no loss, every hook attached) with
            // no signal event: the kernel ended it, nothing was missed.
            (360, CauseKind::KernelExit),
        ]
    );
    let alarm = cert(&r, 350);
    assert!(
        alarm
            .headline
            .contains("killed by SIGALRM: its own timer fired")
            && !alarm.headline.contains("make"),
        "{}",
        alarm.headline
    );
    assert_eq!(
        alarm.history[0].sender.pid, 350,
        "the timer is its own, not make's"
    );
    assert_eq!(alarm.rank, Rank::NonzeroExit);
    let segv = cert(&r, 310);
    assert!(segv.victim.core_dumped && segv.killer.is_none());
    assert!(segv.headline.contains("SEGV_MAPERR"), "{}", segv.headline);
    assert_eq!(
        cert(&r, 320).killer.as_ref().unwrap().relation,
        Relation::Itself
    );
    assert!(
        cert(&r, 360)
            .headline
            .contains("no signal was ever generated for it (every hook attached, nothing lost)"),
        "{}",
        cert(&r, 360).headline
    );
    // The same death on a log that lost events must admit the gap instead.
    let mut lossy = fixture("crashes.ndjson");
    lossy.trailer.as_mut().unwrap().lost.ringbuf_full = 1;
    let r2 = build_report(&lossy, &ReportOptions::default());
    let c = cert(&r2, 360);
    assert_eq!(c.cause.kind, CauseKind::Unknown);
    assert!(c.headline.contains("no signal event"), "must admit the gap");
    assert!(r
        .analysis
        .certificates
        .iter()
        .all(|c| c.rank != Rank::Expected || c.victim.process.pid == 300));
}

#[test]
fn every_relation_is_classified_and_ranked() {
    let r = report("relations.ndjson");
    let rel = |pid| cert(&r, pid).killer.as_ref().map(|k| k.relation);
    assert_eq!(rel(411), Some(Relation::Ancestor));
    assert_eq!(rel(415), Some(Relation::Parent));
    assert_eq!(rel(421), Some(Relation::Descendant));
    assert_eq!(rel(431), Some(Relation::Sibling));
    assert_eq!(rel(440), Some(Relation::OutsideRun));
    assert_eq!(rel(400), Some(Relation::Tracer));
    let kinds: Vec<(u32, CauseKind, Rank)> = [411, 415, 421, 431, 440, 451, 460, 400]
        .iter()
        .map(|&p| (p, cert(&r, p).cause.kind, cert(&r, p).rank))
        .collect();
    assert_eq!(
        kinds,
        [
            (411, CauseKind::KilledInRun, Rank::Expected),
            (415, CauseKind::KilledInRun, Rank::Expected),
            (421, CauseKind::KilledInRun, Rank::Unexpected),
            (431, CauseKind::KilledInRun, Rank::Unexpected),
            (440, CauseKind::KilledOutsideRun, Rank::Unexpected),
            (451, CauseKind::ParentDeathSignal, Rank::Expected),
            (460, CauseKind::KilledInRun, Rank::Expected),
            (400, CauseKind::Tracer, Rank::Expected),
        ]
    );
    // Unexpected deaths come first.
    let ranks: Vec<Rank> = r.analysis.certificates.iter().map(|c| c.rank).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    // Caught SIGTERM, then exited 143: the signal is the cause.
    assert_eq!(cert(&r, 460).cause.handled_then_exited, Some(143));
    // The tracer's forwarded signal is a boundary crossing, marked as such.
    assert!(r
        .analysis
        .foreign_signals
        .iter()
        .any(|f| f.sender_is_tracer && f.target.pid == 400));
    assert!(r
        .analysis
        .foreign_signals
        .iter()
        .any(|f| f.direction == Direction::OutsideToRun && f.target.pid == 440));
}

#[test]
fn thread_targeted_kill_kills_the_process() {
    let r = report("relations.ndjson");
    let c = cert(&r, 431);
    let k = c.killer.as_ref().unwrap();
    assert_eq!(
        (k.syscall.as_deref(), k.tid_arg),
        (Some("tgkill"), Some(433))
    );
    assert_eq!(k.aimed_at, "thread 433 of pid 431");
    assert_eq!(c.cause.signal.as_ref().unwrap().target_tid, 433);
    assert!(c.headline.contains("aimed at thread 433"), "{}", c.headline);
}

#[test]
fn pid_reuse_never_merges_two_processes() {
    let log = fixture("pid_reuse.ndjson");
    let m = Model::build(&log);
    let six: Vec<&ProcKey> = m.procs.keys().filter(|k| k.pid == 600).collect();
    assert_eq!(six.len(), 2, "two processes share pid 600");
    let (first, second) = (m.proc(*six[0]).unwrap(), m.proc(*six[1]).unwrap());
    assert!(matches!(
        first.end.as_ref().unwrap().status,
        ExitStatus::Signaled { signal: 9, .. }
    ));
    assert!(matches!(
        second.end.as_ref().unwrap().status,
        ExitStatus::Exited { code: 0 }
    ));
    assert_eq!(*first.execs[0].argv, ["node", "flaky.js"]);
    assert_eq!(*second.execs[0].argv, ["nohup", "sleep", "5"]);
    assert_eq!(
        (first.signals_in().len(), second.signals_in().len()),
        (1, 1)
    );
    assert_eq!(m.tid_owner(600, first.start_t() + 1), Some(first.key));
    assert_eq!(m.tid_owner(600, second.start_t() + 1), Some(second.key));
    let r = build_report(&log, &ReportOptions::default());
    let c = cert(&r, 600);
    assert_eq!(c.victim.process.start, first.key.start);
    assert_eq!(
        c.history.len(),
        1,
        "the second pid-600's SIGHUP is not the first's history"
    );
    // The kill aimed at 600 between the two lives reached nobody.
    assert_eq!(r.analysis.near_misses.len(), 1);
    assert_eq!(r.analysis.near_misses[0].errno.as_deref(), Some("ESRCH"));
}

#[test]
fn nonzero_exits_workers_summary_watch_and_leaks() {
    let r = report("exits.ndjson");
    assert_eq!(cert(&r, 710).cause.kind, CauseKind::NonzeroExit);
    // cargo's 101 came 4.9 s after its child's exit 1: within the cascade
    // window, so it follows from it and is not a second non-zero exit.
    let cargo = cert(&r, 700);
    assert_eq!(cargo.rank, Rank::Consequence);
    assert_eq!(
        cargo.consequence_of.as_ref().map(|l| l.evidence),
        Some(LinkEvidence::Window)
    );
    assert!(r
        .analysis
        .certificates
        .iter()
        .all(|c| c.victim.process.pid != 730));
    let groups: Vec<(&str, usize)> = r
        .analysis
        .other_exits
        .iter()
        .map(|g| (g.program.as_str(), g.count))
        .collect();
    assert_eq!(groups, [("grep", 5), ("eslint", 1)]);
    assert!(r.verdict.starts_with("No unexpected deaths; 1 non-zero exit: `node server/dist/index.js` (pid 710) exited with code 1"), "{}", r.verdict);
    // The seed-001 shape: a daemon outliving the test that spawned it.
    let leak: Vec<_> = r
        .analysis
        .leftovers
        .iter()
        .map(|l| (l.process.pid, l.orphaned))
        .collect();
    assert_eq!(leak, [(746, true)]);
    assert!(
        r.verdict
            .contains("Leaked: `relayflowd --data-dir /tmp/.tmpN14qfH serve` (pid 746)"),
        "{}",
        r.verdict
    );
    assert_eq!(r.run.hooks_missing, ["oom_mark_victim"]);
    assert!(!r.log.complete);

    let watched = build_report(
        &fixture("exits.ndjson"),
        &ReportOptions {
            watch: vec![regex::Regex::new(r"^eslint\b").unwrap()],
            ..Default::default()
        },
    );
    assert_eq!(cert(&watched, 730).cause.kind, CauseKind::NonzeroExit);
    assert_eq!(watched.analysis.other_exits.len(), 1);
}

#[test]
fn truncated_log_is_still_analysed() {
    let log = fixture("truncated.ndjson");
    assert!(log.truncated);
    let r = build_report(&log, &ReportOptions::default());
    assert!(r.log.truncated && !r.log.complete);
    assert!(
        r.verdict
            .ends_with("(incomplete: the log is truncated, so deaths may be missing)"),
        "{}",
        r.verdict
    );
    assert!(render_markdown(&r).contains("**Loss: unknown — the log is truncated**"));
    assert_eq!(cert(&r, 901).cause.kind, CauseKind::KilledOutsideRun);
}

#[test]
fn daemon_mode_process_without_fork() {
    let r = report("daemon.ndjson");
    let c = cert(&r, 800);
    assert!(c.victim.process.in_run && c.victim.ancestry.is_none());
    assert_eq!(c.cause.kind, CauseKind::KilledOutsideRun);
    assert_eq!(c.victim.process.argv, ["node", "agent.js"]);
    assert_eq!(r.run.mode, "daemon");
}

#[test]
fn a_survived_signal_is_not_the_fatal_one() {
    let r = report("survived.ndjson");
    let c = cert(&r, 110);
    // health.py's SIGTERM was caught (svc.js forked git afterwards);
    // deploy.js's later SIGTERM, aimed with an unreadable start time, killed it.
    assert_eq!(c.killer.as_ref().unwrap().process.command, "node deploy.js");
    assert_eq!(c.killer.as_ref().unwrap().relation, Relation::Sibling);
    let fatal: Vec<bool> = c.history.iter().map(|h| h.fatal).collect();
    assert_eq!(fatal, [false, true]);
    let log = fixture("survived.ndjson");
    let m = Model::build(&log);
    assert!(
        m.procs.keys().all(|k| k.start != 0),
        "start 0 resolved to the live pid 110"
    );
}

/// A real capture: the command is `unshare --pid --fork --mount-proc sh -c
/// '…'`, whose `sh` (pid 1 inside) forks `sleep` (pid 2 inside) and a killer
/// that runs `kill -KILL 2; kill -TERM 77`. The certificate must carry the
/// pids the job's own output prints, and the in-namespace target must be
/// resolved to the process it named, not read as a host pid.
#[test]
fn kill_inside_a_pid_namespace_is_resolved_there() {
    let r = report("real_pidns_kill.ndjson");
    let c = cert(&r, 10990);
    assert_eq!(c.cause.kind, CauseKind::KilledInRun);
    let ns = c.victim.process.ns_pid.expect("victim's in-namespace pid");
    assert_eq!((ns.pid, ns.level), (2, 1));
    let k = c.killer.as_ref().expect("killer");
    assert_eq!(k.process.ns_pid.map(|n| n.pid), Some(3));
    assert_eq!(k.target_arg, Some(2), "the argument stays as given");
    let t = k
        .target_ns
        .expect("target resolved in the sender's namespace");
    assert_eq!((t.inum, t.pid), (ns.inum, Some(10990)));
    assert!(k.aimed_at.contains("pid 10990 here"), "{}", k.aimed_at);
    assert!(
        c.headline.contains("pid 10990, pid 2 in its namespace"),
        "{}",
        c.headline
    );

    // kill(77) inside the namespace found no process: the near miss says
    // where it looked, and resolves to nothing rather than to host pid 77.
    let miss = &r.analysis.near_misses[0];
    assert_eq!(miss.target_arg, 77);
    assert_eq!(miss.target_ns.map(|t| t.pid), Some(None));
    assert!(
        miss.aimed_at.contains("sender's pid namespace"),
        "{}",
        miss.aimed_at
    );
}
