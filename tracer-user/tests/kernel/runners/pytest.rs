//! pytest 9 with pytest-xdist 3.8, `-n 2`, one file per worker.
use std::path::{Path, PathBuf};

use tracer_user::{
    analysis::{LinkEvidence, Relation},
    labels::{Phase, Runner, Source, TestAt, Via},
};

use super::*;
use crate::common::root;
use crate::common::suites::{both, cache, Suite};

fn pytest() -> Vec<String> {
    let python = cache().join("venv/bin/python");
    // No cache provider, no bytecode (PYTHONDONTWRITEBYTECODE): pytest runs
    // in the repository and writes nothing there.
    [
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
    ]
    .map(str::to_string)
    .to_vec()
}

#[test]
fn xdist_worker_killed_by_its_sibling() {
    let argv = pytest();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (suite, r) = run("pytest-xdist", || Suite::in_place("pytest"), &[], &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    // xdist's "worker 'gw0' crashed while running …" goes to stdout, which
    // last words do not read: the link is the window, and xdist starts a
    // new worker (1-3 s here) before it exits.
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::Window);
}

/// The same run with the job's stdout and stderr one log, as CI keeps it:
/// xdist's `worker 'gw1' crashed while running '…'` (on stdout) is then in
/// pytest's last words, and ties its exit to the kill however long the rest
/// of the suite runs.
#[test]
fn xdist_crash_line_ties_pytest_to_the_kill_in_a_one_file_log() {
    let argv = pytest();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let suite = Suite::in_place("pytest");
    let (r, took) = suite.record_as_one_log(&[], &argv);
    eprintln!("runners: pytest-xdist, one log: {took:.1?} under tracer");
    assert_eq!(
        r.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&r.output.stdout)
    );
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    let runner = cert_of(&rep, root(&r).pid);
    root_cause_then(&rep, dead, runner, LinkEvidence::LastWords);
    let detail = &runner.consequence_of.as_ref().unwrap().detail;
    assert!(detail.contains("crashed while running"), "{detail}");
}

/// The pytest plugin where it lives in the repository: what the one
/// documented line puts on PYTHONPATH.
fn plugin_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("integrations/pytest")
}

/// `t` is `nodeid`'s call phase, named by the plugin's marks (`exact`),
/// run by the thread that acted itself, in an xdist worker; its worker.
fn named_by_marks<'a>(t: Option<&'a TestAt>, nodeid: &str, all: &str) -> &'a str {
    let t = t.unwrap_or_else(|| panic!("{nodeid} named: {all}"));
    assert_eq!(t.test.runner, Runner::Pytest, "{all}");
    assert_eq!(t.test.name, nodeid, "{all}");
    assert_eq!(
        t.test.file.as_deref(),
        nodeid.split_once("::").map(|(f, _)| f),
        "{all}"
    );
    assert_eq!(t.test.phase, Some(Phase::Call), "{all}");
    assert_eq!(t.test.source, Source::Exact, "{all}");
    assert_eq!(t.via, Via::Own, "{all}");
    assert!(t.one_of.is_empty(), "{all}");
    let w = t.test.worker.as_deref().unwrap_or_default();
    assert!(w.starts_with("xdist gw"), "{w:?}: {all}");
    w
}

const SIBLING: &str = "test_sibling.py::test_sibling_holds_its_worker";
const CLEANUP: &str = "test_cleanup.py::test_cleanup_kills_stray_workers";

