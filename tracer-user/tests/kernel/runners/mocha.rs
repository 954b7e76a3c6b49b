//! mocha 10, 11 and 12 (the newest release of each, pinned in
//! tests/fixtures/suites/matrix/mocha-*; 12 is an ES module package whose
//! Mocha class is still the CommonJS lib/mocha.cjs), on the suite
//! tests/fixtures/suites/mocha, under `tracer record --tests` (the Node
//! integration, integrations/node/preload.js, through `NODE_OPTIONS`: it
//! subscribes to each mocha Runner's events, mocha's documented way to
//! watch tests). Two ways mocha runs:
//!
//! - serial: every test in mocha's own process, one at a time; the sibling
//!   leaves a `sleep` running (`SUITE_VICTIM=helper`) that the cleanup test
//!   then kills, the helper's parent killing it;
//! - `--parallel --jobs 2`: each file in a worker process of its own
//!   (`MOCHA_WORKER_ID`), the cleanup test SIGKILLing the sibling's worker.
//!
//! Each: the bare twin (no tracer, the preload loaded, the kill off) passes
//! first, then the certificate names both tests exactly, in report.json
//! and report.md, with the status line "mocha 11.8.0: test names through
//! `Runner events`" (12.0.3, 10.8.2 alike).
//!
//! Wall time on the 2-core test machine, per test: about 1.5 s (serial) and
//! 2.5 s (parallel) without the kill, 2 s and 3 s under tracer.
use std::path::PathBuf;

use tracer_user::{
    analysis::{Certificate, Relation},
    labels::{Phase, Runner, TestAt, Via},
};

use super::*;
use crate::common::suites::{both, cache, require, Suite};

const SEAM: &str = "Runner events";

fn installed(major: &str) -> PathBuf {
    cache().join("matrix").join(format!("mocha-{major}"))
}

fn argv(major: &str, parallel: bool, on: Option<&str>) -> Vec<String> {
    let bin = installed(major).join("node_modules/mocha/bin/mocha.js");
    let mut argv = vec![node_on(on), bin.display().to_string()];
    if parallel {
        argv.extend(["--parallel", "--jobs", "2"].map(str::to_string));
    }
    // Serial mocha runs the files in this order: the sibling first.
    argv.extend(["sibling.test.js", "cleanup.test.js"].map(str::to_string));
    argv
}

fn suite(major: &str, parallel: bool) -> Suite {
    let s = Suite::copied_with("mocha", &installed(major).join("node_modules"));
    if parallel {
        s
    } else {
        s.with_env("SUITE_VICTIM", "helper".into())
    }
}

/// `at` is the test `file` declared as `name` in `phase`, reached `via`,
/// through a mark; its worker `mocha worker N` with `--parallel`, none
/// serial. Returns the worker.
fn declared_by_mocha(
    rep: &Report,
    at: Option<&TestAt>,
    file: &str,
    name: &str,
    via: Via,
    parallel: bool,
) -> Option<String> {
    let w = declared_as(rep, at, Runner::Mocha, file, name, Some(Phase::Call), via);
    assert_eq!(
        w.is_some(),
        parallel,
        "worker {w:?} for parallel={parallel}"
    );
    w
}

/// The run's one status line: mocha, `major`'s version, the seam; in
/// mocha's own process serial, in both workers with `--parallel`.
fn status_line(rep: &Report, suite: &Suite, major: &str, parallel: bool) {
    let lines = &rep.run.test_integrations;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    let v = l.version.clone().unwrap_or_default();
    assert!(v.starts_with(&format!("{major}.")), "{lines:?}");
    assert_eq!(
        (l.runner.as_str(), l.seam.as_deref(), l.why.as_deref()),
        ("mocha", Some(SEAM), None),
        "{lines:?}"
    );
    let mut pids = l.pids.clone();
    pids.sort_unstable();
    let mut want = vec![suite.pid("killer.pid")];
    if parallel {
        want.push(suite.pid("worker.pid"));
        assert_eq!(l.workers.len(), 2, "{lines:?}");
    }
    want.sort_unstable();
    assert_eq!(pids, want, "{lines:?}");
    let md = render_markdown(rep);
    let line = format!("**Test names:** mocha {v}: test names through `{SEAM}` (");
    assert!(md.contains(&line), "{md}");
}

