//! Errors a user can act on: one line, non-zero exit, nothing lost.
use std::os::unix::process::CommandExt;

use crate::common::*;
use tracer_user::eventlog::{read_log, Record};

#[test]
fn not_root_is_one_clear_line() {
    require_root(); // to drop privileges we must have them
    let dir = tempfile::tempdir().unwrap();
    let out = record_command(&dir.path().join("out"), &[], &["true"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stderr = one_line_failure(&out);
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
    let oom = hook(&r.log, "oom_mark_victim");
    assert!(!oom.attached);
    assert!(oom.detail.as_deref().unwrap().contains("disabled"));
}

/// A CI cancellation: SIGTERM to the tracer reaches the command, and the
/// command's own exit status comes back.
#[test]
fn sigterm_to_tracer_is_forwarded() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let (mut tracer, _) = spawn_ready(record_command(
        dir.path(),
        &[],
        &[
            "sh",
            "-c",
            "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done",
        ],
    ));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(tracer.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(tracer.wait().unwrap().code(), Some(42));
    let log = read_log(&dir.path().join("events.ndjson")).unwrap();
    let forwarded = log.events.iter().any(
        |e| matches!(e, Record::Signal(s) if s.sig == 15 && s.sender.pid == log.header.tracer_pid),
    );
    assert!(
        forwarded,
        "the forwarded SIGTERM is in the log, sent by the tracer"
    );
}
