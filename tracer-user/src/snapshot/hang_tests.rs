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
         (device-daemon --foreground, fd 4; detached: its own session, waiting in accept4 for a \
         connection on a listening socket) — the read \
         ends only when that process writes, exits or closes it"
    );
    assert_eq!(f[0].related_pids, [40]);
}

fn unix(fd: i32, inode: u64, peer: Option<u64>, holders: &[(u32, &str, i32)]) -> FdEntry {
    FdEntry {
        fd,
        target: format!("socket:[{inode}]"),
        access: None,
        kind: FdKind::Unix {
            inode,
            sock_type: "stream".into(),
            name: None,
            peer,
            peer_holders: holders
                .iter()
                .map(|&(pid, comm, fd)| Holder {
                    pid,
                    comm: comm.into(),
                    fd,
                    access: None,
                })
                .collect(),
        },
    }
}

/// Issue 40's socket hang, as a kernel's /proc shows it: the root (100)
/// waits in wait4 for its client (300), which reads a socketpair whose
/// other end only the root holds; a server (200, in a session of its own)
/// has served the client and waits in accept4 on its listening socket,
/// where a unix accept sleeps as a read does.
fn socket_hang() -> Vec<ProcSnapshot> {
    let mut root = proc_(
        100,
        900,
        "python3 run.py",
        thread(100, 'S', "do_wait", Some(("wait4", 61, 300))),
    );
    root.fds = vec![unix(3, 11, Some(12), &[(300, "python3", 4)])];
    let mut server = proc_(
        200,
        100,
        "python3 server.py",
        thread(200, 'S', "futex_wait_queue", Some(("futex", 202, 0))),
    );
    server.sid = 200;
    let mut accept = thread(201, 'S', "__skb_wait_for_more_packets", None);
    accept.syscall = SyscallState::Syscall {
        nr: 288,
        name: Some("accept4".into()),
        args: [3, 0, 0, 0x80000, 0, 0],
    };
    accept.stack = vec![
        "__skb_wait_for_more_packets+0x143/0x1a0".into(),
        "__skb_recv_datagram+0x6a/0xd0".into(),
        "skb_recv_datagram+0x3c/0x60".into(),
        "unix_accept+0x82/0x1c0".into(),
        "do_accept+0x164/0x1e0".into(),
    ];
    server.threads.push(accept);
    server.fds = vec![
        unix(3, 20, None, &[]),
        unix(4, 21, Some(22), &[(300, "python3", 3)]),
    ];
    let mut client = proc_(
        300,
        100,
        "python3 client.py",
        thread(
            300,
            'S',
            "unix_stream_read_generic",
            Some(("recvfrom", 45, 4)),
        ),
    );
    client.fds = vec![
        unix(3, 22, Some(21), &[(200, "python3", 4)]),
        unix(4, 12, Some(11), &[(100, "python3", 3)]),
    ];
    vec![root, server, client]
}

fn report_findings(procs: Vec<ProcSnapshot>, facts: &LogFacts) -> (Vec<Finding>, Vec<u32>) {
    let s = Snapshot {
        findings: analyze(&procs),
        processes: procs,
        notes: Vec::new(),
    };
    (with_log_facts(&s, facts), holding(&s, facts))
}

#[test]
fn a_socket_hang_leads_with_the_read_the_run_waits_on_and_its_holder() {
    let facts = LogFacts {
        reaper: Some(900),
        root: Some(100),
        ..LogFacts::default()
    };
    let (f, holding) = report_findings(socket_hang(), &facts);
    assert_eq!(holding, [300], "the root waits on its client");
    let kinds: Vec<(&str, u32)> = f.iter().map(|f| (f.kind.as_str(), f.pid)).collect();
    assert_eq!(
        kinds,
        [(BLOCKS_THE_RUN, 300), (WAITS_ON_BLOCKED_CHILD, 100)],
        "{f:#?}"
    );
    assert_eq!(
        f[0].detail,
        "thread 300 of pid 300 (python3 client.py) blocked in recvfrom reading a unix socket \
         (fd 4) whose other end only pid 100 (python3 run.py, fd 3) holds, and pid 100 waits \
         in wait4 for pid 300: neither can go on"
    );
    assert_eq!(
        (f[0].fds.as_slice(), f[0].related_pids.as_slice()),
        (&[4][..], &[100][..])
    );
    // The parent's finding names the other end of the child's read too.
    assert!(
        f[1].detail.ends_with(
            "child 300 (python3) thread 300 S in unix_stream_read_generic [recvfrom fd 4 \
             socket:[12], other end held by pid 100 (python3 run.py, fd 3)]"
        ),
        "{}",
        f[1].detail
    );
    // Without the log's root nothing leads, and still the accept is read
    // as no read: no finding about the server at all.
    let (f, holding) = report_findings(socket_hang(), &LogFacts::default());
    assert!(holding.is_empty());
    assert!(f.iter().all(|f| f.pid != 200), "{f:#?}");
}

