//! The sidecar form names tests (issue 39, item 3): a real `tracer daemon`
//! watches a job whose environment comes from `tracer integrations`'
//! output, as the GitHub Action's `start` appends it to `$GITHUB_ENV`, and
//! a real pytest test (the venv of tests/fixtures/suites/setup.sh) kills a
//! helper it spawned a minute into the test, then runs on. The daemon looks
//! every `--metrics-interval` (5 s): the kill comes a dozen looks after the
//! test's marks, which the live window must keep for as long as the test
//! runs (it once dropped them after two looks, and a death ~10 s into a
//! test lost its name under the daemon).
//!
//! The same on a JavaScript suite: jest 30 on Node 24 (what projects run),
//! its `NODE_OPTIONS` from the start step's output alone, the cleanup test
//! SIGKILLing its sibling's worker; the daemon's report names both tests
//! and says which way the names came (`run.test_integrations`, which a
//! daemon's report once left out).
//!
//! Wall time: 61 s of the pytest test's own sleep, then the stop (measured
//! on the 2-core test machine: 66-70 s in all); jest's 1 s.
use std::{
    io::Write as _,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{kill, SIGTERM},
    unistd::Pid,
};
use serde_json::Value;

use super::node_on;
use crate::common::{
    require_root,
    suites::{cache, Suite},
    tracer, wait_for_log,
};

/// The test: a helper (`sleep 600`) started first, then, `SUITE_AFTER`
/// seconds in, `kill -KILL` of it from a second child (the helper's
/// sibling), then two more seconds of test. Both pids go to `SUITE_DIR`.
/// Neither child inherits `PYTEST_CURRENT_TEST`: with it, each would be
/// named by what the kernel sees at its exec (`argv/env`) and the marks
/// would prove nothing; without it only the plugin's marks, kept since the
/// test began, name them (`exact`).
const TEST: &str = r#"
import os, subprocess, time

ENV = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}


def test_kills_its_helper_a_minute_in():
    d = os.environ["SUITE_DIR"]
    helper = subprocess.Popen(["sleep", "600"], env=ENV)
    with open(os.path.join(d, "helper.pid"), "w") as f:
        f.write(str(helper.pid))
    time.sleep(float(os.environ["SUITE_AFTER"]))
    killer = subprocess.Popen(["kill", "-KILL", str(helper.pid)], env=ENV)
    with open(os.path.join(d, "killer.pid"), "w") as f:
        f.write(str(killer.pid))
    assert killer.wait() == 0
    assert helper.wait() == -9
    time.sleep(2)
"#;

const NODEID: &str = "test_long.py::test_kills_its_helper_a_minute_in";

