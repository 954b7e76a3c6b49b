//! Hung and cancelled runs: snapshots of what every process is blocked on.
use std::{
    io::Write,
    process::Stdio,
    time::{Duration, Instant},
};

use crate::common::*;
use nix::{sys::signal::kill, unistd::Pid};
use tracer_user::eventlog::{read_log, Record, SnapshotTaken};

/// seed 001: a thread blocked forever reading a socketpair whose other end its
/// own process holds. Nothing can ever wake it.
const SELF_DEADLOCK: &str = "import socket, threading
a, b = socket.socketpair()
t = threading.Thread(target=lambda: a.recv(1)); t.start(); t.join()";

fn snapshots(log: &tracer_user::eventlog::EventLog) -> Vec<&SnapshotTaken> {
    log.events.iter().snapshots().collect()
}

#[test]
fn timeout_snapshots_the_deadlock_then_stops_the_run() {
    let r = record(
        &["--timeout", "2s", "--kill-grace", "5s"],
        &["python3", "-c", SELF_DEADLOCK],
    );
    assert_eq!(
        r.code(),
        Some(124),
        "timeout(1)'s status; stderr: {}",
        r.stderr()
    );
    let snaps = snapshots(&r.log);
    assert_eq!(snaps.len(), 1);
    assert_eq!(snaps[0].reason, "timeout");
    let finding = snaps[0]
        .snapshot
        .findings
        .iter()
        .find(|f| f.kind == "self_held_peer")
        .unwrap_or_else(|| {
            panic!(
                "no self_held_peer finding: {:?}",
                snaps[0].snapshot.findings
            )
        });
    assert!(
        finding.detail.contains("unix_stream_read_generic")
            || finding.detail.contains("unix_stream_data_wait"),
        "{}",
        finding.detail
    );
    assert!(
        finding.detail.contains("held only by this process"),
        "{}",
        finding.detail
    );
    assert!(r.stderr().contains("self_held_peer"), "named on stderr too");
    // Stopped, not leaked: its death is in the log.
    let root = root(&r);
    assert!(r
        .events()
        .any(|e| matches!(e, Record::Exit(x) if x.group_dead && x.task.key() == root.key())));
    assert!(!r.events().any(|e| matches!(e, Record::Leak(_))));
    // The reports lead with it.
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let verdict = json["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("Timed out while blocked: thread"),
        "{verdict}"
    );
    assert_eq!(json["snapshots"][0]["reason"], "timeout");
    assert_eq!(
        json["snapshots"][0]["findings"][0]["kind"],
        "self_held_peer"
    );
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(md.starts_with("Timed out while blocked"), "{md}");
    assert!(md.contains("## Snapshot at") && md.contains("**self_held_peer**"));
}

#[test]
fn sigusr1_snapshots_and_the_run_goes_on() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = record_command(
        dir.path(),
        &[],
        &["sh", "-c", "echo ready; read line; exit 5"],
    );
    cmd.stdin(Stdio::piped());
    let (mut t, _) = spawn_ready(cmd);
    kill(Pid::from_raw(t.id() as i32), nix::sys::signal::SIGUSR1).unwrap();
    // Wait (bounded) until the snapshot is in the log, then let the command end.
    let events = dir.path().join("events.ndjson");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(&events)
        .unwrap_or_default()
        .contains("\"type\":\"snapshot\"")
    {
        assert!(Instant::now() < deadline, "no snapshot after SIGUSR1");
        std::thread::sleep(Duration::from_millis(50));
    }
    t.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(
        t.wait().unwrap().code(),
        Some(5),
        "the run went on to its own end"
    );
    let log = read_log(&events).unwrap();
    let snaps = snapshots(&log);
    assert_eq!(snaps.len(), 1);
    assert_eq!(snaps[0].reason, "requested");
    let sh = snaps[0]
        .snapshot
        .processes
        .iter()
        .find(|p| p.comm == "sh")
        .expect("the shell is in it");
    assert!(
        sh.threads.iter().any(|t| t
            .wchan
            .as_deref()
            .is_some_and(|w| w.contains("pipe_read") || w.contains("wait"))),
        "{sh:?}"
    );
}
