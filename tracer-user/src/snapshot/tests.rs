//! Finding rules on hand-built snapshots (no /proc, no root).
use super::*;

fn thread(tid: u32, state: char, wchan: Option<&str>, syscall: SyscallState) -> ThreadSnapshot {
    ThreadSnapshot {
        tid,
        comm: "t".into(),
        state,
        wchan: wchan.map(str::to_string),
        stack: Vec::new(),
        syscall,
    }
}

fn sys(name: &str, nr: i64, args: [u64; 6]) -> SyscallState {
    SyscallState::Syscall {
        nr,
        name: Some(name.into()),
        args,
    }
}

fn proc_(pid: u32, ppid: u32, threads: Vec<ThreadSnapshot>, fds: Vec<FdEntry>) -> ProcSnapshot {
    ProcSnapshot {
        pid,
        start_ns: 1,
        ppid,
        pgid: pid,
        sid: 1,
        comm: format!("p{pid}"),
        argv: vec![format!("p{pid}"), "serve".into()],
        exe: None,
        state: threads.first().map_or('S', |t| t.state),
        threads,
        fds,
        argv_truncated: false,
        threads_left_out: 0,
        fds_left_out: 0,
        vanished: false,
        withheld: None,
        frozen: None,
    }
}

fn holder(pid: u32, fd: i32, access: Option<Access>) -> Holder {
    Holder {
        pid,
        comm: format!("p{pid}"),
        fd,
        access,
    }
}

fn unix_fd(fd: i32, inode: u64, peer: u64, peer_holders: Vec<Holder>) -> FdEntry {
    FdEntry {
        fd,
        target: format!("socket:[{inode}]"),
        access: Some(Access::ReadWrite),
        kind: FdKind::Unix {
            inode,
            sock_type: "stream".into(),
            name: None,
            peer: Some(peer),
            peer_holders,
        },
    }
}

fn pipe_fd(fd: i32, inode: u64, access: Access, holders: Vec<Holder>) -> FdEntry {
    FdEntry {
        fd,
        target: format!("pipe:[{inode}]"),
        access: Some(access),
        kind: FdKind::Pipe { inode, holders },
    }
}

/// The shape: test thread 595 reads fd 7, whose peer only fd 8 of
/// the same process holds.
fn self_held_socketpair(peer_holders: Vec<Holder>) -> ProcSnapshot {
    proc_(
        528,
        527,
        vec![
            thread(528, 'S', Some("futex_do_wait"), sys("futex", 202, [0; 6])),
            thread(
                595,
                'S',
                Some("unix_stream_data_wait"),
                sys("recvfrom", 45, [7, 0, 1, 0, 0, 0]),
            ),
        ],
        vec![
            unix_fd(7, 16469, 16470, peer_holders.clone()),
            unix_fd(8, 16470, 16469, vec![holder(528, 7, None)]),
        ],
    )
}

#[test]
fn socket_whose_only_peer_is_this_process_is_found() {
    let p = self_held_socketpair(vec![holder(528, 8, None)]);
    let f = analyze(&[p]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].kind.as_str(), f[0].pid, f[0].tid),
        (SELF_HELD_PEER, 528, Some(595))
    );
    assert_eq!(f[0].fds, vec![7, 8]);
    assert_eq!(
        f[0].detail,
        "thread 595 blocked in unix_stream_data_wait (recvfrom on fd 7); fd 7 socket:[16469] — its peer \
         socket:[16470] is held only by this process (fd 8): no other process can ever write"
    );
}

#[test]
fn peer_held_by_another_process_is_not_a_finding() {
    for holders in [
        vec![holder(603, 4, None)],
        vec![holder(528, 8, None), holder(603, 4, None)],
        vec![], // peer gone / in flight: the read would see EOF, or cannot be judged
    ] {
        let f = analyze(&[self_held_socketpair(holders.clone())]);
        assert!(f.is_empty(), "{holders:?}: {f:?}");
    }
}

#[test]
fn syscall_fd_is_preferred_over_other_self_held_sockets() {
    // Thread reads fd 9 (peer in another process); fd 7 is self-held but
    // not what the thread waits on: no finding.
    let mut p = self_held_socketpair(vec![holder(528, 8, None)]);
    p.threads[1].syscall = sys("recvfrom", 45, [9, 0, 1, 0, 0, 0]);
    p.fds
        .push(unix_fd(9, 17000, 17001, vec![holder(603, 3, None)]));
    assert!(analyze(&[p]).is_empty());
}

