//! `--fail-on`: what the tracer saw decides the run's status.
mod common;

use common::*;

#[test]
fn fail_on_turns_findings_into_a_failing_status() {
    let daemon = "(setsid sleep 2 >/dev/null 2>&1 &); exit 0";
    let r = record(
        &["--fail-on", "leak", "--leaks", "kill"],
        &["sh", "-c", daemon],
    );
    assert_eq!(r.code(), Some(86), "{}", r.stderr());
    assert!(r.stderr().contains("--fail-on leak: 1 found"));
    // Not asked for: the same run passes.
    let r = record(
        &["--fail-on", "oom,foreign-signal", "--leaks", "kill"],
        &["sh", "-c", daemon],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    // A failing command keeps its own status.
    let r = record(
        &["--fail-on", "unexpected-death"],
        &["sh", "-c", "sleep 5 & kill -SEGV $!; wait; exit 3"],
    );
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
}

#[test]
fn a_signal_out_of_the_run_fails_it() {
    require_root();
    // Outside the run, but the test's own child: the only process it may hit.
    let mut outsider = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let script = format!("kill -TERM {}; exit 0", outsider.id());
    let r = record(&["--fail-on", "foreign-signal"], &["sh", "-c", &script]);
    let status = outsider.wait().unwrap();
    assert_eq!(r.code(), Some(86), "{}", r.stderr());
    assert!(
        r.stderr().contains("--fail-on foreign-signal: 1 found"),
        "{}",
        r.stderr()
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(15));
}
