//! vitest 3.2 (tinypool), forks pool and threads pool, two workers: what
//! tracer says of them as they are, and with the Node integration that
//! names each test (integrations/node/preload.js: as `--tests` injects it,
//! or as the one line of vitest's config the docs give).
use tracer_user::{
    analysis::{LinkEvidence, Relation},
    labels::{Runner, Via},
};

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

/// The suite of `pool`, passing without tracer and then recorded, both
/// runs with the Node integration `how`. A setup file is vitest's
/// documented one line: `setupFiles` in the suite's own vitest.config.mjs.
fn record(pool: &str, how: Node) -> (Suite, Recorded) {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let argv = vitest(pool);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let make = || {
        let suite = Suite::copied(&format!("vitest-{pool}"));
        if how == Node::SetupFile {
            let config =
                format!("export default {{ test: {{ setupFiles: ['{NODE_INTEGRATION}'] }} }};\n");
            std::fs::write(suite.cwd.join("vitest.config.mjs"), config).unwrap();
        }
        suite
    };
    run_node(&format!("vitest {pool}{}", how.name()), how, make, &argv)
}

#[test]
fn forks_pool_worker_killed_by_its_sibling() {
    let (suite, r) = record("forks", Node::AsItIs);
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
    let (suite, r) = record("threads", Node::AsItIs);
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

/// With the preload, a forks-pool worker's death names the test it was
/// running (the sibling's, in its own worker) and the test that killed it
/// (the cleanup test, in the other), both declared by the tests: the
/// certificate is otherwise the one above.
#[test]
fn forks_pool_preload_names_the_victims_and_the_killers_test() {
    forks_pool_names_both_tests(Node::Preload);
}

/// The same with the setup file instead of the preload, no tracer injection.
#[test]
fn forks_pool_setup_file_names_the_victims_and_the_killers_test() {
    forks_pool_names_both_tests(Node::SetupFile);
}

fn forks_pool_names_both_tests(how: Node) {
    let (suite, r) = record("forks", how);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    let victim = declared(
        &rep,
        dead.victim.test.as_ref(),
        Runner::Vitest,
        "sibling.test.js",
        "sibling holds its worker",
        None,
        Via::Own,
    );
    let k = dead.killer.as_ref().unwrap();
    let killer = declared(
        &rep,
        k.test.as_ref(),
        Runner::Vitest,
        "cleanup.test.js",
        "cleanup kills stray workers",
        None,
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

/// With the preload, in a threads pool (the workers are threads of vitest
/// itself): the helper's test is the one that ran in the thread that
/// spawned it, the killer's the one that ran in the thread that called
/// kill(), each a worker thread, told apart though they share a process.
#[test]
fn threads_pool_preload_names_the_spawning_and_the_killing_threads_tests() {
    let (suite, r) = record("threads", Node::Preload);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "helper.pid", Relation::Parent);
    let at = dead.victim.test.as_ref();
    let victim = declared(
        &rep,
        at,
        Runner::Vitest,
        "sibling.test.js",
        "sibling owns a helper",
        None,
        Via::Spawned,
    );
    let by = at.unwrap().spawned_by.as_ref().expect("its spawner");
    assert_eq!(by.pid, suite.pid("killer.pid"), "vitest spawned it");
    assert_ne!(by.tid, by.pid, "a worker thread spawned it");
    let k = dead.killer.as_ref().unwrap();
    assert_ne!(k.tid, k.process.pid, "a worker thread killed");
    assert_ne!(k.tid, by.tid, "another thread than the spawner");
    let killer = declared(
        &rep,
        k.test.as_ref(),
        Runner::Vitest,
        "cleanup.test.js",
        "cleanup kills stray helpers",
        None,
        Via::Own,
    );
    assert_ne!(victim, killer, "two workers");
    assert!(
        dead.headline.contains(&format!(
            ", in `cleanup.test.js > cleanup kills stray helpers` in {killer}; \
             the victim was spawned by `sibling.test.js > sibling owns a helper` in {victim}"
        )),
        "{}",
        headlines(&rep)
    );
    let vitest = cert_of(&rep, root(&r).pid);
    expected_kill_then_own_failure(&rep, dead, vitest);
}
