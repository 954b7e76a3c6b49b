//! pytest 9 with pytest-xdist 3.8, `-n 2`, one file per worker.
use tracer_user::analysis::{LinkEvidence, Relation};

use super::*;
use crate::common::root;
use crate::common::suites::{cache, Suite};

#[test]
fn xdist_worker_killed_by_its_sibling() {
    let python = cache().join("venv/bin/python");
    // No cache provider, no bytecode (PYTHONDONTWRITEBYTECODE): pytest runs
    // in the repository and writes nothing there.
    let argv = [
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
    ];
    let (suite, r) = run("pytest-xdist", || Suite::in_place("pytest"), &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    // xdist's "worker 'gw0' crashed while running …" goes to stdout, which
    // last words do not read: the link is the window, and xdist starts a
    // new worker (1-3 s here) before it exits.
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::Window);
}