/// `--tests`: tracer's plugin in both xdist workers (through the
/// environment they inherit) names the victim's test and the killer's,
/// exactly, with their phase and worker, in the certificate and in
/// report.md's headline; the header lists the two variables it set, and
/// the directory they named is gone after the run.
#[test]
fn with_tests_both_tests_are_named_exactly() {
    let argv = pytest();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (suite, r) = run(
        "pytest-xdist --tests",
        || Suite::in_place("pytest"),
        &["--tests"],
        &argv,
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let all = headlines(&rep);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    let vw = named_by_marks(dead.victim.test.as_ref(), SIBLING, &all);
    let k = dead.killer.as_ref().unwrap();
    let kw = named_by_marks(k.test.as_ref(), CLEANUP, &all);
    assert_ne!(vw, kw, "one file per worker: {all}");
    // The certificate's headline names both; report.md's first line (the
    // verdict, cut at 300 characters) leads with the killer's test, and
    // the certificate below it has the whole sentence.
    let killer_phrase = format!(", in `{CLEANUP}` in {kw}");
    let victim_phrase = format!("; the victim was running `{SIBLING}` in {vw}");
    assert!(
        dead.headline
            .contains(&format!("{killer_phrase}{victim_phrase}")),
        "{all}"
    );
    let md = tracer_user::report::render_markdown(&rep);
    let head = md.lines().next().unwrap_or_default();
    assert!(head.contains(&killer_phrase), "{head}");
    assert!(md.contains(&victim_phrase), "{md}");
    // The header: what tracer changed, and nothing else.
    let changes = &r.log.header.env_changes;
    let seen: Vec<(&str, &str, Option<&str>)> = changes
        .iter()
        .map(|c| (c.var.as_str(), c.how.as_str(), c.old.as_deref()))
        .collect();
    // Node's preload too: `--tests` hands the command every integration.
    assert_eq!(
        seen,
        [("PYTHONPATH", "set", None), ("NODE_OPTIONS", "set", None)]
    );
    let dir = Path::new(&changes[0].new);
    assert!(
        dir.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("tracer-tests-")),
        "{dir:?}"
    );
    assert!(!dir.exists(), "{dir:?} is removed at the end of the run");
    // The plugin said how it came in, in the controller and both workers.
    let lines = &rep.run.test_integrations;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    assert_eq!(
        (l.runner.as_str(), l.seam.as_deref(), l.why.as_deref()),
        ("pytest", Some("pytest11 entry point"), None),
        "{lines:?}"
    );
    assert!(
        l.version.as_deref().is_some_and(|v| v.starts_with("9.")),
        "{l:?}"
    );
    assert!(l.workers.contains(&"gw0".to_string()) && l.workers.contains(&"gw1".to_string()));
    assert!(md.contains("**Test names:** pytest 9."), "{md}");
    assert_eq!(rep.run.env_changes, *changes);
    assert!(
        md.contains(&format!(
            "**Environment changed by tracer (--tests):** `PYTHONPATH` unset → `{}` (set)",
            dir.display()
        )),
        "{md}"
    );
}

