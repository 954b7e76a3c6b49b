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

/// A command line tracer refuses exits 64 (EX_USAGE), not clap's 2 (which
/// `make` and test runners also return); a command given without `--` is
/// told where it goes; help and version are not errors.
#[test]
fn usage_errors_exit_64_and_a_command_without_dashes_gets_a_hint() {
    let run = |args: &[&str]| {
        let out = tracer().args(args).output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            no_panic(&out),
        )
    };
    let (code, _, err) = run(&["record", "true"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(
        err.contains("tracer: hint: the command to run goes after `--`: tracer record -- true"),
        "{err}"
    );
    let (code, _, err) = run(&["record", "--timeout", "5s", "sleep", "1"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(
        err.contains("tracer record --timeout 5s -- sleep 1"),
        "{err}"
    );
    let (code, _, err) = run(&["record"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(err.contains("after `--`"), "{err}");
    // A mistyped option is clap's to explain; no hint about `--` then.
    let (code, _, err) = run(&["record", "--timout", "5s", "--", "true"]);
    assert_eq!(code, Some(64), "{err}");
    assert!(!err.contains("hint"), "{err}");
    let (code, _, err) = run(&["no-such-command"]);
    assert_eq!(code, Some(64), "{err}");
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, Some(0));
    assert!(out.contains("Usage"), "{out}");
    let (code, out, _) = run(&["--version"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("tracer "), "{out}");
    // tracer's own usage errors found later are 64 too.
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seed000_group_kill.ndjson");
    let out = tracer()
        .arg("report")
        .arg(&fixture)
        .arg("--output")
        .arg(dir.path())
        .args(["--redact", "("])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", no_panic(&out));
    let out = tracer()
        .arg("report")
        .arg(&fixture)
        .arg("--output")
        .arg(dir.path())
        .arg("--junit")
        .arg(dir.path().join(".."))
        .output()
        .unwrap();
    let err = no_panic(&out);
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(err.contains("names no file"), "{err}");
}

/// A pipe with no reader: writing to it fails with EPIPE (tracer, like
/// every Rust program, ignores SIGPIPE).
fn closed_pipe() -> std::process::Stdio {
    let (r, w) = nix::unistd::pipe().unwrap();
    drop(r);
    std::process::Stdio::from(w)
}

/// stdout and stderr closed pipes (a CI log shipper that went away, `|
/// head`): tracer passes the command's status through and writes its
/// reports; it never panics (exit 101) on a message it cannot print.
#[test]
fn a_closed_stdout_and_stderr_cost_no_panic() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let status = tracer()
        .args(["record", "--output"])
        .arg(dir.path())
        .args(["--fail-on", "unexpected-death"])
        // A sibling's kill: unexpected, so --fail-on has a line to print.
        .args([
            "--",
            "sh",
            "-c",
            "sleep 5 & p=$!; sh -c 'kill -9 $1' k $p; wait; exit 3",
        ])
        .stdout(closed_pipe())
        .stderr(closed_pipe())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(3));
    assert!(dir.path().join("report.md").exists());
    // The same for the other commands and for usage errors.
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/seed000_group_kill.ndjson");
    for args in [
        vec![
            "report".to_string(),
            fixture.display().to_string(),
            "--output".into(),
            dir.path().display().to_string(),
        ],
        vec!["summarize".into(), dir.path().display().to_string()],
        vec!["record".into(), "true".into()],
        vec!["--help".into()],
    ] {
        let status = tracer()
            .args(&args)
            .stdout(closed_pipe())
            .stderr(closed_pipe())
            .status()
            .unwrap();
        assert_ne!(status.code(), Some(101), "{args:?} panicked");
        assert!(status.code().is_some(), "{args:?}: {status}");
    }
}

/// `--output` through a symlink root made (a link only root can replace):
/// the directory is the same at the end, so no "replaced during the run".
#[test]
fn a_root_made_link_as_output_directory_is_not_a_swap() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = tracer()
        .args(["record", "--output"])
        .arg(&link)
        .args(["--", "true"])
        .output()
        .unwrap();
    let err = no_panic(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("replaced during the run"), "{err}");
    assert!(real.join("report.json").exists());
}

/// `--fail-open` where tracer cannot load (here: not root): the command
/// runs untraced, its status (a signal death too) is the step's, one line
/// says so. Without it, the same machine fails the step (70).
#[test]
fn fail_open_runs_the_command_untraced_with_one_loud_line() {
    require_root(); // to drop privileges we must have them
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], cmd: &str| {
        tracer()
            .args(["record", "--output"])
            .arg(dir.path().join("out"))
            .args(extra)
            .args(["--", "sh", "-c", cmd])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    };
    let out = run(&["--fail-open"], "echo ran; exit 7");
    let err = no_panic(&out);
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("needs root") && err.contains("UNTRACED"),
        "{err}"
    );
    assert!(!dir.path().join("out/events.ndjson").exists());
    let out = run(&["--fail-open"], "kill -TERM $$");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        out.status.signal(),
        Some(15),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&[], "exit 7");
    one_line_failure(&out);
}
