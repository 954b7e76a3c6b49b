//! Named cancellation (analysis/cancel.rs) over real captures: the CI
//! runner's cancellation of the job is one finding that leads the verdict,
//! and the deaths it caused rank expected. Each log was recorded by
//! tests/kernel/caught/cancelled.rs (`CERT_KEEP`): bash waiting on node with a
//! sleep beside it, cancelled by a bash run through a link named as the
//! runner (its process is called `Runner.Worker`, `gitlab-runner`,
//! `cargo-nextest`), with short waits: the signature reads no interval.
use tracer_user::{
    analysis::{CauseKind, Rank},
    report::Report,
};

use crate::common::fixture_report;

/// The signals of the finding, by name, in order.
fn sig_names(r: &Report) -> Vec<&str> {
    let c = r.analysis.cancellation.as_ref().expect("a cancellation");
    c.signals.iter().map(|s| s.sig_name.as_str()).collect()
}

/// Every death is the cancellation's, and nothing fails `--fail-on
/// foreign-signal,unexpected-death`: the runner has marked the job.
fn assert_all_cancelled(r: &Report) {
    let a = &r.analysis;
    assert_eq!(a.counts.unexpected, 0, "{}", r.verdict);
    for c in &a.certificates {
        assert_eq!(c.rank, Rank::Expected, "{}", c.headline);
        assert!(c.cause.cancelled, "{}", c.headline);
    }
    assert_eq!(
        a.cancellation.as_ref().map(|c| c.deaths),
        Some(a.certificates.len())
    );
    assert!(!a.foreign_signals.is_empty());
    assert!(
        a.foreign_signals.iter().all(|f| !f.counted(false)),
        "{:#?}",
        a.foreign_signals
    );
}

#[test]
fn githubs_sigint_sigterm_sigkill_reads_cancelled_by_githubs_runner() {
    let r = fixture_report("real_cancel_github");
    assert!(
        r.verdict
            .starts_with("The job was cancelled by GitHub's runner (`Runner.Worker`, pid "),
        "{}",
        r.verdict
    );
    assert!(
        r.verdict.ends_with("No unexpected deaths."),
        "{}",
        r.verdict
    );
    let c = r.analysis.cancellation.as_ref().unwrap();
    assert_eq!(c.runner.as_deref(), Some("github"));
    assert!(!c.sender_in_run);
    assert_eq!(sig_names(&r), ["SIGINT", "SIGTERM", "SIGKILL", "SIGKILL"]);
    assert!(
        c.summary.contains(": SIGINT to `bash` (pid ")
            && c.summary.contains("SIGTERM to it ")
            && c.summary.contains("then SIGKILL to 2 processes "),
        "{}",
        c.summary
    );
    assert_all_cancelled(&r);
    for c in &r.analysis.certificates {
        assert_eq!(c.cause.kind, CauseKind::KilledOutsideRun);
        assert_eq!(c.rank_reason, "the job was cancelled by GitHub's runner");
        assert!(
            c.headline
                .ends_with(": the job was cancelled by GitHub's runner"),
            "{}",
            c.headline
        );
    }
}

#[test]
fn gitlabs_group_sigkill_reads_cancelled_by_gitlab_runner() {
    let r = fixture_report("real_cancel_gitlab");
    assert!(
        r.verdict
            .starts_with("The job was cancelled by gitlab-runner (`gitlab-runner`, pid "),
        "{}",
        r.verdict
    );
    let c = r.analysis.cancellation.as_ref().unwrap();
    assert_eq!(c.runner.as_deref(), Some("gitlab"));
    assert!(
        c.summary.contains(": SIGKILL to process group "),
        "{}",
        c.summary
    );
    assert_eq!(sig_names(&r), ["SIGKILL"; 3]);
    assert_eq!(r.analysis.certificates.len(), 3);
    assert_all_cancelled(&r);
}