/// "Detached" is said against the run's session (its root's), not the
/// reader's: a daemon reading a socket whose peer is in the run's session
/// is no finding, and a peer in a session it does not lead is not said to
/// have "its own".
#[test]
fn detached_is_said_against_the_runs_session() {
    let mut procs = socket_hang();
    // The server now reads its connection to the client (not accepting).
    procs[1].threads[1] = thread(
        201,
        'S',
        "unix_stream_read_generic",
        Some(("recvfrom", 45, 4)),
    );
    let facts = LogFacts {
        root: Some(100),
        ..LogFacts::default()
    };
    let (f, _) = report_findings(procs.clone(), &facts);
    assert!(f.iter().all(|f| f.kind != HELD_BY_LEAKED), "{f:#?}");
    // The reader's session is what was compared before: the client, in the
    // run's session, read as "detached: its own session".
    let (f, _) = report_findings(procs.clone(), &LogFacts::default());
    assert!(
        f.iter().any(|f| f.kind == HELD_BY_LEAKED
            && f.detail.contains("detached: session 1, not the reader's")),
        "without the root the reader's session is the reference, said as it is: {f:#?}"
    );
    assert!(
        f.iter().all(|f| !f.detail.contains("its own session")),
        "{f:#?}"
    );
}

/// Down a chain (root -> bash -> reader) to a reader whose pipe a sibling
/// holds: the holder is named with what it is doing, and who waits on the
/// reader; a server child waiting in accept4 is said to wait for a
/// connection, not to read.
#[test]
fn a_chain_names_the_holder_the_waiter_and_an_accept_as_it_is() {
    let pipe = |fd: i32, access: Access, holders: Vec<Holder>| FdEntry {
        fd,
        target: "pipe:[77]".into(),
        access: Some(access),
        kind: FdKind::Pipe { inode: 77, holders },
    };
    let root = waiter(10, 900, "make test");
    let bash = waiter(20, 10, "bash -c run");
    let mut reader = proc_(
        30,
        20,
        "cat",
        thread(30, 'S', "anon_pipe_read", Some(("read", 0, 0))),
    );
    let writer_end = Holder {
        pid: 40,
        comm: "server".into(),
        fd: 1,
        access: Some(Access::Write),
    };
    reader.fds = vec![pipe(0, Access::Read, vec![writer_end])];
    let mut server = proc_(
        40,
        20,
        "server --port 0",
        thread(40, 'S', "inet_csk_accept", Some(("accept4", 288, 5))),
    );
    server.fds = vec![
        pipe(1, Access::Write, Vec::new()),
        FdEntry {
            fd: 5,
            target: "socket:[90]".into(),
            access: None,
            kind: FdKind::Socket { inode: 90 },
        },
    ];
    let facts = LogFacts {
        root: Some(10),
        ..LogFacts::default()
    };
    let (f, holding) = report_findings(vec![root, bash, reader, server], &facts);
    assert_eq!(holding, [30, 40], "bash waits for both its children");
    assert_eq!(
        (f[0].kind.as_str(), f[0].pid),
        (BLOCKS_THE_RUN, 30),
        "{f:#?}"
    );
    assert_eq!(
        f[0].detail,
        "thread 30 of pid 30 (cat) blocked in read reading a pipe (fd 0) whose other end only \
         pid 40 (server --port 0, fd 1) holds, and pid 40 is waiting in accept4 for a \
         connection on a listening socket (fd 5); pid 20 waits in wait4 for it"
    );
    assert_eq!(f[0].related_pids, [40, 20]);
    let waits = f
        .iter()
        .find(|f| f.kind == WAITS_ON_BLOCKED_CHILD && f.pid == 20)
        .expect("bash waits on blocked children");
    assert!(
        waits.detail.contains(
            "child 40 (server) thread 40 S in inet_csk_accept [accept4: waiting for a \
             connection on a listening socket]"
        ),
        "{}",
        waits.detail
    );
}
