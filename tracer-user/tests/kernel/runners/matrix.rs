//! The version matrix (docs/report.md, "Test names: which way, or why
//! none"): the newest release of each supported major, installed by
//! setup.sh from tests/fixtures/suites/matrix/ (lock files, `npm ci`;
//! pinned requirements, a venv each), each running the real suite of its
//! runner under `tracer record --tests`: the victim's test and the
//! killer's named in the certificate, exactly, and the integration's
//! status line saying the way it took on that version; and the suite
//! passing with the integration loaded, no tracer, the kill off (the
//! bare twin `run_node` and `run` run first). A new major that breaks the
//! way in fails here: no names, and a status line with `why` or none.
//! vitest 3.2, jest 30 and pytest 9 are the suites' own (vitest.rs,
//! jest.rs, pytest.rs). vitest 5 runs on the matrix's Node 24 (its
//! `engines` want 22.12 or later; Debian's is 20). jest 27 and 28 never end once a worker is
//! SIGKILLed (their jest-worker waits on it): there the cleanup test kills
//! the sibling's helper process instead (`SUITE_VICTIM=helper`).
use std::path::PathBuf;

use tracer_user::{
    analysis::{CauseKind, Relation},
    labels::{Phase, Runner, Via},
    report::Report,
};

use super::*;
use crate::common::suites::{cache, require, Suite};

fn installed(name: &str) -> PathBuf {
    cache().join("matrix").join(name)
}

/// The one status line of `runner`: test names, through `seam`, on a
/// version of `major`.
fn said(rep: &Report, runner: &str, major: &str, seam: &str) {
    let lines = &rep.run.test_integrations;
    let l = lines
        .iter()
        .find(|l| l.runner == runner)
        .unwrap_or_else(|| panic!("a status line of {runner}: {lines:?}"));
    assert_eq!(
        (l.seam.as_deref(), l.why.as_deref()),
        (Some(seam), None),
        "{lines:?}"
    );
    let v = l.version.as_deref().unwrap_or_default();
    assert!(v.starts_with(&format!("{major}.")), "{v}: {lines:?}");
    assert_eq!(lines.len(), 1, "one way, in every worker: {lines:?}");
}