#[test]
fn nextests_sigterm_then_sigkill_to_a_tests_group_names_the_runner() {
    // cargo-nextest inside the run: its child's group, which ignores
    // SIGTERM, then SIGKILL. A parent's stop was expected before; the
    // finding names who stopped it.
    let r = fixture_report("real_cancel_nextest");
    assert!(
        r.verdict
            .starts_with("The tests were stopped by cargo-nextest (`cargo-nextest`, pid "),
        "{}",
        r.verdict
    );
    let c = r.analysis.cancellation.as_ref().unwrap();
    assert_eq!(c.runner.as_deref(), Some("nextest"));
    assert!(c.sender_in_run);
    assert_eq!(sig_names(&r), ["SIGTERM", "SIGKILL"]);
    assert!(
        c.summary.contains(": SIGTERM to process group ")
            && c.summary.contains(", then SIGKILL to it "),
        "{}",
        c.summary
    );
    let sleep = crate::common::cert(&r, &["sleep"]);
    assert_eq!(sleep.rank, Rank::Expected);
    assert_eq!(
        sleep.rank_reason,
        "stopped by cargo-nextest, the run's own test runner"
    );
    assert_eq!(r.analysis.counts.unexpected, 0);
}

#[test]
fn a_foreign_kill_of_one_worker_is_no_cancellation() {
    // An outside process SIGKILLs one worker below the run's root.
    let r = fixture_report("real_outside_kill");
    assert!(r.analysis.cancellation.is_none(), "{}", r.verdict);
    let c = &r.analysis.certificates[0];
    assert_eq!(
        (c.rank, c.cause.kind),
        (Rank::Unexpected, CauseKind::KilledOutsideRun)
    );
    assert!(!c.cause.cancelled);
    assert!(r.analysis.foreign_signals.iter().any(|f| f.counted(false)));
    assert!(r.verdict.starts_with("1 unexpected death"), "{}", r.verdict);
}

#[test]
fn one_lone_sigterm_from_an_unnamed_process_is_no_cancellation() {
    // A daemon's log: `systemd` (outside the scope) SIGTERMs one watched
    // process whose parent is outside too. Not a runner, no escalation, no
    // group kill: a foreign kill, as before.
    let r = fixture_report("daemon");
    assert!(r.analysis.cancellation.is_none(), "{}", r.verdict);
    assert_eq!(r.analysis.counts.unexpected, 1);
}

#[test]
fn the_same_signature_from_an_unnamed_process_reads_an_outside_process() {
    // GitHub's capture with the runner renamed: the shape (SIGINT, SIGTERM,
    // SIGKILL, at the run's root first) is still a cancellation, by "an
    // outside process" named by its command.
    let r = renamed("real_cancel_github.ndjson", "Runner.Worker", "ci-stopper");
    assert!(
        r.verdict
            .starts_with("The job was cancelled by an outside process, `ci-stopper -c "),
        "{}",
        r.verdict
    );
    let c = r.analysis.cancellation.as_ref().unwrap();
    assert_eq!(
        (c.by.as_str(), c.runner.as_deref()),
        ("an outside process", None)
    );
    assert_all_cancelled(&r);
}

#[test]
fn a_ci_runner_inside_the_scope_still_cancels_the_job() {
    // nextest's capture with its runner renamed Runner.Worker: a CI runner
    // the log watched (a daemon's scope can hold it) cancels the job; it
    // does not stop "its tests".
    let r = renamed(
        "real_cancel_nextest.ndjson",
        "cargo-nextest",
        "Runner.Worker",
    );
    assert!(
        r.verdict
            .starts_with("The job was cancelled by GitHub's runner (`Runner.Worker`, pid "),
        "{}",
        r.verdict
    );
    let c = r.analysis.cancellation.as_ref().unwrap();
    assert!(c.sender_in_run);
    let sleep = crate::common::cert(&r, &["sleep"]);
    assert_eq!(
        sleep.rank_reason,
        "the job was cancelled by GitHub's runner"
    );
}

/// A fixture with every `from` replaced by `to`, as a report.
fn renamed(name: &str, from: &str, to: &str) -> Report {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let text = std::fs::read_to_string(path).unwrap().replace(from, to);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("events.ndjson");
    std::fs::write(&log, text).unwrap();
    tracer_user::report::build_report(
        &tracer_user::eventlog::read_log(&log).unwrap(),
        &tracer_user::report::ReportOptions::default(),
    )
}
