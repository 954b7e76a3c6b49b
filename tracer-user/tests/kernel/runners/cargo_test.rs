//! cargo test (libtest): the fixture crate's `helper::` tests, two threads
//! of one test process.
use tracer_user::{
    analysis::{LinkEvidence, Relation},
    labels::{Runner, Via},
};

use super::*;
use crate::common::root;
use crate::common::suites::Suite;

/// Under `tracer record --tests` (nothing to inject for Rust: the kernel
/// shows libtest's threads), the helper's death names the test whose thread
/// spawned it and the test whose thread killed it.
#[test]
fn helper_killed_by_the_cleanup_thread() {
    let argv = crate_command(&["test"], &["--", "helper::"]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    build_the_crate();
    let (suite, r) = run(
        "cargo test",
        || Suite::in_place("rust"),
        &["--tests"],
        &argv,
    );
    assert_eq!(r.code(), Some(101), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "helper.pid", Relation::Parent);
    let test_process = cert_of(&rep, suite.pid("killer.pid"));
    // libtest runs each test on a thread of its own: not the main thread.
    let k = dead.killer.as_ref().unwrap();
    assert_ne!(k.tid, k.process.pid, "{}", headlines(&rep));
    named_by_the_kernel(
        &rep,
        dead.victim.test.as_ref(),
        Runner::CargoTest,
        "helper::sibling_owns_a_helper",
        Via::Spawned,
    );
    named_by_the_kernel(
        &rep,
        k.test.as_ref(),
        Runner::CargoTest,
        "helper::cleanup_kills_stray_helpers",
        Via::Own,
    );
    expected_kill_then_own_failure(&rep, dead, test_process);
    // The runner passes the test binary's failure on.
    let runner = cert_of(&rep, root(&r).pid);
    follows(
        &rep,
        runner,
        test_process,
        test_process,
        LinkEvidence::Window,
    );
}

/// `cargo SUBCOMMAND... [options] ARGS...` on the fixture crate, offline (it
/// has no dependencies), its target dir in the runners' cache.
pub(super) fn crate_command(sub: &[&str], rest: &[&str]) -> Vec<String> {
    let manifest = crate::common::suites::suites().join("rust/Cargo.toml");
    let target = crate::common::suites::cache().join("rust-target");
    let mut argv = vec!["cargo".to_string()];
    argv.extend(sub.iter().map(|s| s.to_string()));
    argv.extend(
        [
            "--offline",
            "--locked",
            "--manifest-path",
            manifest.to_str().unwrap(),
            "--target-dir",
            target.to_str().unwrap(),
        ]
        .map(str::to_string),
    );
    argv.extend(rest.iter().map(|s| s.to_string()));
    argv
}

/// Builds the crate's tests before anything is recorded: the recording is
/// of the run, not of rustc. One rustc run cold (1.2 s), a no-op warm.
pub(super) fn build_the_crate() {
    let argv = crate_command(&["test"], &["--no-run"]);
    let out = std::process::Command::new(&argv[0])
        .args(&argv[1..])
        .output()
        .expect("run cargo");
    assert!(
        out.status.success(),
        "building the fixture crate failed:\n{}",
        crate::common::suites::both(&out)
    );
}
