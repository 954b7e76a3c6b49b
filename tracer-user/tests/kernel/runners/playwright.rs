//! Playwright Test (@playwright/test 1.65.2, the newest 1.x, pinned in
//! tests/fixtures/suites/matrix/playwright-1; no browser is downloaded:
//! the suite's tests use no page), two workers (child processes of
//! `playwright test`): the cleanup test SIGKILLs the worker its sibling
//! runs in. With `--tests` the Node integration (integrations/node/
//! preload.js, through `NODE_OPTIONS`) names both tests, reached through
//! the module the worker declares its current test to (lib/globals.js's
//! `setCurrentTestInfo`, an internal seam: the status line says so).
//!
//! Wall time on the 2-core test machine: about 3.5 s without the kill
//! (with the preload), 4 s under tracer.
use tracer_user::{
    analysis::{LinkEvidence, Relation},
    labels::{Runner, TestAt, Via},
};

use super::*;
use crate::common::{
    root,
    suites::{both, cache, require, Suite},
};

const SEAM: &str = "setCurrentTestInfo (lib/globals.js)";

fn modules() -> std::path::PathBuf {
    cache().join("matrix/playwright-1/node_modules")
}

fn argv(on: Option<&str>) -> Vec<String> {
    let cli = modules().join("@playwright/test/cli.js");
    [
        node_on(on).as_str(),
        cli.to_str().unwrap(),
        "test",
        "--workers=2",
        "--reporter=list",
    ]
    .map(str::to_string)
    .to_vec()
}

fn suite() -> Suite {
    Suite::copied_with("playwright", &modules())
}

/// `at` is the test `file` declared as `name` through a mark, the
/// worker's own, no phase; returns its worker (`playwright worker N`).
fn declared_by_playwright(rep: &Report, at: Option<&TestAt>, file: &str, name: &str) -> String {
    declared(rep, at, Runner::Playwright, file, name, None, Via::Own)
}

/// The one status line: playwright 1.x through the seam, in both workers.
fn status_line(rep: &Report, suite: &Suite) {
    let lines = &rep.run.test_integrations;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    let v = l.version.clone().unwrap_or_default();
    assert!(v.starts_with("1."), "{lines:?}");
    assert_eq!(
        (l.runner.as_str(), l.seam.as_deref(), l.why.as_deref()),
        ("playwright", Some(SEAM), None),
        "{lines:?}"
    );
    let mut pids = l.pids.clone();
    pids.sort_unstable();
    let mut want = vec![suite.pid("worker.pid"), suite.pid("killer.pid")];
    want.sort_unstable();
    assert_eq!(pids, want, "{lines:?}");
    let md = render_markdown(rep);
    let line = format!("**Test names:** playwright {v}: test names through `{SEAM}` (");
    assert!(md.contains(&line), "{md}");
}

/// With `--tests`: the worker's death names the test it was running and
/// the test that killed it, in the other worker, in report.json and
/// report.md; Playwright's exit follows from the kill (its words,
/// "worker process exited unexpectedly", name no pid: by the window).
#[test]
fn preload_names_the_victims_and_the_killers_test() {
    names_both_tests(None);
}

/// The test above on Debian's node or the matrix's Node `on` (node_lts.rs).
pub(super) fn names_both_tests(on: Option<&str>) {
    let argv = argv(on);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let name = format!("playwright + --tests{}", on_node(on));
    let (suite, r) = run_node(&name, Node::Preload, suite, &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::Window);
    let (victim, killer) = ("sibling > holds its worker", "cleanup kills stray workers");
    let vw = declared_by_playwright(&rep, dead.victim.test.as_ref(), "sibling.spec.js", victim);
    let k = dead.killer.as_ref().unwrap();
    let kw = declared_by_playwright(&rep, k.test.as_ref(), "cleanup.spec.js", killer);
    assert_ne!(vw, kw, "two workers");
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    let headline = format!(
        ", in `cleanup.spec.js > {killer}` in {kw}; \
         the victim was running `sibling.spec.js > {victim}` in {vw}"
    );
    assert!(dead.headline.contains(&headline), "{}", headlines(&rep));
    assert!(
        md.contains(&format!("`sibling.spec.js > {victim}`")),
        "{md}"
    );
    assert!(
        md.contains(&format!("`cleanup.spec.js > {killer}`")),
        "{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let c = json["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["victim"]["pid"] == dead.victim.process.pid)
        .expect("the victim's certificate");
    assert_eq!(c["victim"]["test"]["name"], victim, "{c:#}");
    assert_eq!(c["killer"]["test"]["name"], killer, "{c:#}");
    assert_eq!(c["victim"]["test"]["runner"], "playwright", "{c:#}");
    status_line(&rep, &suite);
}

/// Never at the cost of the suite: with the kill off, `--tests` and its
/// bare twin (no tracer, no preload) exit 0 and print the same report but
/// for the durations (the lines as a set: two workers print as they end).
#[test]
fn preload_changes_nothing_playwright_prints() {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let argv = argv(None);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (_, out) = suite().passes_without_the_kill_env(&argv, &[]);
    let s = suite();
    let (r, _) = s.record_env_kill(&["--tests"], &argv, &[], false);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    // The list reporter numbers the tests as they start.
    let steady = |b: &[u8]| steady_lines(b, |l| l.replace("  1 ", "  N ").replace("  2 ", "  N "));
    assert_eq!(
        steady(&r.output.stdout),
        steady(&out.stdout),
        "Playwright's report changed:\n{}",
        both(&out)
    );
    status_line(&report(&r), &s);
}
