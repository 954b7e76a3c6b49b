//! The CI scripts quote report.json into places a runner parses: GitHub
//! workflow commands (`::error title=…::headline`) and GitLab's junit.xml.
//! A death whose argv holds ESC, BEL, newlines and workflow commands must
//! reach neither as a control character: no terminal escape in the log, no
//! forged command, and an XML file GitLab can still parse.
use std::{path::Path, process::Command};

use serde_json::Value;
use tracer_user::text::{invariants, is_hazard};

use crate::common::*;

const HOSTILE: &str =
    "node \x1b]0;title\x07\x1b[31m\u{9b}2J a.js\n::error::forged\r%0A::set-output name=x::y";

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// seed000 with the victim's argv made hostile, rendered by `tracer report`.
fn hostile_reports(dir: &Path) {
    let src = std::fs::read_to_string(
        repo().join("tracer-user/tests/fixtures/seed000_group_kill.ndjson"),
    )
    .unwrap();
    let mut out = String::new();
    for line in src.lines() {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v["type"] == "exec" && v["task"]["pid"] == 4242 {
            v["argv"] = serde_json::json!(HOSTILE.split(' ').collect::<Vec<_>>());
        }
        out.push_str(&v.to_string());
        out.push('\n');
    }
    std::fs::write(dir.join("events.ndjson"), out).unwrap();
    let r = report_cmd(&dir.join("events.ndjson"), dir);
    assert!(r.status.success(), "{}", no_panic(&r));
}

fn no_hazard(what: &str, s: &str) {
    let bad: Vec<char> = s.chars().filter(|&c| is_hazard(c) && c != '\n').collect();
    assert!(bad.is_empty(), "{what}: control characters {bad:?} in\n{s}");
}

#[test]
fn hostile_argv_reaches_no_ci_runner_as_control_or_command() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    hostile_reports(dir);
    let summary = dir.join("step-summary.md");

    let gh = Command::new(repo().join("ci/scripts/github-report.sh"))
        .arg(dir)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .output()
        .expect("run github-report.sh (needs jq)");
    assert!(
        gh.status.success(),
        "{}",
        String::from_utf8_lossy(&gh.stderr)
    );
    let log = String::from_utf8(gh.stdout).unwrap();
    no_hazard("github-report.sh stdout", &log);
    // One command per line, each one tracer's: the argv's own `::error::`
    // and `::set-output` stay inside the message, %-escaped.
    let commands: Vec<&str> = log.lines().filter(|l| l.starts_with("::")).collect();
    assert_eq!(commands.len(), log.lines().count(), "{log}");
    assert!(
        commands
            .iter()
            .all(|l| l.starts_with("::error title=tracer")),
        "{log}"
    );
    assert!(!log.contains("::set-output"), "{log}");
    let md = std::fs::read_to_string(&summary).unwrap();
    let v = invariants::markdown(&md);
    assert!(v.is_empty(), "{v:#?}\n{md}");

    // junit.xml is tracer's own (`tracer report --junit`).
    let gl = Command::new(repo().join("ci/scripts/gitlab-report.sh"))
        .arg(dir)
        .env("TRACER", env!("CARGO_BIN_EXE_tracer"))
        .output()
        .expect("run gitlab-report.sh");
    assert!(
        gl.status.success(),
        "{}",
        String::from_utf8_lossy(&gl.stderr)
    );
    let log = String::from_utf8(gl.stdout).unwrap();
    // The script's own section markers are the only ESC and CR in its log.
    assert_eq!(log.matches('\x1b').count(), 4, "{log:?}");
    assert_eq!(log.matches('\r').count(), 2, "{log:?}");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    no_hazard("junit.xml", &junit);
    assert!(junit.contains("<failure"), "{junit}");
    // The argv's newline and ESC are shown, not passed: one name, one line.
    assert!(junit.contains("\\e]0;title"), "{junit}");
}
