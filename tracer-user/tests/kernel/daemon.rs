//! `tracer daemon`: watching processes that already run, rotation, restart.
use std::{
    io::Write,
    os::unix::process::ExitStatusExt,
    path::Path,
    process::{Child, Command, Stdio},
};

use crate::common::*;
use nix::{sys::signal::kill, unistd::Pid};
use tracer_user::eventlog::{read_series, Record};

/// A shell of the test's own that waits for a line, then forks and signals.
fn waiting_shell() -> Child {
    Command::new("sh")
        .args([
            "-c",
            "read go; sh -c 'sleep 30 & kill -TERM $!; wait'; exit 0",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

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

fn start_daemon(dir: &Path, scope: &[&str], extra: &[&str]) -> Daemon {
    Daemon(Some(
        tracer()
            .arg("daemon")
            .arg("--output")
            .arg(dir)
            .args(scope)
            .args(extra)
            .spawn()
            .unwrap(),
    ))
}

fn stop(mut daemon: Daemon) {
    let mut d = daemon.0.take().unwrap();
    kill(Pid::from_raw(d.id() as i32), nix::sys::signal::SIGTERM).unwrap();
    assert_eq!(d.wait().unwrap().code(), Some(0));
}

fn run_shell_under(dir: &Path, scope: &[&str], extra: &[&str], sh: Child) {
    let d = start_daemon(dir, scope, extra);
    let me = d.0.as_ref().unwrap().id();
    wait_for_log(dir, &format!("\"tracer_pid\":{me}"));
    wait_for_log(dir, "\"type\":\"existing\",\"seq\"");
    run_shell(dir, d, sh);
}

/// Once the daemon logs the waiting shell: let it go, wait for its child's
/// SIGTERM in the log, stop the daemon (status 0).
fn run_shell(dir: &Path, d: Daemon, mut sh: Child) {
    wait_for_log(dir, &format!("\"pid\":{0},\"tid\":{0}", sh.id()));
    sh.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(sh.wait().unwrap().success());
    wait_for_log(dir, "\"sig\":15");
    stop(d);
}

#[test]
fn root_pid_scope_rotation_and_restart() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let sh = waiting_shell();
    let pid = sh.id();
    run_shell_under(
        dir.path(),
        &["--root-pid", &pid.to_string()],
        &["--rotate-size", "1500"],
        sh,
    );

    let log = read_series(dir.path()).unwrap();
    assert!(!log.truncated);
    assert!(
        dir.path().join("events-0000.ndjson").exists(),
        "rotated at 1500 bytes"
    );
    let existing = log.events.iter().existing().next();
    let existing = existing.expect("the running shell is logged as existing");
    assert_eq!(existing.task.pid, pid);
    assert_eq!(existing.argv[0], "sh");
    // Its child's fork and the SIGTERM it sent are seen, with identities
    // that chain back to the existing process.
    let child = log
        .events
        .iter()
        .forks()
        .find(|f| f.parent.key() == existing.task.key())
        .map(|f| f.child.key());
    let child = child.expect("fork of the pre-existing shell");
    assert!(log
        .events
        .iter()
        .any(|e| matches!(e, Record::Signal(s) if s.sig == 15 && s.sender.key() == child)));
    // Gap-free sequence across the segments.
    let seqs: Vec<u64> = log
        .events
        .iter()
        .filter_map(|e| e.stamp().map(|s| s.seq))
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(dir.path().join("report.json").exists());

    // A restart keeps what the last run wrote.
    let before = std::fs::read_dir(dir.path()).unwrap().count();
    let sh = waiting_shell();
    let pid = sh.id();
    run_shell_under(dir.path(), &["--root-pid", &pid.to_string()], &[], sh);
    let after = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(after > before, "the previous live log became a segment");
    let log = read_series(dir.path()).unwrap();
    let shells = log
        .events
        .iter()
        .filter(|e| matches!(e, Record::Existing(_)))
        .count();
    assert_eq!(shells, 2, "both runs' processes are in the series");
}

#[test]
fn cgroup_scope_follows_members() {
    require_root();
    let cg = cgroup::TestCgroup::with_memory_limit(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let sh = waiting_shell();
    std::fs::write(cg.dir.join("cgroup.procs"), sh.id().to_string()).unwrap();
    let pid = sh.id();
    run_shell_under(dir.path(), &["--cgroup", cg.dir.to_str().unwrap()], &[], sh);
    let log = read_series(dir.path()).unwrap();
    assert_eq!(
        log.header.scope.as_deref(),
        Some(format!("cgroup {}", cg.dir.display()).as_str())
    );
    assert_seeded_and_signalled(dir.path(), pid);
}

/// A cgroup's rescan that fails (here: the daemon is out of file
/// descriptors, so its task iterator cannot open one) is said once and
/// tried again; once descriptors are back, the member that joined meanwhile
/// is seeded and its child's SIGTERM logged. Before, the daemon ended on
/// the first failed rescan.
#[test]
fn a_failing_cgroup_rescan_is_retried_not_fatal() {
    require_root();
    let cg = cgroup::TestCgroup::with_memory_limit(1 << 30);
    let dir = tempfile::tempdir().unwrap();
    let said = tempfile::NamedTempFile::new().unwrap();
    let d = Daemon(Some(
        tracer()
            .args(["daemon", "--output"])
            .arg(dir.path())
            .args(["--cgroup", cg.dir.to_str().unwrap()])
            .stderr(said.reopen().unwrap())
            .spawn()
            .unwrap(),
    ));
    let me = d.0.as_ref().unwrap().id() as i32;
    wait_for_log(dir.path(), &format!("\"tracer_pid\":{me}"));
    let stderr = || std::fs::read_to_string(said.path()).unwrap();
    let wait_said = |needle: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !stderr().contains(needle) {
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon never said {needle:?}: {}",
                stderr()
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    wait_said("daemon watching");
    let limit = |cur: u64| {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: prlimit on the test's own child, into and from locals.
        unsafe {
            assert_eq!(
                libc::prlimit(me, libc::RLIMIT_NOFILE, std::ptr::null(), &mut lim),
                0
            );
            let old = lim.rlim_cur;
            lim.rlim_cur = cur as libc::rlim_t;
            assert_eq!(
                libc::prlimit(me, libc::RLIMIT_NOFILE, &lim, std::ptr::null_mut()),
                0
            );
            old
        }
    };
    // A new descriptor takes the lowest free number: with the limit there,
    // the next open fails (those it holds above it stay usable).
    let held: std::collections::BTreeSet<u64> = std::fs::read_dir(format!("/proc/{me}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .collect();
    let lowest_free = (0..).find(|n| !held.contains(n)).unwrap();
    let was = limit(lowest_free);
    let sh = waiting_shell();
    let pid = sh.id();
    std::fs::write(cg.dir.join("cgroup.procs"), pid.to_string()).unwrap();
    wait_said("cgroup rescan failed");
    limit(was);
    wait_said("cgroup rescan works again");
    run_shell(dir.path(), d, sh);
    assert_seeded_and_signalled(dir.path(), pid);
}

/// The waiting shell `pid` was found running (`existing`) and its child's
/// SIGTERM logged (the child may die before it ever execs sleep).
fn assert_seeded_and_signalled(dir: &Path, pid: u32) {
    let log = read_series(dir).unwrap();
    assert!(log
        .events
        .iter()
        .any(|e| matches!(e, Record::Existing(x) if x.task.pid == pid)));
    assert!(log
        .events
        .iter()
        .any(|e| matches!(e, Record::Signal(s) if s.sig == 15 && s.sender.pid != pid)));
}

/// `--redact`: the existing process's argv and everything after it are
/// masked in every file the daemon writes.
#[test]
fn redact_masks_the_daemon_log_and_reports() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let sh = Command::new("sh")
        .args([
            "-c",
            "read go; sh -c 'sleep 30 & kill -TERM $!; wait' sh \"$1\"; exit 0",
            "sh",
            "--token=hunter22",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sh.id();
    run_shell_under(
        dir.path(),
        &["--root-pid", &pid.to_string()],
        &["--redact", r"hunter\d+"],
        sh,
    );
    let log = read_series(dir.path()).unwrap();
    assert_eq!(log.header.redactions, 1);
    let existing = log.events.iter().existing().find(|x| x.task.pid == pid);
    assert_eq!(
        existing.expect("the shell, existing").argv.last().unwrap(),
        "--token=[REDACTED]"
    );
    for f in std::fs::read_dir(dir.path()).unwrap() {
        let f = f.unwrap().path();
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            !text.contains("hunter22"),
            "{} holds the secret",
            f.display()
        );
    }
}

#[test]
fn keep_segments_bounds_the_disk_and_the_report_says_what_went() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    // First a sibling's SIGKILL (its records in the oldest files, deleted
    // before the stop), then many short-lived processes, then the shell's
    // own SIGTERM to itself as its very last event: that one is in the
    // newest files, never pruned.
    let mut sh = Command::new("sh")
        .args([
            "-c",
            // A pause between rounds: each round's records reach the log in a
            // drain of their own, so the daemon rotates between them (all in
            // one drain, they rotated once: a loaded machine did that).
            // The kill waits for the child's exec (a loaded machine ran
            // the kill first: a fork that never exec'd, no `sleep 30`).
            "read go; sleep 30 & s=$!; until read c </proc/$s/comm && [ \"$c\" = sleep ]; do :; done; \
             sh -c \"kill -KILL $s\"; wait $s; \
             for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sh -c 'exit 0'; sleep 0.05; done; kill -TERM $$",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sh.id();
    let d = start_daemon(
        dir.path(),
        &["--root-pid", &pid.to_string()],
        &[
            "--rotate-size",
            "700",
            "--keep-segments",
            "2",
            "--metrics-interval",
            "1s",
        ],
    );
    wait_for_log(dir.path(), &format!("\"pid\":{0},\"tid\":{0}", pid));
    sh.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(sh.wait().unwrap().signal(), Some(15));
    wait_for_log(dir.path(), "\"sig\":15");
    // Idle now, the loop turning every second: a file of nothing but its
    // header (1.2 KB, past the 700-byte rotate size) is never rotated, so
    // the SIGTERM's segment stays. It once rotated at every turn and was
    // pruned within two: under load, before the wait above saw it.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        log_shows(dir.path(), "\"sig\":15"),
        "an idle daemon rotated its last events away"
    );
    stop(d);
    let segments: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("events-"))
        .collect();
    assert!(segments.len() <= 2, "kept {segments:?}");
    assert!(
        !dir.path().join("events-0000.ndjson").exists(),
        "the oldest segment was kept: {segments:?}"
    );
    let report = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(
        report.contains("were deleted (--keep-segments)"),
        "{report}"
    );
    // The stop wrote its reports from what it kept as the run went, not
    // from the files left: the kill whose records were deleted is certified.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("report.json")).unwrap()).unwrap();
    let killed = json["certificates"].as_array().unwrap().iter().any(|c| {
        c["victim"]["command"] == "sleep 30" && c["cause"]["signal"]["sig_name"] == "SIGKILL"
    });
    assert!(killed, "{report}");
    let first = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| {
            e.file_name().to_string_lossy().ends_with(".ndjson")
                && std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .contains("\"sig\":9")
        });
    assert!(
        !first,
        "the SIGKILL's records were not deleted: nothing proven"
    );
}

/// The kernel side wakes the daemon at most once per batching period; a
/// burst's last records (here the shell's own exit, right after thirty
/// short children) come with no wake-up of their own and no later event
/// to bring them. The daemon's catch-up drain must log them anyway.
#[test]
fn a_burst_reaches_the_live_log_without_a_later_event() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut sh = Command::new("sh")
        .args([
            "-c",
            "read go; i=0; while [ $i -lt 30 ]; do /bin/true; i=$((i+1)); done; exit 7",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sh.id();
    let d = start_daemon(dir.path(), &["--root-pid", &pid.to_string()], &[]);
    let me = d.0.as_ref().unwrap().id();
    wait_for_log(dir.path(), &format!("\"tracer_pid\":{me}"));
    wait_for_log(dir.path(), &format!("\"pid\":{0},\"tid\":{0}", pid));
    sh.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(sh.wait().unwrap().code(), Some(7));
    // Nothing else happens in scope from here on: only the catch-up drain
    // can bring the shell's exit (status 7) into the log.
    wait_for_log(dir.path(), "\"exited\":{\"code\":7}");
    stop(d);
    let log = read_series(dir.path()).unwrap();
    let execs = log
        .events
        .iter()
        .filter(|e| matches!(e, Record::Exec(x) if x.argv.first().map(String::as_str) == Some("/bin/true")))
        .count();
    assert_eq!(execs, 30, "every child of the burst is logged");
}
