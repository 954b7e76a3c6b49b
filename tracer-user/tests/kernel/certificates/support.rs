//! Shared pieces of the certificate scenarios: worker roles re-exec'd from
//! this test binary, reading report.json, and the offline re-render check.
use std::{
    io::{BufRead, BufReader, Read},
    process::{ChildStdout, Command, Stdio},
};

use serde_json::Value;

use crate::common::{tracer, Recorded, Scenario, SCENARIO_ENV};

/// Env var naming the role a re-exec'd worker plays (see `roles.rs`).
pub(crate) const ROLE_ENV: &str = "CERT_ROLE";
/// The test a worker runs: [`super::role`], which plays `ROLE_ENV`'s role.
const ROLE_TEST: &str = "certificates::role";
/// Above any pid_max Linux allows (2^22): kill() on it can only fail.
pub(crate) const NO_SUCH_PID: i32 = 2_000_000_000;
/// Lines a scenario prints for its test (what it did, with which pids)
/// start with this.
pub(crate) const TAG: &str = "CERT ";

/// This test binary re-run as a worker playing `role`; `extra` are further
/// libtest filters (they match no test, but show in the worker's argv).
pub(crate) fn worker(role: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        ROLE_TEST,
        "--nocapture",
        "--test-threads=1",
        "-q",
    ])
    .args(extra)
    .env(ROLE_ENV, role)
    .env_remove(SCENARIO_ENV);
    cmd
}

/// The next line starting with [`TAG`], without the tag.
fn read_tagged(out: &mut impl BufRead) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        if let Some(rest) = line.trim_end().strip_prefix(TAG) {
            return Some(rest.to_string());
        }
    }
}

/// Prints a [`TAG`]ged line: what the scenario did, for its test.
pub(crate) fn tag(line: String) {
    println!("{TAG}{line}");
}

/// The pid `key=PID` in `line`.
pub(crate) fn pid(line: &str, key: &str) -> u32 {
    field(line, key).parse().unwrap()
}

/// `key=value` out of a line of such words (a tagged or a ready line).
pub(crate) fn field(line: &str, key: &str) -> String {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
        .to_string()
}

/// Runs the scenario under `tracer record`, checks the offline re-render,
/// and returns the recording with its parsed report.json.
pub(crate) fn certify(sc: &Scenario) -> (Recorded, Value) {
    certify_env(sc, &[])
}

/// Like `certify`, with extra environment for the scenario.
pub(crate) fn certify_env(sc: &Scenario, env: &[(&str, &str)]) -> (Recorded, Value) {
    let r = sc.record_env(&[], env);
    let report = checked_report(&r);
    (r, report)
}

/// report.json of a recording, after checking that `tracer report` over its
/// events.ndjson reproduces report.json and report.md byte for byte.
pub(crate) fn checked_report(r: &Recorded) -> Value {
    let json = std::fs::read(r.path("report.json")).unwrap_or_else(|e| {
        panic!("no report.json ({e}); tracer stderr:\n{}", r.stderr());
    });
    let again = tempfile::tempdir().unwrap();
    let out = tracer()
        .arg("report")
        .arg(r.path("events.ndjson"))
        .arg("--output")
        .arg(again.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "tracer report failed: {out:?}");
    for file in ["report.json", "report.md"] {
        let a = std::fs::read(r.path(file)).unwrap();
        let b = std::fs::read(again.path().join(file)).unwrap();
        assert!(a == b, "{file}: `tracer report` does not reproduce it");
    }
    // CERT_KEEP=DIR keeps each run's log and reports (to read them, or to
    // turn a real log into a fixture).
    if let Some(keep) = std::env::var_os("CERT_KEEP") {
        let dir = std::path::Path::new(&keep).join(r.log.header.tracer_pid.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["events.ndjson", "report.json", "report.md"] {
            std::fs::copy(r.path(file), dir.join(file)).unwrap();
        }
    }
    serde_json::from_slice(&json).unwrap()
}

pub(crate) fn markdown(r: &Recorded) -> String {
    std::fs::read_to_string(r.path("report.md")).unwrap()
}

/// The one certificate whose victim is `pid`.
pub(crate) fn cert(report: &Value, pid: u32) -> &Value {
    let found: Vec<&Value> = certs(report)
        .iter()
        .filter(|c| c["victim"]["pid"] == pid)
        .collect();
    assert_eq!(found.len(), 1, "one certificate for pid {pid}: {report:#}");
    found[0]
}

pub(crate) fn certs(report: &Value) -> &Vec<Value> {
    report["certificates"].as_array().unwrap()
}

pub(crate) fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// Ranks never go back up the list: unexpected deaths come first.
pub(crate) fn assert_ranked(report: &Value) {
    let order = |r: &str| {
        ["unexpected", "nonzero_exit", "consequence", "expected"]
            .iter()
            .position(|x| *x == r)
    };
    let ranks: Vec<usize> = certs(report)
        .iter()
        .map(|c| order(s(&c["rank"])).unwrap())
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "ranks: {ranks:?}");
    let counts = &report["counts"];
    assert_eq!(
        counts["unexpected"].as_u64().unwrap() as usize,
        ranks.iter().filter(|&&r| r == 0).count()
    );
}

/// Runs the scenario under `tracer record` while `during` reads the traced
/// command's stdout (the tracer's own) line by line as it is written.
pub(crate) fn certify_live(
    sc: &Scenario,
    during: impl FnOnce(&mut BufReader<ChildStdout>),
) -> (Recorded, Value) {
    crate::common::require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut child = sc
        .command(dir.path(), &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let errs = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let mut out = BufReader::new(child.stdout.take().unwrap());
    during(&mut out);
    let mut stdout = Vec::new();
    out.read_to_end(&mut stdout).unwrap();
    let status = child.wait().unwrap();
    let output = std::process::Output {
        status,
        stdout,
        stderr: errs.join().unwrap(),
    };
    let r = Recorded::read(dir, output);
    let report = checked_report(&r);
    (r, report)
}

/// The tagged line a scenario printed on its stdout, without the tag.
pub(crate) fn scenario_tag(r: &Recorded) -> String {
    read_tagged(&mut std::io::Cursor::new(&r.output.stdout))
        .unwrap_or_else(|| panic!("scenario printed no tag; stderr:\n{}", r.stderr()))
}