/// mocha `major` under `--tests`, serial or `--parallel`, on Debian's node
/// or the matrix's Node `on` (node_lts.rs).
pub(super) fn names_both_tests(major: &str, parallel: bool, on: Option<&str>) {
    let argv = argv(major, parallel, on);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let mode = if parallel { " --parallel" } else { "" };
    let name = format!("mocha {major}{mode} + --tests{}", on_node(on));
    let (suite, r) = run_node(&name, Node::Preload, || suite(major, parallel), &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let (victim_file, relation, victim, via) = match parallel {
        true => (
            "worker.pid",
            Relation::Sibling,
            "sibling > holds its worker",
            Via::Own,
        ),
        false => (
            "helper.pid",
            Relation::Parent,
            "sibling > owns a helper",
            Via::Spawned,
        ),
    };
    let killer = "cleanup > kills stray workers";
    let dead: &Certificate = killed_by_the_cleanup_test(&rep, &suite, victim_file, relation);
    let vw = declared_by_mocha(
        &rep,
        dead.victim.test.as_ref(),
        "sibling.test.js",
        victim,
        via,
        parallel,
    );
    let k = dead.killer.as_ref().unwrap();
    let kw = declared_by_mocha(
        &rep,
        k.test.as_ref(),
        "cleanup.test.js",
        killer,
        Via::Own,
        parallel,
    );
    if parallel {
        assert_ne!(vw, kw, "two workers");
    }
    status_line(&rep, &suite, major, parallel);
    // report.json and report.md as tracer wrote them.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let c = json["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["victim"]["pid"] == dead.victim.process.pid)
        .expect("the victim's certificate");
    for (end, file, name) in [
        (&c["victim"]["test"], "sibling.test.js", victim),
        (&c["killer"]["test"], "cleanup.test.js", killer),
    ] {
        assert_eq!(
            (&end["runner"], &end["file"], &end["name"], &end["source"]),
            (&"mocha".into(), &file.into(), &name.into(), &"exact".into()),
            "{c:#}"
        );
    }
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    for full in [
        format!("`sibling.test.js > {victim}`"),
        format!("`cleanup.test.js > {killer}`"),
    ] {
        assert!(dead.headline.contains(&full), "{}", headlines(&rep));
        assert!(md.contains(&full), "{md}");
    }
}

#[test]
fn mocha_10_serial() {
    names_both_tests("10", false, None);
}

#[test]
fn mocha_10_parallel() {
    names_both_tests("10", true, None);
}

#[test]
fn mocha_11_serial() {
    names_both_tests("11", false, None);
}

#[test]
fn mocha_11_parallel() {
    names_both_tests("11", true, None);
}

#[test]
fn mocha_12_serial() {
    names_both_tests("12", false, None);
}

#[test]
fn mocha_12_parallel() {
    names_both_tests("12", true, None);
}

/// Never at the cost of the suite: with the kill off, mocha 11 and 12
/// under `--tests` and their bare twins (no tracer, no preload) exit 0 and
/// print the same report but for the durations (`(1002ms)`, `(2s)`; the
/// lines compared as a set: `--parallel` prints each file as it ends); the
/// status line is there all the same.
#[test]
fn preload_changes_nothing_mocha_prints() {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    for (major, parallel) in [("11", false), ("11", true), ("12", false), ("12", true)] {
        let argv = argv(major, parallel, None);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let (_, out) = suite(major, parallel).passes_without_the_kill_env(&argv, &[]);
        let s = suite(major, parallel);
        let (r, _) = s.record_env_kill(&["--tests"], &argv, &[], false);
        assert_eq!(r.code(), Some(0), "{}", r.stderr());
        let steady = |b: &[u8]| steady_lines(b, |l| l);
        assert_eq!(
            steady(&r.output.stdout),
            steady(&out.stdout),
            "mocha {major}'s report changed (parallel={parallel}):\n{}",
            both(&out)
        );
        status_line(&report(&r), &s, major, parallel);
    }
}
