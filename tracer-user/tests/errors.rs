//! Errors a user can act on: one line, non-zero exit, nothing lost.
mod common;

use std::os::unix::process::CommandExt;

use common::*;
use tracer_user::eventlog::{read_log, Record};

#[test]
fn not_root_is_one_clear_line() {
    require_root(); // to drop privileges we must have them
    let dir = tempfile::tempdir().unwrap();
    let out = tracer()
        .args(["record", "--output"])
        .arg(dir.path().join("out"))
        .args(["--", "true"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("needs root") && stderr.contains("sudo"),
        "{stderr}"
    );
}

#[test]
fn unknown_command_exits_127_and_keeps_the_log() {
    let r = record(&[], &["/nonexistent/tracer-test-command"]);
    assert_eq!(r.code(), Some(127));
    let stderr = r.stderr();
    assert!(
        stderr.contains("cannot run `/nonexistent/tracer-test-command`"),
        "{stderr}"
    );
    let log = read_log(&r.path("events.ndjson")).unwrap();
    assert!(
        !log.truncated,
        "trailer written even though the command never ran"
    );
    // The fork happened (and failed to exec): it is in the log, with its exit.
    assert!(log
        .events
        .iter()
        .any(|e| matches!(e, Record::Exit(x) if x.group_dead)));
}

#[test]
fn missing_hooks_degrade_and_are_named() {
    let r = record(&["--disable-hook", "oom_mark_victim"], &["true"]);
    assert_eq!(r.code(), Some(0));
    let oom = r
        .log
        .header
        .hooks
        .iter()
        .find(|h| h.name == "oom_mark_victim")
        .unwrap();
    assert!(!oom.attached);
    assert!(oom.detail.as_deref().unwrap().contains("disabled"));
}
