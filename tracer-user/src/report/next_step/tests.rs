use super::{list, rules::pkill_pattern};

fn argv(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_string).collect()
}

#[test]
fn pkill_full_match_is_read_from_its_flags() {
    for (cmd, want) in [
        ("pkill -f worker", Some("worker")),
        ("/usr/bin/pkill -TERM -f worker", Some("worker")),
        ("pkill --full -9 worker", Some("worker")),
        ("pkill -ef worker", Some("worker")),
        // Matched by name only: the pattern met the process name, not a
        // command line.
        ("pkill worker", None),
        ("pkill -9 worker", None),
        // -x matches the whole command line: anchoring changes nothing.
        ("pkill -f -x worker", None),
        ("pkill -fx worker", None),
        // Anchored already: what it matched, it was written to match.
        ("pkill -KILL -f ^tn-py-11103", None),
        ("pgrep -f worker", None),
        ("pkill -f", None),
    ] {
        assert_eq!(pkill_pattern(&argv(cmd)), want, "{cmd}");
    }
}

#[test]
fn lists_are_cut_with_a_count() {
    let items: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
    assert_eq!(list(&items[..1], 3), "a");
    assert_eq!(list(&items[..2], 3), "a and b");
    assert_eq!(list(&items, 3), "a, b, c and 1 more");
}

/// The snapshots of the socket-daemon capture: a reader in recvfrom on fd
/// 3, whose peer only pid 30869 holds, leaked (its parent exited).
fn daemon_snaps() -> Vec<super::SnapshotReport> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real_field_hang_socket_daemon.ndjson");
    let log = crate::eventlog::read_log(&path).unwrap();
    crate::report::build_report(&log, &Default::default()).snapshots
}

fn daemon_advice(snaps: &[super::SnapshotReport]) -> Option<super::NextStep> {
    super::leaked_daemon(snaps)
}

#[test]
fn a_leaked_daemon_needs_the_reader_on_that_socket_and_every_holder_leaked() {
    use crate::snapshot::{SyscallState, ORPHANED};
    let snaps = daemon_snaps();
    assert!(daemon_advice(&snaps).is_some());
    // A server thread in accept4 on a listening socket is not reading the
    // socket the finding names (issue 40's false hang finding).
    let mut accept = snaps.clone();
    let waiter = accept[0]
        .snapshot
        .processes
        .iter_mut()
        .find(|p| p.pid == 30827)
        .unwrap();
    if let SyscallState::Syscall { name, .. } = &mut waiter.threads[0].syscall {
        *name = Some("accept4".into());
    }
    assert_eq!(daemon_advice(&accept), None);
    // A holder that is only in a session of its own, its parent alive,
    // may be the run's own server: no advice.
    let mut detached = snaps.clone();
    detached[0]
        .snapshot
        .findings
        .retain(|f| !(f.kind == ORPHANED && f.pid == 30869));
    assert_eq!(daemon_advice(&detached), None);
    // A snapshot requested by SIGUSR1 is no hang.
    let mut requested = snaps;
    requested[0].reason = "requested".into();
    assert_eq!(daemon_advice(&requested), None);
}
