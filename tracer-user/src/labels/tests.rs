//! The labels of logs captured from real runners (tests/fixtures/real_labels_*).
use std::path::Path;

use super::*;
use crate::{
    analysis::{analyze, AnalysisOptions},
    eventlog::read_log,
    model::Model,
};

fn fixture(name: &str) -> crate::eventlog::EventLog {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    read_log(&path).unwrap()
}

/// A cargo test binary (tests/fixtures/real_labels_cargo_test.ndjson, from a
/// crate of two tests run `--test-threads=2`): `sibling_owns_a_sleeper`
/// starts `bash -c 'exec -a MARKER sleep 30'`, `cleanup_kills_stray_workers`
/// runs `pkill -KILL -f ^MARKER` 400 ms later. Each end is the helper of the
/// thread that spawned it; the kernel kept 15 bytes of each name and
/// nothing completed them (no `--exact`, no panic).
#[test]
fn cargo_test_threads_name_both_ends_of_a_kill() {
    let log = fixture("real_labels_cargo_test.ndjson");
    let (_, a) = analyze(&log, &AnalysisOptions::default());
    let c = &a.certificates[0];
    let v = c.victim.test.as_ref().expect("the victim's test");
    let k = c
        .killer
        .as_ref()
        .unwrap()
        .test
        .as_ref()
        .expect("the killer's test");
    assert_eq!(
        (v.test.name.as_str(), v.via, v.test.name_truncated),
        ("tests::sibling_", Via::Spawned, true)
    );
    assert_eq!(
        (k.test.name.as_str(), k.via, k.test.runner),
        ("tests::cleanup_", Via::Spawned, Runner::CargoTest)
    );
    assert_eq!(k.test.file.as_deref(), Some("cleanup_suite"));
    // Each spawner is the test binary, through a different thread.
    let (vs, ks) = (v.spawned_by.unwrap(), k.spawned_by.unwrap());
    assert_eq!(vs.pid, ks.pid);
    assert_ne!(vs.tid, ks.tid);
    assert!(
        c.headline.ends_with(
            ", spawned by `tests::cleanup_…` (cargo test); the victim was spawned by \
             `tests::sibling_…` (cargo test)"
        ),
        "{}",
        c.headline
    );
}

/// The harness's own thread (named after the binary) is no test, and the
/// binary's process as a whole ran both tests at once: "one of".
#[test]
fn a_process_running_two_test_threads_is_one_of_them() {
    let log = fixture("real_labels_cargo_test.ndjson");
    let m = Model::build(&log);
    let l = Labels::build(&m);
    let bin = m
        .procs
        .values()
        .find(|p| {
            p.execs
                .iter()
                .any(|e| e.filename.contains("cleanup_suite-"))
        })
        .unwrap();
    // While both threads lived (between their creation and the kill).
    let kill = m.kill_calls[0].ev.at.t;
    let at = l.at(&m, bin.key, None, kill).unwrap();
    let names: Vec<&str> = at.one_of.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["tests::sibling_", "tests::cleanup_"]);
    assert!(at.phrase().starts_with("one of: "), "{}", at.phrase());
    // The main thread itself ran no test.
    assert!(l.at(&m, bin.key, Some(bin.key.pid), kill).is_none());
}

/// A thread name cut at 15 bytes is completed by the one panic line or
/// `--exact` argument it begins, and only by one.
#[test]
fn a_cut_name_is_completed_only_when_one_name_fits() {
    assert_eq!(
        sources::exact_arg(&["bin".into(), "--exact".into(), "a::b".into()]),
        Some("a::b")
    );
    assert_eq!(
        sources::exact_arg(&[
            "bin".into(),
            "a::b".into(),
            "--exact".into(),
            "--nocapture".into()
        ]),
        Some("a::b")
    );
    assert_eq!(
        sources::exact_arg(&["bin".into(), "--skip".into(), "x".into(), "--exact".into()]),
        None
    );
}

/// Labels never invent a test: a log with no runner in it has none.
#[test]
fn a_log_without_runners_has_no_labels() {
    for name in ["real_pgroup_kill.ndjson", "vitest_workers.ndjson"] {
        let m = Model::build(&fixture(name));
        assert!(Labels::build(&m).is_empty(), "{name}");
    }
}

