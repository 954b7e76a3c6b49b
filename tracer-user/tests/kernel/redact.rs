//! `--redact REGEX`: a secret on a command line or in stderr reaches no
//! output: not the log, not a report, not the tracer's own stderr.
use std::path::Path;

use crate::common::*;
use tracer_user::{eventlog::read_log, redact::MASK};

const SECRET: &str = "hunter22";

/// A child whose argv holds the secret is killed (its own child leaks and
/// is removed), and the command prints the secret on stderr.
const SCRIPT: &str = "sh -c 'sleep 30; true' hunter22 & sleep 0.3; kill -9 $!; \
                      echo password hunter22 >&2; exit 1";

/// Every file of the output directory: none may hold the secret, some must
/// hold the mask.
fn assert_masked(dir: &Path, files: &[&str]) {
    let mut listed: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    listed.sort();
    for want in files {
        assert!(
            listed.iter().any(|f| f == want),
            "{want} missing: {listed:?}"
        );
    }
    for f in &listed {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(!text.contains(SECRET), "{f} holds the secret");
        assert!(text.contains(MASK), "{f} shows no {MASK}");
    }
}

/// The tracer's own lines; the command's stderr passes through as it is.
fn tracer_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| *l != "password hunter22")
        .collect()
}

#[test]
fn a_secret_reaches_no_output() {
    let r = record(
        &[
            "--redact",
            r"hunter\d+",
            "--leaks",
            "kill",
            "--leak-grace",
            "2s",
        ],
        &["sh", "-c", SCRIPT],
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    assert_masked(
        r.dir.path(),
        &["events.ndjson", "report.json", "report.md", "report.html"],
    );
    let stderr = r.stderr();
    for line in tracer_lines(&stderr) {
        assert!(!line.contains(SECRET), "tracer printed the secret: {line}");
    }
    assert!(
        stderr.contains(&format!("last words: `password {MASK}`")),
        "{stderr}"
    );
    assert_eq!(r.log.header.redactions, 1);
    assert_eq!(r.log.header.command[2], SCRIPT.replace(SECRET, MASK));
    // The killed shell's certificate shows its masked argv.
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let killed = rep["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cause"]["kind"] == "killed_in_run")
        .expect("the killed child's certificate");
    assert_eq!(
        killed["victim"]["argv"],
        serde_json::json!(["sh", "-c", "sleep 30; true", MASK])
    );
    assert_eq!(rep["run"]["redactions"], 1);
}

#[test]
fn report_redact_masks_the_reports_of_an_unredacted_log() {
    let r = record(
        &["--leaks", "kill", "--leak-grace", "2s"],
        &["sh", "-c", SCRIPT],
    );
    let log = r.path("events.ndjson");
    let out = tempfile::tempdir().unwrap();
    let rendered = tracer()
        .arg("report")
        .arg(&log)
        .arg("--output")
        .arg(out.path())
        .args(["--redact", "hunter[0-9]+", "--redact", "password"])
        .output()
        .unwrap();
    let stderr = no_panic(&rendered);
    assert_eq!(rendered.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(SECRET), "{stderr}");
    assert_masked(out.path(), &["report.json", "report.md", "report.html"]);
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("report.json")).unwrap())
            .unwrap();
    assert_eq!(rep["run"]["redactions"], 2);
    // The log read is left as it was.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains(SECRET));
    assert_eq!(read_log(&log).unwrap().header.redactions, 0);
}

#[test]
fn snapshots_are_masked_too() {
    let r = record(
        &[
            "--redact",
            r"hunter\d+",
            "--timeout",
            "1s",
            "--kill-grace",
            "2s",
        ],
        &["sh", "-c", "sleep 30; : hunter22"],
    );
    assert_eq!(r.code(), Some(124), "{}", r.stderr());
    assert!(
        r.events()
            .any(|e| matches!(e, tracer_user::eventlog::Record::Snapshot(_))),
        "a timeout snapshot"
    );
    assert_masked(
        r.dir.path(),
        &["events.ndjson", "report.json", "report.md", "report.html"],
    );
    assert!(!r.stderr().contains(SECRET), "{}", r.stderr());
}

#[test]
fn invalid_pattern_is_one_line_and_exit_70() {
    for sub in ["record", "report", "daemon"] {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = tracer();
        cmd.arg(sub);
        match sub {
            "record" => cmd.args(["--output"]).arg(dir.path()),
            "report" => cmd.arg(dir.path()),
            _ => cmd.args(["--all", "--output"]).arg(dir.path()),
        };
        cmd.args(["--redact", "ok", "--redact", "hunter(22"]);
        if sub == "record" {
            cmd.args(["--", "true"]);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A usage error: EX_USAGE, before anything is loaded.
        assert_eq!(out.status.code(), Some(64), "{sub}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{sub}: {stderr}");
        assert_eq!(
            stderr.trim_end(),
            "tracer: error: --redact pattern 2 of 2 is not a valid regex: unclosed group",
            "{sub}"
        );
    }
}
