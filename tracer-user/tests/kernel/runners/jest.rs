//! jest 30, two workers (child processes of jest-worker).
use tracer_user::analysis::{LinkEvidence, Relation};

use super::*;
use crate::common::root;
use crate::common::suites::{cache, require, Suite};

#[test]
fn worker_killed_by_its_sibling() {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let bin = cache().join("node/node_modules/jest/bin/jest.js");
    // No transform: the suite is plain CommonJS (babel-jest would need a
    // config). No cache across runs: jest's cached timings would make it run
    // the two files in band, in one process; and what jest writes all the
    // same (its haste map) goes into the run's own directory, not /tmp.
    let argv = [
        "node",
        bin.to_str().unwrap(),
        "--ci",
        "--maxWorkers=2",
        "--no-cache",
        "--cacheDirectory=<rootDir>/.jest-cache",
        "--config={\"transform\":{}}",
    ];
    let (suite, r) = run("jest", || Suite::copied("jest"), &[], &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    // jest's words name the pid: "A jest worker process (pid=N) was
    // terminated by another process: signal=SIGKILL".
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::LastWords);
}
