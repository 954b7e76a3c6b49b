//! `--tests` never changes a suite's outcome (docs/report.md, "Never at
//! the cost of the suite"): each way a job defeats the injection — its own
//! PYTHONPATH or NODE_OPTIONS in place of tracer's, pytest's plugin
//! autoload off, a vitest pool the preload cannot reach — runs with the
//! kill off under `tracer record --tests` and as its bare twin without
//! tracer: the same status (0), and the report says which runner ran
//! without test names and why. Before, the first case exited 4 under
//! `--tests` ("Error importing plugin tracer_pytest") where its twin
//! passed.
use std::process::Command;

use tracer_user::labels::status::{TestIntegration, NOT_LOADED};

use super::*;
use crate::common::suites::{both, cache, require, Suite};

/// The suite's status without tracer, the kill off: the bare twin.
fn bare(suite: &Suite, argv: &[&str], env: &[(&str, String)]) -> Option<i32> {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&suite.cwd)
        .envs(suite.env(false))
        .envs(env.iter().map(|(k, v)| (k, v)));
    let out = cmd.output().unwrap_or_else(|e| panic!("run {argv:?}: {e}"));
    eprintln!("never_at_the_cost: bare {argv:?}: {}", out.status);
    assert!(
        out.status.success(),
        "the bare twin passes:\n{}",
        both(&out)
    );
    out.status.code()
}

/// `argv` under `tracer record --tests`, the kill off, and its bare twin:
/// the same status; returns the report's test-name lines.
fn same_status(
    suite: impl Fn() -> Suite,
    argv: &[&str],
    env: &[(&str, String)],
) -> Vec<TestIntegration> {
    let twin = bare(&suite(), argv, env);
    let s = suite();
    let (r, took) = s.record_env_kill(&["--tests"], argv, env, false);
    eprintln!(
        "never_at_the_cost: --tests {argv:?}: {:?} in {took:.1?}",
        r.code()
    );
    assert_eq!(
        r.code(),
        twin,
        "--tests changed the status:\n{}",
        r.stderr()
    );
    let rep = report(&r);
    let md = tracer_user::report::render_markdown(&rep);
    for l in &rep.run.test_integrations {
        assert!(md.contains("**Test names:** "), "{md}");
        assert!(l.why.is_some() || l.seam.is_some(), "{l:?}");
    }
    rep.run.test_integrations.clone()
}

/// The one line for `runner`: no test names, for `why`.
fn unnamed<'a>(lines: &'a [TestIntegration], runner: &str, why: &str) -> &'a TestIntegration {
    let l = lines
        .iter()
        .find(|l| l.runner == runner && l.why.as_deref().is_some_and(|w| w.contains(why)))
        .unwrap_or_else(|| panic!("a line: {runner}: not available: {why}: {lines:?}"));
    assert!(l.seam.is_none() && !l.pids.is_empty(), "{l:?}");
    l
}

fn pytest_args() -> Vec<String> {
    let python = cache().join("venv/bin/python");
    let args = "-m pytest -n 2 --dist loadfile -p no:cacheprovider -q";
    std::iter::once(python.display().to_string())
        .chain(args.split(' ').map(str::to_string))
        .collect()
}

/// The incident: `sh -c 'PYTHONPATH=src python -m pytest'`. The job's
/// PYTHONPATH replaces tracer's: the plugin is not found, pytest runs
/// without it and passes, and the report names that pytest.
#[test]
fn pytest_with_the_jobs_own_pythonpath() {
    let cmd = format!("PYTHONPATH=src exec {}", pytest_args().join(" "));
    let argv = ["sh", "-c", cmd.as_str()];
    let lines = same_status(|| Suite::in_place("pytest"), &argv, &[]);
    let l = unnamed(&lines, "pytest", NOT_LOADED);
    assert_eq!(l.pids.len(), 1, "the pytest process itself: {l:?}");
}