/// The daemon under test; stopped even when an assertion fails first.
struct Daemon(Option<Child>);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut d) = self.0.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// `tracer integrations --format github-env` into `dir`, as the Action's
/// start runs it (no PYTHONPATH or NODE_OPTIONS of the job's): its lines,
/// read as the runner reads `$GITHUB_ENV` (one `NAME=value` a line here:
/// no value has a newline).
fn github_env(dir: &Path) -> Vec<(String, String)> {
    let out = tracer()
        .args(["integrations", "--format", "github-env", "--dir"])
        .arg(dir)
        .env_remove("PYTHONPATH")
        .env_remove("NODE_OPTIONS")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{text}"));
            assert!(!k.contains("<<"), "{text}");
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// `job` run as a CI job runs beside the sidecar: a shell that waits until
/// a real `tracer daemon` (its output in `out`) watches it, then execs the
/// job's command; the daemon stopped as the Action's stop step stops it
/// (SIGTERM, exit 0) once the job is done. The job's output and how long
/// it ran.
fn under_the_daemon(job: Command, out: &Path) -> (std::process::Output, Duration) {
    let mut job = {
        let mut sh = Command::new("sh");
        sh.args(["-c", "read go && exec \"$@\"", "sh"])
            .arg(job.get_program())
            .args(job.get_args())
            .envs(job.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if let Some(dir) = job.get_current_dir() {
            sh.current_dir(dir);
        }
        sh.spawn().unwrap()
    };
    let mut daemon = Daemon(Some(
        tracer()
            .args(["daemon", "--output"])
            .arg(out)
            .args(["--root-pid", &job.id().to_string()])
            .spawn()
            .unwrap(),
    ));
    let me = daemon.0.as_ref().unwrap().id();
    wait_for_log(out, &format!("\"tracer_pid\":{me}"));
    wait_for_log(out, &format!("\"pid\":{0},\"tid\":{0}", job.id()));
    let started = Instant::now();
    job.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let done = job.wait_with_output().unwrap();
    let took = started.elapsed();
    let mut d = daemon.0.take().unwrap();
    kill(Pid::from_raw(d.id() as i32), SIGTERM).unwrap();
    assert_eq!(d.wait().unwrap().code(), Some(0));
    (done, took)
}

fn pid_in(dir: &Path, file: &str) -> u64 {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_else(|e| panic!("the test wrote no {file}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn a_daemon_names_a_test_that_kills_a_minute_in() {
    require_root();
    let python = cache().join("venv/bin/python");
    let t = tempfile::tempdir().unwrap();
    let (suite, state, out) = (
        t.path().join("suite"),
        t.path().join("s"),
        t.path().join("out"),
    );
    for d in [&suite, &state, &out] {
        std::fs::create_dir(d).unwrap();
    }
    std::fs::write(suite.join("test_long.py"), TEST).unwrap();
    let tests_dir = t.path().join("tracer-tests");
    let env = github_env(&tests_dir);
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["PYTHONPATH", "NODE_OPTIONS"]);
    assert_eq!(env[0].1, tests_dir.to_str().unwrap());

    // pytest with what the start step handed on (and nothing of tracer's
    // otherwise: no `--tests`, no `-p`).
    let mut job = Command::new(&python);
    job.args([
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "test_long.py",
    ])
    .current_dir(&suite)
    .envs(env.iter().map(|(k, v)| (k, v)))
    .env("SUITE_DIR", &state)
    .env("SUITE_AFTER", "61")
    .env("PYTHONDONTWRITEBYTECODE", "1");
    let (done, took) = under_the_daemon(job, &out);
    let said = String::from_utf8_lossy(&done.stdout);
    assert!(done.status.success(), "the suite passes: {said}");
    assert!(took > Duration::from_secs(61), "{took:?}");
    eprintln!("runners: sidecar: pytest took {took:.1?} under the daemon");

    let (helper, killer) = (pid_in(&state, "helper.pid"), pid_in(&state, "killer.pid"));
    let rep = report_in(&out);
    let c = killed_by(&rep, helper, killer);
    for (who, at) in [
        ("victim", &c["victim"]["test"]),
        ("killer", &c["killer"]["test"]),
    ] {
        assert_eq!(at["name"], NODEID, "the {who}'s test: {c:#}");
        assert_eq!(
            (&at["runner"], &at["source"], &at["via"]),
            (&"pytest".into(), &"exact".into(), &"spawned".into()),
            "the {who}'s test: {c:#}"
        );
    }
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(NODEID), "{md}");
    says_names(&rep, "pytest", "pytest11 entry point");
    assert!(
        md.contains("**Test names:** pytest ")
            && md.contains("test names through `pytest11 entry point`"),
        "{md}"
    );
}

/// The daemon's report.json in `out`.
fn report_in(out: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap()
}

/// The certificate of `victim` in `rep`, whose killer is `killer`.
fn killed_by(rep: &Value, victim: u64, killer: u64) -> &Value {
    let c = rep["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["victim"]["pid"] == victim)
        .unwrap_or_else(|| panic!("no certificate for pid {victim}: {rep:#}"));
    assert_eq!(c["killer"]["process"]["pid"], killer, "{c:#}");
    c
}

/// The daemon's report has `runner`'s status line: names through `seam`.
fn says_names(rep: &Value, runner: &str, seam: &str) {
    let lines = rep["run"]["test_integrations"].as_array().unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l["runner"] == runner && l["seam"] == seam && l["why"].is_null()),
        "{lines:#?}"
    );
}

/// The same sidecar on a JavaScript suite: jest 30 (the runner suites'
/// own) on Node 24, the job's environment from the start step's output
/// only (its `NODE_OPTIONS`; no `--tests`, no line of jest's config), the
/// cleanup test SIGKILLing the worker its sibling runs in. The daemon's
/// report names both tests, exactly, from the preload's marks, and says
/// which way the names came.
#[test]
fn a_daemon_names_jest_tests_from_the_start_steps_environment() {
    require_root();
    let t = tempfile::tempdir().unwrap();
    let out = t.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let env = github_env(&t.path().join("tracer-tests"));
    let suite = Suite::copied("jest");
    let mut job = Command::new(node_on(Some("24")));
    job.arg(cache().join("node/node_modules/jest/bin/jest.js"))
        .args([
            "--ci",
            "--maxWorkers=2",
            "--no-cache",
            "--cacheDirectory=<rootDir>/.jest-cache",
            "--config={\"transform\":{}}",
        ])
        .current_dir(&suite.cwd)
        .envs(suite.env(true))
        .envs(env.iter().map(|(k, v)| (k, v)));
    let (done, took) = under_the_daemon(job, &out);
    assert_eq!(done.status.code(), Some(1), "the kill fails the suite");
    eprintln!("runners: sidecar: jest took {took:.1?} under the daemon");

    let (worker, killer) = (suite.pid("worker.pid"), suite.pid("killer.pid"));
    let rep = report_in(&out);
    let c = killed_by(&rep, worker.into(), killer.into());
    for (who, file, name) in [
        ("victim", "sibling.test.js", "sibling holds its worker"),
        ("killer", "cleanup.test.js", "cleanup kills stray workers"),
    ] {
        let at = &c[who]["test"];
        assert_eq!(
            (&at["runner"], &at["file"], &at["name"], &at["source"]),
            (&"jest".into(), &file.into(), &name.into(), &"exact".into()),
            "the {who}'s test: {c:#}"
        );
    }
    says_names(&rep, "jest", "jest-circus/runner (default)");
}
