//! go test (Debian's golang-go 1.19), two t.Parallel tests in one binary.
use tracer_user::analysis::{LinkEvidence, Relation};

use super::*;
use crate::common::root;
use crate::common::suites::{require, Suite};

#[test]
fn parallel_siblings_helper_killed() {
    require("go", "Debian's golang-go, installed by cargo xtask test");
    let argv = ["go", "test", "-json", "-count=1", "."];
    let (suite, r) = run("go test", || Suite::in_place("go"), &[], &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "helper.pid", Relation::Parent);
    let test_process = cert_of(&rep, suite.pid("killer.pid"));
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