/// `PYTEST_DISABLE_PLUGIN_AUTOLOAD=1` (xdist then by `-p`): no entry point
/// is loaded, tracer's neither; the suite passes as its twin does.
#[test]
fn pytest_with_plugin_autoload_off() {
    let mut argv = pytest_args();
    argv.splice(3..3, ["-p".to_string(), "xdist.plugin".to_string()]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let env = [("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1".to_string())];
    let lines = same_status(|| Suite::in_place("pytest"), &argv, &env);
    unnamed(&lines, "pytest", NOT_LOADED);
}

fn vitest_args(pool: &str) -> Vec<String> {
    let bin = cache().join("node/node_modules/vitest/vitest.mjs");
    let args = format!("run --no-cache --pool={pool} --maxWorkers=2 --minWorkers=2");
    ["node".to_string(), bin.display().to_string()]
        .into_iter()
        .chain(args.split(' ').map(str::to_string))
        .collect()
}

/// `sh -c 'NODE_OPTIONS=… vitest run'`: the job's NODE_OPTIONS replaces
/// tracer's; vitest runs without the preload and passes.
#[test]
fn vitest_with_the_jobs_own_node_options() {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let cmd = format!(
        "NODE_OPTIONS=--max-old-space-size=2048 exec {}",
        vitest_args("forks").join(" ")
    );
    let argv = ["sh", "-c", cmd.as_str()];
    let lines = same_status(|| Suite::copied("vitest-forks"), &argv, &[]);
    unnamed(&lines, "vitest", NOT_LOADED);
}

/// `sh -c 'NODE_OPTIONS=… node --test …'`: the same for node's own runner;
/// the line names it by its `--test` flag.
#[test]
fn node_test_with_the_jobs_own_node_options() {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let cmd = "NODE_OPTIONS=--max-old-space-size=2048 exec node --test \
               --test-concurrency=2 cleanup.test.js sibling.test.js";
    let argv = ["sh", "-c", cmd];
    let lines = same_status(|| Suite::copied("node-test"), &argv, &[]);
    unnamed(&lines, "node:test", NOT_LOADED);
    assert_eq!(lines.len(), 1, "{lines:?}");
}

/// vitest's vmForks pool: the preload loads in its workers but cannot
/// reach the vm context the tests run in; the suite passes as its twin
/// does (the preload's global watches are on the global's prototype: as
/// own properties, vitest's vm context copied them getter-only and its
/// own assignment threw, failing every file), and the workers say why.
#[test]
fn vitest_vm_forks_says_why() {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let argv = vitest_args("vmForks");
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let env = [("NODE_OPTIONS", format!("--require \"{NODE_INTEGRATION}\""))];
    // The twin with the preload as --tests loads it: what a setup without
    // tracer gets; the recorded run gets it from --tests.
    let twin = bare(&Suite::copied("vitest-forks"), &argv, &env);
    let s = Suite::copied("vitest-forks");
    let (r, _) = s.record_env_kill(&["--tests"], &argv, &[], false);
    assert_eq!(r.code(), twin, "{}", r.stderr());
    let rep = report(&r);
    let l = unnamed(&rep.run.test_integrations, "vitest", "vmThreads/vmForks");
    assert!(
        l.version.as_deref().is_some_and(|v| v.starts_with("3.")),
        "{l:?}"
    );
    assert!(
        !rep.run
            .test_integrations
            .iter()
            .any(|l| l.why.as_deref() == Some(NOT_LOADED)),
        "the preload loaded: {:?}",
        rep.run.test_integrations
    );
}

/// `sh -c 'NODE_OPTIONS=… mocha --parallel'`: the same for mocha; the
/// line names its main process by its argv (`…/bin/mocha.js`).
#[test]
fn mocha_with_the_jobs_own_node_options() {
    require("node", "Debian's nodejs, installed by cargo xtask test");
    let modules = cache().join("matrix/mocha-11/node_modules");
    let cmd = format!(
        "NODE_OPTIONS=--max-old-space-size=2048 exec node {} --parallel --jobs 2 \
         sibling.test.js cleanup.test.js",
        modules.join("mocha/bin/mocha.js").display()
    );
    let argv = ["sh", "-c", cmd.as_str()];
    let lines = same_status(|| Suite::copied_with("mocha", &modules), &argv, &[]);
    unnamed(&lines, "mocha", NOT_LOADED);
    assert_eq!(lines.len(), 1, "{lines:?}");
}