#[test]
fn without_syscall_args_the_fd_is_inferred_and_said_so() {
    let mut p = self_held_socketpair(vec![holder(528, 8, None)]);
    p.threads[1].syscall = SyscallState::Unknown;
    p.threads[1].wchan = Some("wait_woken".into());
    p.threads[1].stack = vec![
        "wait_woken+0x5/0x60".into(),
        "unix_stream_read_generic+0x70d/0xcd0".into(),
    ];
    let f = analyze(&[p]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0]
        .detail
        .starts_with("thread 595 blocked in wait_woken (unix_stream_read_generic); fd 7"));
    assert!(f[0].detail.ends_with(
        "(which fd is read is inferred: syscall args unavailable; also self-held: fd 8)"
    ));
}

#[test]
fn running_or_unrelated_waits_are_not_findings() {
    let mut p = self_held_socketpair(vec![holder(528, 8, None)]);
    p.threads[1].state = 'R';
    assert!(analyze(&[p.clone()]).is_empty());
    p.threads[1].state = 'S';
    p.threads[1].wchan = Some("hrtimer_nanosleep".into());
    p.threads[1].syscall = sys("clock_nanosleep", 230, [0; 6]);
    assert!(analyze(&[p]).is_empty());
}

fn pipe_reader(pid: u32, holders: Vec<Holder>) -> ProcSnapshot {
    proc_(
        pid,
        10,
        vec![thread(
            pid,
            'S',
            Some("anon_pipe_read"),
            sys("read", 0, [3, 0, 1, 0, 0, 0]),
        )],
        vec![
            pipe_fd(3, 900, Access::Read, holders.clone()),
            pipe_fd(4, 900, Access::Write, vec![]),
        ],
    )
}

#[test]
fn pipe_whose_write_end_only_this_process_holds_is_found() {
    let f = analyze(&[pipe_reader(
        20,
        vec![
            holder(20, 4, Some(Access::Write)),
            holder(10, 3, Some(Access::Read)),
        ],
    )]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].fds, vec![3, 4]);
    assert!(
        f[0].detail
            .contains("fd 3 pipe:[900] — its write end is held only by this process (fd 4)"),
        "{}",
        f[0].detail
    );
}

#[test]
fn pipe_with_a_writer_elsewhere_or_no_writer_is_not_found() {
    let elsewhere = vec![
        holder(20, 4, Some(Access::Write)),
        holder(10, 5, Some(Access::Write)),
    ];
    assert!(analyze(&[pipe_reader(20, elsewhere)]).is_empty());
    // Only readers left: the read returns EOF, it does not hang.
    assert!(analyze(&[pipe_reader(20, vec![holder(10, 3, Some(Access::Read))])]).is_empty());
}

fn waiting_parent(wait_args: [u64; 6]) -> ProcSnapshot {
    proc_(
        10,
        1,
        vec![thread(
            10,
            'S',
            Some("do_wait"),
            sys("wait4", 61, wait_args),
        )],
        vec![],
    )
}

#[test]
fn parent_waiting_on_blocked_child_is_found() {
    let parent = waiting_parent([u64::MAX, 0, 0, 0, 0, 0]); // wait4(-1, ...)
    let child = pipe_reader(20, vec![holder(20, 4, Some(Access::Write))]);
    let f = analyze(&[parent, child]);
    let w: Vec<_> = f
        .iter()
        .filter(|f| f.kind == WAITS_ON_BLOCKED_CHILD)
        .collect();
    assert_eq!(w.len(), 1, "{f:?}");
    assert_eq!(
        (w[0].pid, w[0].tid, w[0].related_pids.clone()),
        (10, Some(10), vec![20])
    );
    assert_eq!(
        w[0].detail,
        "thread 10 waits in do_wait for its children, and every one is itself blocked: child 20 (p20) thread 20 S \
         in anon_pipe_read [read fd 3 pipe:[900]] (see self_held_peer)"
    );
}

