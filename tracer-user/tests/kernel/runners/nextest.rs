//! cargo-nextest: the fixture crate's `worker::` tests, each its own
//! process (nextest's process-per-test).
use tracer_user::{
    analysis::{LinkEvidence, Relation},
    labels::{Runner, Via},
};

use super::cargo_test::{build_the_crate, crate_command};
use super::*;
use crate::common::root;
use crate::common::suites::Suite;

/// Under `tracer record --tests` (nothing to inject for Rust: nextest runs
/// each test in a process of its own, named in its argv and env), the
/// worker's death names its own test and the test that killed it.
#[test]
fn test_process_killed_by_its_sibling() {
    let status = std::process::Command::new("cargo")
        .args(["nextest", "--version"])
        .output()
        .expect("run cargo");
    assert!(
        status.status.success(),
        "cargo-nextest is not installed (cargo xtask test installs it): {}",
        crate::common::suites::both(&status)
    );
    let argv = crate_command(
        &["nextest", "run"],
        &["--test-threads", "2", "-E", "test(/^worker::/)"],
    );
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    build_the_crate();
    let (suite, r) = run(
        "cargo nextest",
        || Suite::in_place("rust"),
        &["--tests"],
        &argv,
    );
    assert_eq!(r.code(), Some(100), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    named_by_the_kernel(
        &rep,
        dead.victim.test.as_ref(),
        Runner::Nextest,
        "worker::sibling_holds_its_process",
        Via::Own,
    );
    named_by_the_kernel(
        &rep,
        dead.killer.as_ref().unwrap().test.as_ref(),
        Runner::Nextest,
        "worker::cleanup_kills_stray_workers",
        Via::Own,
    );
    // nextest's `SIGKILL [ 0.012s] (1/2) runner-suite worker::…` line.
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::LastWords);
}
