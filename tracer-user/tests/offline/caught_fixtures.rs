//! Caught, then re-raised or exited: the analysis over real captures
//! (tests/fixtures/real_caught_*.ndjson, real_cancel_bash.ndjson). Each was
//! recorded by `tracer record` on a real kernel with the real programs:
//! Node's default SIGTERM handling (it catches, then raise()s), bash's
//! cooperative exit on SIGINT, Python handlers that exit(1) or re-raise.
//! The killer is the sender of the caught signal, never the victim.
use std::path::PathBuf;

use tracer_user::{
    analysis::{CauseKind, Certificate, Rank, Relation},
    eventlog::{read_log, ExitStatus},
    report::{build_report, Report, ReportOptions, RANKING_RULE},
};

fn report(name: &str) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let log = read_log(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    build_report(&log, &ReportOptions::default())
}

/// The one certificate whose victim's command is `needle`, or else contains it.
fn cert<'a>(r: &'a Report, needle: &str) -> &'a Certificate {
    let certs = &r.analysis.certificates;
    let mut found: Vec<_> = certs
        .iter()
        .filter(|c| c.victim.process.command == needle)
        .collect();
    if found.is_empty() {
        found = certs
            .iter()
            .filter(|c| c.victim.process.command.contains(needle))
            .collect();
    }
    assert_eq!(found.len(), 1, "one certificate for {needle:?}: {found:#?}");
    found[0]
}

#[test]
fn pkill_against_a_node_runner_names_pkill_not_node() {
    // bash runner.sh: node … pkill-target-h1x &; pkill -TERM -f pkill-target-h1x.
    // Node catches SIGTERM (its default handler) and raise()s it again.
    let r = report("real_caught_pkill_node.ndjson");
    let c = cert(&r, "setInterval");
    assert_eq!(
        c.rank,
        Rank::Unexpected,
        "a sibling's pkill is no orderly stop"
    );
    assert_eq!(c.cause.kind, CauseKind::KilledInRun);
    let k = c.killer.as_ref().expect("the killer is named");
    assert!(k.process.command.starts_with("pkill -TERM -f"), "{k:#?}");
    assert_eq!(k.relation, Relation::Sibling);
    assert_eq!(k.syscall.as_deref(), Some("kill"));
    // The fatal signal is pkill's; the self-raise stays as evidence.
    let sig = c.cause.signal.as_ref().unwrap();
    let re = c.cause.reraised.as_ref().expect("the re-raise is kept");
    assert_eq!(
        (sig.sig_name.as_str(), re.sig_name.as_str()),
        ("SIGTERM", "SIGTERM")
    );
    assert_eq!(
        re.code_name, "SI_TKILL",
        "node re-raises with raise(): tgkill"
    );
    assert!(sig.seq < re.seq);
    assert!(c.evidence.contains(&sig.seq) && c.evidence.contains(&re.seq));
    assert!(
        c.headline.contains(&format!(
            "caught SIGTERM from `pkill -TERM -f pkill-target-h1x` (pid {}), a sibling, via kill(",
            k.process.pid
        )) && c
            .headline
            .contains("and re-raised it on itself via tgkill("),
        "{}",
        c.headline
    );
    assert!(!c.headline.contains("sent by itself"), "{}", c.headline);
    // History: pkill's delivery is the one blamed, node's own comes after.
    let blamed: Vec<_> = c.history.iter().filter(|h| h.fatal).collect();
    assert_eq!(blamed.len(), 1);
    assert_eq!(blamed[0].relation, Some(Relation::Sibling));
    assert!(c
        .history
        .iter()
        .any(|h| h.relation == Some(Relation::Itself) && h.signal.seq == re.seq));
    assert!(
        r.verdict.starts_with("1 unexpected death: `node -e"),
        "{}",
        r.verdict
    );
}

#[test]
fn cancellation_of_the_tracer_is_expected_whatever_bash_does() {
    // SIGINT to the tracer running `bash -c 'sleep 100; echo after'`: the
    // tracer forwards it to the job's group; sleep dies of it, bash waits
    // for sleep and then kills itself with SIGINT (kill(getpid())).
    let r = report("real_cancel_bash.ndjson");
    assert_eq!(r.analysis.counts.unexpected, 0, "{}", r.verdict);
    let bash = cert(&r, "bash -c");
    assert_eq!(bash.rank, Rank::Expected);
    assert_eq!(bash.cause.kind, CauseKind::Tracer);
    assert!(bash.cause.cancelled);
    assert_eq!(bash.killer.as_ref().unwrap().relation, Relation::Tracer);
    let re = bash
        .cause
        .reraised
        .as_ref()
        .expect("bash's own kill(getpid(), SIGINT)");
    assert_eq!(re.sig_name, "SIGINT");
    assert!(
        bash.headline.contains("the run was cancelled"),
        "{}",
        bash.headline
    );
    assert!(bash.rank_reason.starts_with("the run was cancelled"));
    let sleep = cert(&r, "sleep 100");
    assert_eq!(
        (sleep.rank, sleep.cause.kind, sleep.cause.cancelled),
        (Rank::Expected, CauseKind::Tracer, true)
    );
    assert!(sleep.cause.reraised.is_none());
    assert!(!r.verdict.contains("unexpected death:"), "{}", r.verdict);
    assert!(r.verdict.contains("No unexpected deaths"), "{}", r.verdict);
}

