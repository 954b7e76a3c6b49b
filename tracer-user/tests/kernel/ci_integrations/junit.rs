//! The JUnit files tracer writes (`--junit`): valid against ci/test/junit.xsd,
//! stable names across runs, and written by a daemon at its stop.
use std::{path::PathBuf, process::Command};

use super::{both, python, repo};
use crate::common::*;

/// `python ci/test/junit.py [--names] FILES`: ci/test/junit.xsd validation
/// (xmlschema), and the test cases as `classname\tname\tfailed|passed`.
fn junit_py(names: bool, files: &[PathBuf]) -> String {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("ci/test/junit.py"));
    if names {
        cmd.arg("--names");
    }
    let out = cmd.args(files).output().expect("run ci/test/junit.py");
    assert!(out.status.success(), "ci/test/junit.py:\n{}", both(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Every fixture's JUnit file (`tracer report --junit`) is valid against
/// ci/test/junit.xsd, and a schema-invalid file is caught (the
/// validator is not a formality).
#[test]
fn tracer_junit_files_are_valid_junit_10() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = repo().join("tracer-user/tests/fixtures");
    let mut files = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .collect();
    names.sort();
    for log in names {
        let stem = log.file_stem().unwrap().to_string_lossy().into_owned();
        let out_dir = tmp.path().join(&stem);
        let junit = out_dir.join("junit.xml");
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .arg("report")
            .arg(&log)
            .arg("--output")
            .arg(&out_dir)
            .arg("--junit")
            .arg(&junit)
            .output()
            .unwrap();
        // A fixture tracer refuses to read (bad logs) has no JUnit file.
        if out.status.success() {
            files.push(junit);
        }
    }
    assert!(files.len() > 30, "only {} fixtures rendered", files.len());
    junit_py(false, &files);
    // With hostile strings in every record, still valid.
    let seed = std::fs::read_to_string(fixtures.join("seed000_group_kill.ndjson")).unwrap();
    let hostile = seed.replace("worker.js", "w\\u001b[31m\\u0007\\ufffe<o>&\\\"\\u202e.js");
    let dir = tmp.path().join("hostile");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("events.ndjson"), hostile).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .arg("report")
        .arg(dir.join("events.ndjson"))
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", both(&out));
    let listed = junit_py(true, &[dir.join("junit.xml")]);
    assert!(
        listed.contains("w\\e[31m\\x07\\u{fffe}<o>&\"\\u{202e}.js"),
        "{listed}"
    );
    // The canary: a suite without its required `errors` is refused.
    let bad = tmp.path().join("bad.xml");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    std::fs::write(&bad, text.replacen(" errors=\"0\" skipped", " skipped", 1)).unwrap();
    let out = Command::new(python())
        .arg(repo().join("ci/test/junit.py"))
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "an invalid file passed:\n{}",
        both(&out)
    );
}

/// Two runs of one scenario (a worker SIGKILLed by its sibling: the CI
/// test's workload) give identical test-case names: no pid, time or temp
/// path in them, so a CI system's history of a test builds up.
#[test]
fn two_runs_of_one_scenario_give_the_same_junit_names() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let mut listed = Vec::new();
    let mut files = Vec::new();
    for run in ["first", "second"] {
        let dir = tmp.path().join(run);
        std::fs::create_dir(&dir).unwrap();
        let junit = tmp.path().join(format!("{run}.xml"));
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .args(["record", "--output"])
            .arg(dir.join("tracer-report"))
            .arg("--junit")
            .arg(&junit)
            .arg("--")
            .arg("sh")
            .arg(repo().join("ci/test/workload.sh"))
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("tracer-report/report.json")).unwrap(),
        )
        .unwrap();
        let pids: Vec<String> = report["certificates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["victim"]["pid"].to_string())
            .collect();
        let names = junit_py(true, std::slice::from_ref(&junit));
        for pid in &pids {
            assert!(
                !names.contains(pid.as_str()),
                "pid {pid} in a name:\n{names}"
            );
        }
        assert!(
            names.contains("tracer.unexpected_death\tsleep <n> killed by SIGKILL from a sibling"),
            "{names}"
        );
        listed.push(names);
        files.push(junit);
    }
    assert_eq!(listed[0], listed[1], "the names differ between runs");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains("(pid "),
        "the pid belongs in the message:\n{text}"
    );
}

/// `tracer daemon --junit FILE`: written on the daemon's stop path, valid
/// ci/test/junit.xsd, naming the death the watched job had.
#[test]
fn the_daemon_writes_its_junit_file_when_it_stops() {
    use std::io::{BufRead, BufReader};
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("go");
    // The job: waits to be watched, then loses a worker to its sibling.
    let mut job = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while [ ! -e {go} ]; do sleep 0.05; done; sh {workload}",
            go = go.display(),
            workload = repo().join("ci/test/workload.sh").display()
        ))
        .current_dir(tmp.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = tmp.path().join("out");
    let junit = tmp.path().join("junit.xml");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .args(["daemon", "--root-pid", &job.id().to_string(), "--output"])
        .arg(&out)
        .arg("--junit")
        .arg(&junit)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(daemon.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("daemon watching") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "the daemon ended early"
        );
    }
    std::fs::write(&go, "").unwrap();
    assert!(job.wait().unwrap().success());
    assert!(!junit.exists(), "written before the stop");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let status = daemon.wait().unwrap();
    assert!(status.success(), "{status}");
    let names = junit_py(true, &[junit]);
    assert!(
        names.contains("tracer.unexpected_death\tsleep <n> killed by SIGKILL from a sibling"),
        "{names}"
    );
    // Its own stop is not a foreign signal of the job.
    assert!(!names.contains("tracer.foreign_signal"), "{names}");
}
