//! The hang rules that go beyond self-deadlocks: stopped, frozen, a job
//! merely waiting on a sleeper, and a reader whose writers were leaked.
use super::*;

fn thread(tid: u32, state: char, wchan: &str, call: Option<(&str, i64, u64)>) -> ThreadSnapshot {
    ThreadSnapshot {
        tid,
        comm: "t".into(),
        state,
        wchan: Some(wchan.into()),
        stack: Vec::new(),
        syscall: match call {
            Some((name, nr, a0)) => SyscallState::Syscall {
                nr,
                name: Some(name.into()),
                args: [a0, 0, 0, 0, 0, 0],
            },
            None => SyscallState::Unknown,
        },
    }
}

fn proc_(pid: u32, ppid: u32, argv: &str, t: ThreadSnapshot) -> ProcSnapshot {
    ProcSnapshot {
        pid,
        start_ns: 1,
        ppid,
        pgid: pid,
        sid: 1,
        comm: argv.split(' ').next().unwrap().into(),
        argv: argv.split(' ').map(str::to_string).collect(),
        exe: None,
        state: t.state,
        threads: vec![t],
        fds: Vec::new(),
        argv_truncated: false,
        threads_left_out: 0,
        fds_left_out: 0,
        vanished: false,
        frozen: None,
        withheld: None,
    }
}

fn waiter(pid: u32, ppid: u32, argv: &str) -> ProcSnapshot {
    proc_(
        pid,
        ppid,
        argv,
        thread(pid, 'S', "do_wait", Some(("wait4", 61, u64::MAX))),
    )
}

fn sleeper(pid: u32, ppid: u32) -> ProcSnapshot {
    proc_(
        pid,
        ppid,
        "sleep 100",
        thread(
            pid,
            'S',
            "hrtimer_nanosleep",
            Some(("clock_nanosleep", 230, 0)),
        ),
    )
}

#[test]
fn a_job_waiting_on_a_sleeper_is_no_deadlock() {
    // python -> bash -> sleep: nobody is stuck, the sleep wakes by itself.
    let procs = [
        waiter(10, 1, "python3 run.py"),
        waiter(20, 10, "bash -c sleep"),
        sleeper(30, 20),
    ];
    let f = analyze(&procs);
    assert!(f.iter().all(|f| f.kind != WAITS_ON_BLOCKED_CHILD), "{f:?}");
}

#[test]
fn stopped_and_frozen_processes_are_said_so() {
    let mut stopped = sleeper(30, 20);
    stopped.state = 'T';
    stopped.threads[0].state = 'T';
    let mut frozen = sleeper(40, 20);
    frozen.frozen = Some("cgroup v2 /sys/fs/cgroup/job (cgroup.freeze)".into());
    let procs = [waiter(20, 5, "bash"), stopped, frozen];
    let f = analyze(&procs);
    let kinds: Vec<(&str, u32)> = f.iter().map(|f| (f.kind.as_str(), f.pid)).collect();
    assert_eq!(
        kinds,
        [(WAITS_ON_BLOCKED_CHILD, 20), (STOPPED, 30), (FROZEN, 40)],
        "a frozen sleeper is stuck, a merely sleeping one is not"
    );
    assert_eq!(
        f[1].detail,
        "pid 30 (sleep 100) is stopped (state T): it runs again only on SIGCONT"
    );
    assert!(f[2]
        .detail
        .contains("is frozen: its cgroup is frozen, cgroup v2 /sys/fs/cgroup/job"));
    assert!(
        f[0].detail.contains("(stopped: see stopped)"),
        "{}",
        f[0].detail
    );
    // The log names who stopped it.
    let s = Snapshot {
        processes: procs.to_vec(),
        findings: f,
        notes: Vec::new(),
    };
    let facts = LogFacts {
        stops: [(30, "SIGSTOP from `bash` (pid 20), its parent".to_string())].into(),
        ..LogFacts::default()
    };
    let g = with_log_facts(&s, &facts);
    assert!(g[1]
        .detail
        .ends_with("; stopped by SIGSTOP from `bash` (pid 20), its parent"));
}

