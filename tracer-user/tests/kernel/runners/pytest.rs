//! pytest 9 with pytest-xdist 3.8, `-n 2`, one file per worker.
use tracer_user::analysis::{LinkEvidence, Relation};

use super::*;
use crate::common::root;
use crate::common::suites::{cache, Suite};

fn pytest() -> Vec<String> {
    let python = cache().join("venv/bin/python");
    // No cache provider, no bytecode (PYTHONDONTWRITEBYTECODE): pytest runs
    // in the repository and writes nothing there.
    [
        python.to_str().unwrap(),
        "-m",
        "pytest",
        "-n",
        "2",
        "--dist",
        "loadfile",
        "-p",
        "no:cacheprovider",
        "-q",
    ]
    .map(str::to_string)
    .to_vec()
}

#[test]
fn xdist_worker_killed_by_its_sibling() {
    let argv = pytest();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (suite, r) = run("pytest-xdist", || Suite::in_place("pytest"), &[], &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    // xdist's "worker 'gw0' crashed while running …" goes to stdout, which
    // last words do not read: the link is the window, and xdist starts a
    // new worker (1-3 s here) before it exits.
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::Window);
}

/// The same run with the job's stdout and stderr one log, as CI keeps it:
/// xdist's `worker 'gw1' crashed while running '…'` (on stdout) is then in
/// pytest's last words, and ties its exit to the kill however long the rest
/// of the suite runs.
#[test]
fn xdist_crash_line_ties_pytest_to_the_kill_in_a_one_file_log() {
    let argv = pytest();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let suite = Suite::in_place("pytest");
    let (r, took) = suite.record_as_one_log(&[], &argv);
    eprintln!("runners: pytest-xdist, one log: {took:.1?} under tracer");
    assert_eq!(
        r.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&r.output.stdout)
    );
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::LastWords);
    let detail = &runner.consequence_of.as_ref().unwrap().detail;
    assert!(detail.contains("crashed while running"), "{detail}");
}