#[test]
fn parent_with_a_running_or_zombie_child_is_not_found() {
    let mut running = pipe_reader(20, vec![]);
    running
        .threads
        .push(thread(21, 'R', None, SyscallState::Running));
    assert!(
        !analyze(&[waiting_parent([u64::MAX, 0, 0, 0, 0, 0]), running])
            .iter()
            .any(|f| f.kind == WAITS_ON_BLOCKED_CHILD)
    );
    let mut zombie = pipe_reader(20, vec![]);
    zombie.state = 'Z';
    assert!(
        !analyze(&[waiting_parent([u64::MAX, 0, 0, 0, 0, 0]), zombie])
            .iter()
            .any(|f| f.kind == WAITS_ON_BLOCKED_CHILD)
    );
    // No children in view: nothing to say.
    assert!(analyze(&[waiting_parent([u64::MAX, 0, 0, 0, 0, 0])])
        .iter()
        .all(|f| f.kind != WAITS_ON_BLOCKED_CHILD));
}

#[test]
fn wait_for_a_specific_pid_only_considers_that_child() {
    let blocked = pipe_reader(20, vec![]);
    let mut running = pipe_reader(30, vec![]);
    running.threads[0].state = 'R';
    running.ppid = 10;
    // wait4(20): the running sibling does not matter.
    let f = analyze(&[
        waiting_parent([20, 0, 0, 0, 0, 0]),
        blocked.clone(),
        running.clone(),
    ]);
    assert!(
        f.iter()
            .any(|f| f.kind == WAITS_ON_BLOCKED_CHILD && f.related_pids == vec![20]),
        "{f:?}"
    );
    // wait4(30): it does.
    let f = analyze(&[waiting_parent([30, 0, 0, 0, 0, 0]), blocked, running]);
    assert!(!f.iter().any(|f| f.kind == WAITS_ON_BLOCKED_CHILD), "{f:?}");
}

#[test]
fn reparented_to_init_is_orphaned() {
    let daemon = proc_(
        94,
        1,
        vec![thread(
            94,
            'S',
            Some("__skb_wait_for_more_packets"),
            SyscallState::Unknown,
        )],
        vec![],
    );
    let normal = proc_(
        603,
        528,
        vec![thread(603, 'S', None, SyscallState::Unknown)],
        vec![],
    );
    let init = proc_(1, 0, vec![], vec![]);
    let f = analyze(&[init, daemon, normal]);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        (f[0].kind.as_str(), f[0].pid, f[0].tid),
        (ORPHANED, 94, None)
    );
    assert!(
        f[0].detail.starts_with("pid 94 (p94 serve) has ppid 1"),
        "{}",
        f[0].detail
    );
    // argv stays on one line, bounded.
    let mut long = proc_(95, 1, vec![], vec![]);
    long.argv = vec![
        "python3".into(),
        "-c".into(),
        format!("import os\n{}", "x".repeat(300)),
    ];
    let d = &analyze(&[long])[0].detail;
    assert!(
        d.starts_with("pid 95 (python3 -c import os\\nxxx") && d.contains("...) has ppid 1"),
        "{d}"
    );
}

#[test]
fn findings_are_sorted_and_rendered_first() {
    let snap = Snapshot {
        processes: vec![
            waiting_parent([u64::MAX, 0, 0, 0, 0, 0]),
            pipe_reader(20, vec![holder(20, 4, Some(Access::Write))]),
        ],
        findings: Vec::new(),
        notes: vec!["example note".into()],
    };
    let findings = analyze(&snap.processes);
    let keys: Vec<_> = findings.iter().map(|f| (f.pid, f.kind.as_str())).collect();
    assert_eq!(
        keys,
        vec![
            (10, ORPHANED),
            (10, WAITS_ON_BLOCKED_CHILD),
            (20, SELF_HELD_PEER)
        ]
    );
    let snap = Snapshot { findings, ..snap };
    let text = render_text(&snap);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "findings:");
    assert!(lines[1].starts_with("  [orphaned] pid 10: "), "{text}");
    assert!(text.contains("note: example note\n"), "{text}");
    assert!(
        text.contains("  thread 20 (t) S wchan=anon_pipe_read syscall=read(0x3, 0x0, 0x1)\n"),
        "{text}"
    );
    assert!(
        text.contains("  fd 3 pipe:[900] (r) other holders: 20(p20) fd 4 w\n"),
        "{text}"
    );
    // serde round trip keeps everything.
    let json = serde_json::to_string(&snap).unwrap();
    assert_eq!(serde_json::from_str::<Snapshot>(&json).unwrap(), snap);
}