/// vitest `major`'s suite of `pool` on Debian's node or the matrix's Node
/// `on` (vitest 5 wants 22.12 or later: its `engines`).
pub(super) fn vitest(major: &str, pool: &str, on: Option<&str>) {
    let node = node_on(on);
    let dir = installed(&format!("vitest-{major}"));
    let bin = dir.join("node_modules/vitest/vitest.mjs");
    let mut argv: Vec<String> = [node.as_str(), bin.to_str().unwrap(), "run", "--no-cache"]
        .map(str::to_string)
        .to_vec();
    argv.push(format!("--pool={pool}"));
    argv.push("--maxWorkers=2".into());
    // vitest 4 dropped --minWorkers (its pools start what they need).
    if major != "4" && major != "5" {
        argv.push("--minWorkers=2".into());
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let make = || Suite::copied_with(&format!("vitest-{pool}"), &dir.join("node_modules"));
    let name = format!("vitest {major} {pool} + --tests{}", on_node(on));
    let (suite, r) = run_node(&name, Node::Preload, make, &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    said(&rep, "vitest", major, "__vitest_required__");
    let (victim_file, relation, sibling, via, cleanup) = match pool {
        "forks" => (
            "worker.pid",
            Relation::Sibling,
            "sibling holds its worker",
            Via::Own,
            "cleanup kills stray workers",
        ),
        _ => (
            "helper.pid",
            Relation::Parent,
            "sibling owns a helper",
            Via::Spawned,
            "cleanup kills stray helpers",
        ),
    };
    let dead = killed_by_the_cleanup_test(&rep, &suite, victim_file, relation);
    let v = declared(
        &rep,
        dead.victim.test.as_ref(),
        Runner::Vitest,
        "sibling.test.js",
        sibling,
        None,
        via,
    );
    let k = dead.killer.as_ref().unwrap();
    let kw = declared(
        &rep,
        k.test.as_ref(),
        Runner::Vitest,
        "cleanup.test.js",
        cleanup,
        None,
        Via::Own,
    );
    assert_ne!(v, kw, "two workers");
}

#[test]
fn vitest_1_forks() {
    vitest("1", "forks", None);
}

#[test]
fn vitest_1_threads() {
    vitest("1", "threads", None);
}

#[test]
fn vitest_2_forks() {
    vitest("2", "forks", None);
}

#[test]
fn vitest_2_threads() {
    vitest("2", "threads", None);
}

#[test]
fn vitest_4_forks() {
    vitest("4", "forks", None);
}

#[test]
fn vitest_4_threads() {
    vitest("4", "threads", None);
}

#[test]
fn vitest_5_forks() {
    vitest("5", "forks", Some("24"));
}

#[test]
fn vitest_5_threads() {
    vitest("5", "threads", Some("24"));
}

fn jest(major: &str, helper: bool) {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let dir = installed(&format!("jest-{major}"));
    let bin = dir.join("node_modules/jest/bin/jest.js");
    let argv = [
        "node",
        bin.to_str().unwrap(),
        "--ci",
        "--maxWorkers=2",
        "--no-cache",
        "--cacheDirectory=<rootDir>/.jest-cache",
        "--config={\"transform\":{}}",
    ];
    let make = || {
        let s = Suite::copied_with("jest", &dir.join("node_modules"));
        match helper {
            true => s.with_env("SUITE_VICTIM", "helper".into()),
            false => s,
        }
    };
    let (suite, r) = run_node(
        &format!("jest {major} + --tests"),
        Node::Preload,
        make,
        &argv,
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let seam = match major {
        "30" => "jest-circus/runner (default)",
        _ => "jest-circus/runner (function)",
    };
    said(&rep, "jest", major, seam);
    let all = headlines(&rep);
    let (victim, sibling, via) = match helper {
        true => (
            suite.pid("helper.pid"),
            "sibling owns a helper",
            Via::Spawned,
        ),
        false => (
            suite.pid("worker.pid"),
            "sibling holds its worker",
            Via::Own,
        ),
    };
    let dead = cert_of(&rep, victim);
    assert_eq!(dead.cause.kind, CauseKind::KilledInRun, "{all}");
    let k = dead
        .killer
        .as_ref()
        .unwrap_or_else(|| panic!("a killer: {all}"));
    assert_eq!(k.process.pid, suite.pid("killer.pid"), "{all}");
    let v = declared(
        &rep,
        dead.victim.test.as_ref(),
        Runner::Jest,
        "sibling.test.js",
        sibling,
        Some(Phase::Call),
        via,
    );
    let kw = declared(
        &rep,
        k.test.as_ref(),
        Runner::Jest,
        "cleanup.test.js",
        "cleanup kills stray workers",
        Some(Phase::Call),
        Via::Own,
    );
    assert_ne!(v, kw, "two workers");
}

#[test]
fn jest_27() {
    jest("27", true);
}

#[test]
fn jest_28() {
    jest("28", true);
}

/// jest 29, the release most projects pin: the incident's shape, the
/// worker itself killed.
#[test]
fn jest_29() {
    jest("29", false);
}

fn pytest(major: &str) {
    let python = installed(&format!("pytest-{major}")).join("venv/bin/python");
    let args = "-m pytest -n 2 --dist loadfile -p no:cacheprovider -q";
    let argv: Vec<String> = std::iter::once(python.display().to_string())
        .chain(args.split(' ').map(str::to_string))
        .collect();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let name = format!("pytest {major} + xdist + --tests");
    let (suite, r) = run(&name, || Suite::in_place("pytest"), &["--tests"], &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    said(&rep, "pytest", major, "pytest11 entry point");
    let all = headlines(&rep);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    let name =
        |t: Option<&tracer_user::labels::TestAt>| t.map(|t| (t.test.name.clone(), t.test.phase));
    assert_eq!(
        name(dead.victim.test.as_ref()),
        Some((
            "test_sibling.py::test_sibling_holds_its_worker".into(),
            Some(Phase::Call)
        )),
        "{all}"
    );
    assert_eq!(
        name(dead.killer.as_ref().unwrap().test.as_ref()),
        Some((
            "test_cleanup.py::test_cleanup_kills_stray_workers".into(),
            Some(Phase::Call)
        )),
        "{all}"
    );
}

#[test]
fn pytest_7_xdist() {
    pytest("7");
}

#[test]
fn pytest_8_xdist() {
    pytest("8");
}