/// pytest's variables at exec (tests/fixtures/real_labels_pytest_env.ndjson:
/// a Python program that sets them as pytest does, starts a sleeper in one
/// "test" and pkills it from the next, then runs /bin/true 500 times).
/// Both ends are helpers of their test, in xdist gw1.
#[test]
fn pytest_environment_names_both_ends() {
    let log = fixture("real_labels_pytest_env.ndjson");
    let (m, a) = analyze(&log, &AnalysisOptions::default());
    let c = &a.certificates[0];
    let v = c.victim.test.as_ref().unwrap();
    let k = c.killer.as_ref().unwrap().test.as_ref().unwrap();
    assert_eq!(v.test.name, "tests/test_pool.py::test_owns_a_sleeper");
    assert_eq!(
        k.test.name,
        "tests/test_cleanup.py::test_kills_stray_workers"
    );
    assert_eq!(
        (k.test.phase, k.test.worker.as_deref(), k.via),
        (Some(Phase::Call), Some("xdist gw1"), Via::Spawned)
    );
    // The program set the variables in its own os.environ, so its exec had
    // none: it is named no worker (a real xdist worker has it at its exec).
    let l = Labels::build(&m);
    let root = m.root.unwrap();
    assert_eq!(l.worker(root), None);
    assert!(c.headline.contains(
        "spawned by `tests/test_cleanup.py::test_kills_stray_workers` in xdist gw1; \
         the victim was spawned by `tests/test_pool.py::test_owns_a_sleeper` in xdist gw1"
    ));
}

/// cargo-nextest (tests/fixtures/real_labels_nextest.ndjson: `cargo nextest
/// run` on the same two-test crate): one process per test, named whole by
/// its NEXTEST_* variables; the pkill and the sleeper are helpers of theirs.
#[test]
fn nextest_names_both_ends_whole() {
    let log = fixture("real_labels_nextest.ndjson");
    let (m, a) = analyze(&log, &AnalysisOptions::default());
    let c = &a.certificates[0];
    let v = c.victim.test.as_ref().unwrap();
    let k = c.killer.as_ref().unwrap().test.as_ref().unwrap();
    assert_eq!(
        (v.test.runner, v.test.full_name().as_str(), v.via),
        (
            Runner::Nextest,
            "cleanup_suite::tests::sibling_owns_a_sleeper",
            Via::Spawned
        )
    );
    assert_eq!(
        k.test.full_name(),
        "cleanup_suite::tests::cleanup_kills_stray_workers"
    );
    assert_eq!(k.via, Via::Spawned);
    assert!(c
        .headline
        .contains(", spawned by `cleanup_suite::tests::cleanup_kills_stray_workers` (nextest)"));
    // The test's own process is named as nextest names it.
    let l = Labels::build(&m);
    let owner = k.spawned_by.unwrap();
    let key = crate::eventlog::ProcKey {
        pid: owner.pid,
        start: owner.start,
    };
    assert_eq!(
        l.worker(key),
        Some("nextest: cleanup_suite::tests::cleanup_kills_stray_workers")
    );
}

/// A long name is shown whole in a sentence (the certificate, report.md's
/// details): its path is shortened to the file's own name, never the
/// test's name, which is what tells it apart (before, both were cut at 60
/// characters: `test_suite.py::test_cleanup_stra…`).
#[test]
fn a_long_name_keeps_its_test_name_whole() {
    let t = |runner, file: Option<&str>, name: &str| Test {
        runner,
        worker: None,
        file: file.map(str::to_string),
        name: name.to_string(),
        name_truncated: false,
        phase: None,
        source: Source::Exact,
        uncertainty_ms: None,
    };
    let nodeid = "tests/integration/runners/test_suite.py::TestCleanup::test_cleanup_strays_kills_every_worker_it_did_not_spawn[forks]";
    let p = t(
        Runner::Pytest,
        Some("tests/integration/runners/test_suite.py"),
        nodeid,
    )
    .phrase();
    assert_eq!(
        p,
        "`…/test_suite.py::TestCleanup::test_cleanup_strays_kills_every_worker_it_did_not_spawn[forks]` (pytest)"
    );
    let v = t(
        Runner::Vitest,
        Some("src/platforms/apple/core/__tests__/runner-session.test.ts"),
        "runner session > kills the runner process tree on cancel",
    )
    .phrase();
    assert_eq!(
        v,
        "`…/runner-session.test.ts > runner session > kills the runner process tree on cancel` (vitest)"
    );
    // A short one is as it was.
    let s = t(Runner::Jest, Some("a/b.test.js"), "c").phrase();
    assert_eq!(s, "`a/b.test.js > c` (jest)");
    // node:test: no worker, the runner said.
    let n = t(Runner::NodeTest, Some("test/a.test.js"), "suite > c").phrase();
    assert_eq!(n, "`test/a.test.js > suite > c` (node:test)");
}
