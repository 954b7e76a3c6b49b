//! `--fail-on`: what the tracer saw decides the run's status.
use crate::common::*;

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

fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `tracer report LOG --fail-on ...` into a fresh directory.
fn report_fail_on(log: &str, conditions: &str) -> std::process::Output {
    let out = tempfile::tempdir().unwrap();
    tracer()
        .arg("report")
        .arg(fixture(log))
        .arg("--output")
        .arg(out.path())
        .args(["--fail-on", conditions])
        .output()
        .expect("run tracer report")
}

#[test]
fn report_fail_on_judges_a_recorded_log() {
    // An OOM kill: unexpected, and an OOM.
    let out = report_fail_on("oom.ndjson", "unexpected-death");
    assert_eq!(out.status.code(), Some(86), "{}", no_panic(&out));
    assert!(no_panic(&out).contains("--fail-on unexpected-death: 1 found"));
    let out = report_fail_on("oom.ndjson", "oom");
    assert_eq!(out.status.code(), Some(86), "{}", no_panic(&out));
    // The same log, asked about something it does not show.
    let out = report_fail_on("oom.ndjson", "foreign-signal");
    assert_eq!(out.status.code(), Some(0), "{}", no_panic(&out));
    // A recorded leak.
    let out = report_fail_on("real_leak_kill.ndjson", "leak");
    assert_eq!(out.status.code(), Some(86), "{}", no_panic(&out));
}

/// A cascade is one unexpected death: a worker SIGKILLed, then its runner,
/// `sh -c` and npx each exiting 1 because of it. The root is counted once.
#[test]
fn report_fail_on_counts_a_cascade_once() {
    let out = report_fail_on("real_cascade_npx.ndjson", "unexpected-death");
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(86), "{stderr}");
    assert!(
        stderr.contains("--fail-on unexpected-death: 1 found"),
        "{stderr}"
    );
    // The stderr summary names the root and folds the chain under it.
    let items: Vec<&str> = stderr.lines().filter(|l| l.starts_with("  * ")).collect();
    assert_eq!(items.len(), 1, "{stderr}");
    assert!(
        stderr.contains("      then: `node /tmp/rc/npxpkg/node_modules/.bin/runme`"),
        "{stderr}"
    );
}

#[test]
fn report_fail_on_a_daemon_log_refuses_what_it_cannot_judge() {
    let out = report_fail_on("daemon.ndjson", "unexpected-death,oom");
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(86), "{stderr}");
    assert!(stderr.contains("--fail-on unexpected-death: 1 found"));
    // A signal across the scope's boundary it judges (systemd's SIGTERM
    // from outside the watched scope); leaks it cannot.
    let out = report_fail_on("daemon.ndjson", "foreign-signal");
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(86), "{stderr}");
    assert!(
        stderr.contains("--fail-on foreign-signal: 1 found"),
        "{stderr}"
    );
    let out = report_fail_on("daemon.ndjson", "leak");
    let stderr = no_panic(&out);
    // A usage error (EX_USAGE).
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(
        stderr.contains("--fail-on leak is not supported"),
        "{stderr}"
    );
}

/// `tracer report DIR` with no --output writes into DIR itself (a daemon's
/// directory), not beside it.
#[test]
fn report_of_a_directory_renders_into_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("daemon-out");
    std::fs::create_dir(&dir).unwrap();
    std::fs::copy(fixture("daemon.ndjson"), dir.join("events.ndjson")).unwrap();
    let out = tracer().arg("report").arg(&dir).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", no_panic(&out));
    for f in ["report.json", "report.md", "report.html"] {
        assert!(dir.join(f).is_file(), "{f} in the directory");
        assert!(!tmp.path().join(f).exists(), "{f} not beside it");
    }
}
