//! jest 30, two workers (child processes of jest-worker): as it is, and
//! with the Node integration that names each test
//! (integrations/node/preload.js: as `--tests` injects it, or as the one
//! line of jest's config the docs give).
use tracer_user::{
    analysis::{LinkEvidence, Relation},
    labels::{Phase, Runner, Via},
};

use super::*;
use crate::common::root;
use crate::common::suites::{cache, Suite};

/// The suite, passing without tracer and then recorded, both runs with the
/// Node integration `how`. A setup file is jest's documented one line:
/// `setupFilesAfterEnv` in its config.
fn record(how: Node, on: Option<&str>) -> (Suite, Recorded) {
    let node = node_on(on);
    let bin = cache().join("node/node_modules/jest/bin/jest.js");
    // No transform: the suite is plain CommonJS (babel-jest would need a
    // config). No cache across runs: jest's cached timings would make it run
    // the two files in band, in one process; and what jest writes all the
    // same (its haste map) goes into the run's own directory, not /tmp.
    let config = if how == Node::SetupFile {
        format!("--config={{\"transform\":{{}},\"setupFilesAfterEnv\":[\"{NODE_INTEGRATION}\"]}}")
    } else {
        "--config={\"transform\":{}}".to_string()
    };
    let argv = [
        node.as_str(),
        bin.to_str().unwrap(),
        "--ci",
        "--maxWorkers=2",
        "--no-cache",
        "--cacheDirectory=<rootDir>/.jest-cache",
        &config,
    ];
    let make = || Suite::copied("jest");
    let name = format!("jest{}{}", how.name(), on_node(on));
    run_node(&name, how, make, &argv)
}

#[test]
fn worker_killed_by_its_sibling() {
    let (suite, r) = record(Node::AsItIs, None);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    // jest's words name the pid: "A jest worker process (pid=N) was
    // terminated by another process: signal=SIGKILL".
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::LastWords);
}

/// With the preload, the worker's death names the test it was running (the
/// sibling's body: phase call) and the cleanup test that killed it, in the
/// other worker, both declared by the tests; the certificate is otherwise
/// the one above.
#[test]
fn preload_names_the_victims_and_the_killers_test() {
    names_both_tests(Node::Preload, None);
}

/// The same with the setup file instead of the preload, no tracer injection.
#[test]
fn setup_file_names_the_victims_and_the_killers_test() {
    names_both_tests(Node::SetupFile, None);
}

/// The suite under `how`, on Debian's node or the matrix's Node `on`
/// (node_lts.rs): both tests named, the runner's exit linked to the kill.
pub(super) fn names_both_tests(how: Node, on: Option<&str>) {
    let (suite, r) = record(how, on);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    let victim = declared(
        &rep,
        dead.victim.test.as_ref(),
        Runner::Jest,
        "sibling.test.js",
        "sibling holds its worker",
        Some(Phase::Call),
        Via::Own,
    );
    let k = dead.killer.as_ref().unwrap();
    let killer = declared(
        &rep,
        k.test.as_ref(),
        Runner::Jest,
        "cleanup.test.js",
        "cleanup kills stray workers",
        Some(Phase::Call),
        Via::Own,
    );
    assert_ne!(victim, killer, "two workers");
    assert!(
        dead.headline.contains(&format!(
            ", in `cleanup.test.js > cleanup kills stray workers` in {killer}; \
             the victim was running `sibling.test.js > sibling holds its worker` in {victim}"
        )),
        "{}",
        headlines(&rep)
    );
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::LastWords);
}