#[test]
fn a_reader_whose_only_writer_was_leaked_names_it() {
    let pipe = |fd: i32, access: Access, holders: Vec<Holder>| FdEntry {
        fd,
        target: "pipe:[77]".into(),
        access: Some(access),
        kind: FdKind::Pipe { inode: 77, holders },
    };
    let holder = |pid: u32, fd: i32, access: Access| Holder {
        pid,
        comm: "sleep".into(),
        fd,
        access: Some(access),
    };
    let mut reader = proc_(
        10,
        900,
        "python3 -c check_output",
        thread(10, 'S', "anon_pipe_read", Some(("read", 0, 3))),
    );
    reader.fds = vec![pipe(3, Access::Read, vec![holder(30, 1, Access::Write)])];
    let mut leaked = sleeper(30, 900);
    leaked.fds = vec![pipe(1, Access::Write, vec![holder(10, 3, Access::Read)])];
    let procs = vec![reader, leaked];
    let s = Snapshot {
        findings: analyze(&procs),
        processes: procs,
        notes: Vec::new(),
    };
    // Without the log, ppid 900 (the tracer) says nothing.
    assert!(with_log_facts(&s, &LogFacts::default()).is_empty());
    let facts = LogFacts {
        reaper: Some(900),
        orphans: [(30, "`sh -c sleep 100 & echo hi` (pid 20)".to_string())].into(),
        ..LogFacts::default()
    };
    let f = with_log_facts(&s, &facts);
    let kinds: Vec<(&str, u32)> = f.iter().map(|f| (f.kind.as_str(), f.pid)).collect();
    assert_eq!(kinds, [(HELD_BY_LEAKED, 10), (ORPHANED, 30)]);
    assert_eq!(
        f[0].detail,
        "thread 10 of pid 10 (python3 -c check_output) blocked in anon_pipe_read on fd 3 pipe:[77]: \
         its write end is held only by a leaked process: pid 30 (sleep 100, fd 1; its parent \
         `sh -c sleep 100 & echo hi` (pid 20) exited) — the read sees EOF only when that process \
         exits or closes it"
    );
    assert_eq!(f[0].related_pids, [30]);
    assert!(
        f[1].detail.contains("has ppid 900, the tracer"),
        "{}",
        f[1].detail
    );
}

/// A client blocked reading a unix socket whose other end only a detached
/// daemon holds (it left the session with setsid and never answers): named
/// as the pipe case is, with where the daemon is. A peer still in the
/// reader's session, with its parent alive, is no finding.
#[test]
fn a_reader_whose_socket_peer_is_a_detached_daemon_names_it() {
    let unix = |fd: i32, inode: u64, peer: u64, holders: Vec<Holder>| FdEntry {
        fd,
        target: format!("socket:[{inode}]"),
        access: None,
        kind: FdKind::Unix {
            inode,
            sock_type: "stream".into(),
            name: None,
            peer: Some(peer),
            peer_holders: holders,
        },
    };
    let holder = |pid: u32, fd: i32| Holder {
        pid,
        comm: "device-daemon".into(),
        fd,
        access: None,
    };
    let mut client = proc_(
        10,
        900,
        "python3 client.py",
        thread(
            10,
            'S',
            "unix_stream_read_generic",
            Some(("recvfrom", 45, 3)),
        ),
    );
    client.fds = vec![unix(3, 81, 82, vec![holder(40, 4)])];
    let mut daemon = proc_(
        40,
        900,
        "device-daemon --foreground",
        thread(40, 'S', "inet_csk_accept", Some(("accept4", 288, 5))),
    );
    daemon.fds = vec![unix(4, 82, 81, vec![holder(10, 3)])];
    // Still in the client's session, its parent alive: no finding.
    let s = Snapshot {
        findings: Vec::new(),
        processes: vec![client.clone(), daemon.clone()],
        notes: Vec::new(),
    };
    assert!(with_log_facts(&s, &LogFacts::default()).is_empty());
    // It setsid'd: detached.
    daemon.sid = 40;
    let s = Snapshot {
        findings: Vec::new(),
        processes: vec![client, daemon],
        notes: Vec::new(),
    };
    let f = with_log_facts(&s, &LogFacts::default());
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!((f[0].kind.as_str(), f[0].pid), (HELD_BY_LEAKED, 10));
    assert_eq!(
        f[0].detail,
        "thread 10 of pid 10 (python3 client.py) blocked in unix_stream_read_generic reading a \
         unix socket (fd 3) whose other end is held only by a leaked or detached process: pid 40 \
         (device-daemon --foreground, fd 4; detached: its own session, in accept4) — the read \
         ends only when that process writes, exits or closes it"
    );
    assert_eq!(f[0].related_pids, [40]);
}
