//! vitest 3.2 (tinypool), forks pool and threads pool, two workers.
use tracer_user::analysis::{LinkEvidence, Relation};

use super::*;
use crate::common::{
    root,
    suites::{cache, require, Suite},
};

fn vitest(pool: &str) -> Vec<String> {
    let bin = cache().join("node/node_modules/vitest/vitest.mjs");
    [
        "node",
        bin.to_str().unwrap(),
        "run",
        // No results cache: it would land in setup.sh's node_modules (the
        // run's own is a link there) and order one run by the last.
        "--no-cache",
        &format!("--pool={pool}"),
        "--maxWorkers=2",
        "--minWorkers=2",
    ]
    .map(str::to_string)
    .to_vec()
}

fn record(pool: &str) -> (Suite, Recorded) {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let argv = vitest(pool);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    run(
        &format!("vitest {pool}"),
        || Suite::copied(&format!("vitest-{pool}")),
        &[],
        &argv,
    )
}

#[test]
fn forks_pool_worker_killed_by_its_sibling() {
    let (suite, r) = record("forks");
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    // vitest's own words are tinypool's "Error: Channel closed" and
    // `Serialized Error: { code: 'ERR_IPC_CHANNEL_CLOSED' }`, an unhandled
    // rejection, not "Worker exited unexpectedly": a lost worker's words
    // all the same (analysis/cascade.rs), which tie vitest's exit to the
    // kill however long the rest of the suite runs.
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::LastWords);
}

#[test]
fn threads_pool_helper_killed_by_the_cleanup_thread() {
    let (suite, r) = record("threads");
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "helper.pid", Relation::Parent);
    let vitest = cert_of(&rep, root(&r).pid);
    assert_eq!(vitest.victim.process.pid, suite.pid("killer.pid"));
    // The kill came from a worker thread of vitest, not its main thread.
    let k = dead.killer.as_ref().unwrap();
    assert_ne!(k.tid, k.process.pid, "{}", headlines(&rep));
    expected_kill_then_own_failure(&rep, dead, vitest);
}