/// Without `--tests`, what docs/report.md says pytest-xdist shows: no
/// test at either end (xdist and pytest set their variables inside the
/// worker, after its exec, and the test kills with no helper), and no
/// environment change in the header.
#[test]
fn without_tests_no_test_is_named() {
    let argv = pytest();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let suite = Suite::in_place("pytest");
    let (r, _) = suite.record(&[], &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let all = headlines(&rep);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    assert!(dead.victim.test.is_none(), "{all}");
    assert!(dead.killer.as_ref().unwrap().test.is_none(), "{all}");
    assert!(r.log.header.env_changes.is_empty());
    assert!(rep.run.env_changes.is_empty());
    assert!(!tracer_user::report::render_markdown(&rep).contains("Environment changed"));
}

/// The plugin loaded, no tracer, the kill off: the suite passes as it
/// does without it — in both xdist workers, under
/// PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 (xdist itself then by `-p xdist`),
/// through PYTEST_PLUGINS, and by the documented `-p tracer_pytest`.
#[test]
fn the_suite_passes_with_the_plugin_and_no_tracer() {
    let mut argv = pytest();
    argv.splice(3..3, ["-p".to_string(), "xdist".to_string()]);
    argv.push("--trace-config".into());
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let env = [
        ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1".to_string()),
        ("PYTEST_PLUGINS", "tracer_pytest".to_string()),
        ("PYTHONPATH", plugin_dir().display().to_string()),
    ];
    let (took, out) = Suite::in_place("pytest").passes_without_the_kill_env(&argv, &env);
    let text = both(&out);
    // --trace-config lists every plugin registered, with its file.
    let loaded = plugin_dir().join("tracer_pytest.py");
    assert!(
        text.contains(&loaded.display().to_string()),
        "the plugin was not loaded:\n{text}"
    );
    assert!(text.contains("2 passed"), "{text}");
    let mut by_p = pytest();
    by_p.splice(3..3, ["-p".to_string(), "tracer_pytest".to_string()]);
    let by_p: Vec<&str> = by_p.iter().map(String::as_str).collect();
    let (took_p, out) = Suite::in_place("pytest")
        .passes_without_the_kill_env(&by_p, &[("PYTHONPATH", plugin_dir().display().to_string())]);
    assert!(both(&out).contains("2 passed"), "{}", both(&out));
    eprintln!("runners: pytest-xdist with the plugin, no tracer: {took:.1?} (PYTEST_PLUGINS), {took_p:.1?} (-p)");
}

/// The documented line without `--tests` (`-p tracer_pytest`, its
/// directory on PYTHONPATH), under plain `tracer record`: the same exact
/// names as `--tests` gives, and no environment change of tracer's.
#[test]
fn the_one_line_setup_names_the_tests_without_injection() {
    let mut argv = pytest();
    argv.splice(3..3, ["-p".to_string(), "tracer_pytest".to_string()]);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let suite = Suite::in_place("pytest");
    let (r, _) = suite.record_env(
        &[],
        &argv,
        &[("PYTHONPATH", plugin_dir().display().to_string())],
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let all = headlines(&rep);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    named_by_marks(dead.victim.test.as_ref(), SIBLING, &all);
    named_by_marks(dead.killer.as_ref().unwrap().test.as_ref(), CLEANUP, &all);
    assert!(r.log.header.env_changes.is_empty());
}

/// A job that sets its own PYTEST_PLUGINS and PYTHONPATH (a path with a
/// space): `--tests` keeps both (changing only PYTHONPATH) — the job's plugin still loads, in both
/// workers, from its own path, beside tracer's — and the header says what
/// each was and became.
#[test]
fn with_tests_the_jobs_own_plugins_and_path_are_kept() {
    let argv = pytest();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let suite = Suite::in_place("pytest");
    let own = suite.dir.path().join("job plugins");
    std::fs::create_dir(&own).unwrap();
    // The job's plugin: each process that loads it says so in SUITE_DIR.
    std::fs::write(
        own.join("job_probe.py"),
        "import os\n\ndef pytest_configure(config):\n    w = os.environ.get('PYTEST_XDIST_WORKER', 'controller')\n    open(os.path.join(os.environ['SUITE_DIR'], 'probe.' + w), 'w').close()\n",
    )
    .unwrap();
    let old_path = format!("{}:/nonexistent", own.display());
    let (r, _) = suite.record_env(
        &["--tests"],
        &argv,
        &[
            ("PYTEST_PLUGINS", "job_probe".to_string()),
            ("PYTHONPATH", old_path.clone()),
        ],
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let mut probes: Vec<String> = std::fs::read_dir(suite.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("probe."))
        .collect();
    probes.sort();
    // The controller and at least gw0 and gw1 (xdist replaces the killed
    // worker: a third may be there too).
    assert!(
        probes.len() >= 3
            && probes[0] == "probe.controller"
            && probes.contains(&"probe.gw0".into())
            && probes.contains(&"probe.gw1".into()),
        "the job's plugin loaded in {probes:?}"
    );
    let rep = report(&r);
    let all = headlines(&rep);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "worker.pid", Relation::Sibling);
    named_by_marks(dead.victim.test.as_ref(), SIBLING, &all);
    named_by_marks(dead.killer.as_ref().unwrap().test.as_ref(), CLEANUP, &all);
    let c = &r.log.header.env_changes;
    // PYTHONPATH, then Node's (unset before: set); the job's
    // PYTEST_PLUGINS is left as it was.
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!(
        (c[1].var.as_str(), c[1].how.as_str()),
        ("NODE_OPTIONS", "set"),
        "{c:?}"
    );
    assert_eq!(
        (c[0].var.as_str(), c[0].how.as_str(), c[0].old.as_deref()),
        ("PYTHONPATH", "prepended", Some(old_path.as_str()))
    );
    assert!(c[0].new.ends_with(&format!(":{old_path}")), "{c:?}");
}

/// A daemon starts no command: `--tests` there is a usage error that says
/// what to do (`tracer integrations`, the sidecar form's way), before
/// anything is loaded or written.
#[test]
fn daemon_tests_is_refused_with_what_to_do() {
    let err = crate::common::daemon_refuses("--tests");
    assert!(
        err.contains("daemon --tests")
            && err.contains("tracer integrations --dir DIR --format shell"),
        "{err}"
    );
}