#[test]
fn python_handlers_exit_or_re_raise_and_the_sender_is_blamed() {
    // /usr/bin/python3 worker.py exit1: handler writes to stderr, sys.exit(1),
    // SIGTERM from a sibling `sh -c kill`. worker.py reraise: SIG_DFL +
    // raise_signal, SIGTERM from its parent bash.
    let r = report("real_caught_python.ndjson");
    let a = cert(&r, "worker.py exit1");
    assert_eq!(a.victim.status, ExitStatus::Exited { code: 1 });
    assert_eq!(a.cause.kind, CauseKind::KilledInRun);
    assert_eq!(a.rank, Rank::Unexpected);
    assert_eq!(a.cause.handled_then_exited, Some(1));
    assert!(a.cause.reraised.is_none());
    let k = a.killer.as_ref().unwrap();
    assert_eq!(k.relation, Relation::Sibling);
    assert!(k.process.command.starts_with("sh -c kill -TERM"));
    assert!(
        a.headline.contains("caught SIGTERM from `sh -c kill -TERM")
            && a.headline.contains(", a sibling, via kill(")
            && a.headline.contains("and exited with code 1 "),
        "{}",
        a.headline
    );
    assert!(!a.headline.contains("no signal involved"));
    // Certified although it lived well under a second and had no children.
    assert!(a.victim.lifetime_ns < 1_000_000_000 && a.victim.children == 0);

    let b = cert(&r, "worker.py reraise");
    assert_eq!(
        b.rank,
        Rank::Expected,
        "its parent stopped it: {}",
        b.rank_reason
    );
    assert_eq!(b.cause.kind, CauseKind::KilledInRun);
    assert_eq!(b.killer.as_ref().unwrap().relation, Relation::Parent);
    assert_eq!(b.cause.reraised.as_ref().unwrap().code_name, "SI_TKILL");
    assert!(
        b.rank_reason.contains("re-raised it on itself"),
        "{}",
        b.rank_reason
    );
}

#[test]
fn a_caught_signal_long_before_the_exit_is_said_but_not_blamed() {
    // The handler slept 5.5 s before sys.exit(1): outside the 5 s window,
    // so the exit is its own, yet the report never says "no signal involved".
    let r = report("real_caught_slow_exit.ndjson");
    let c = cert(&r, "slowexit.py");
    assert_eq!(c.cause.kind, CauseKind::NonzeroExit);
    assert_eq!(c.rank, Rank::NonzeroExit);
    assert!(c.killer.is_none());
    assert!(!c.headline.contains("no signal involved"), "{}", c.headline);
    assert!(
        c.headline
            .contains("it had caught SIGTERM from `sh -c kill -TERM"),
        "{}",
        c.headline
    );
    assert!(
        c.rank_reason.contains("is not taken as the cause"),
        "{}",
        c.rank_reason
    );
}

#[test]
fn the_window_is_the_one_the_ranking_rule_states() {
    assert!(RANKING_RULE.contains("exited non-zero within 5 s"));
    assert!(RANKING_RULE.contains("raised the same signal on itself"));
    // The slow exit's handler slept 5.5 s; a window of 6 s would blame it.
    let r = report("real_caught_slow_exit.ndjson");
    let c = cert(&r, "slowexit.py");
    let caught_t = c
        .history
        .iter()
        .find(|h| h.signal.sig_name == "SIGTERM")
        .unwrap()
        .signal
        .t;
    let gap = c.victim.end_t - caught_t;
    assert!(gap > 5_000_000_000 && gap < 6_000_000_000, "{gap}");
}

#[test]
fn a_crash_handler_that_re_raises_died_of_the_fault() {
    // /usr/bin/python3 -X faulthandler -c 'import ctypes; ctypes.string_at(0)':
    // the kernel's SIGSEGV (SEGV_MAPERR), faulthandler's dump, then its
    // raise(SIGSEGV).
    let r = report("real_faulthandler.ndjson");
    let c = cert(&r, "faulthandler");
    assert_eq!(c.cause.kind, CauseKind::Fault);
    assert!(c.killer.is_none(), "a fault has no sender to blame");
    assert_eq!(c.cause.signal.as_ref().unwrap().code_name, "SEGV_MAPERR");
    assert_eq!(c.cause.reraised.as_ref().unwrap().code_name, "SI_TKILL");
    assert!(
        c.headline.contains(
            "crashed: SIGSEGV (SEGV_MAPERR) raised by the kernel on a faulting access; its \
             handler caught it and re-raised it via tgkill("
        ),
        "{}",
        c.headline
    );
}

#[test]
fn only_a_request_to_stop_explains_an_exit() {
    // The same real capture with the sibling's SIGTERM turned into SIGUSR1
    // (a status dump): the exit 1 4 ms later is the worker's own, though the
    // caught signal is still named.
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_caught_python.ndjson");
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
        let to_worker = v["target"]["pid"] == 28399 || v["target_arg"] == 28399;
        if to_worker && v["sig"] == 15 {
            v["sig"] = 10.into();
            v["sig_name"] = "SIGUSR1".into();
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("usr1.ndjson");
    std::fs::write(&edited, out).unwrap();
    let r = build_report(&read_log(&edited).unwrap(), &ReportOptions::default());
    let c = cert(&r, "worker.py exit1");
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::NonzeroExit, Rank::NonzeroExit)
    );
    assert!(c.killer.is_none() && c.cause.handled_then_exited.is_none());
    assert!(
        c.headline
            .contains("; it had caught SIGUSR1 from `sh -c kill -TERM 28399`"),
        "{}",
        c.headline
    );
}
