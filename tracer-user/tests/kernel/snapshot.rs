//! Root integration tests for `snapshot`: real processes deadlocked the
//! classic ways, diagnosed from /proc and sock_diag.
//!
//! Hermetic: each test signals only the python3 child it spawned. A
//! grandchild never needs a signal from us: it either unblocks by EOF when
//! its parent dies, or dies with it through PR_SET_PDEATHSIG.
use std::{
    io::BufReader,
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

use tracer_user::snapshot::{self, FdKind, Snapshot, SELF_HELD_PEER, WAITS_ON_BLOCKED_CHILD};

use crate::common::wait_ready;

/// Unix stream read waits: unix_stream_data_wait until it was inlined into
/// unix_stream_read_generic (the latter is what 6.18 reports).
const UNIX_READ_WCHANS: &[&str] = &["unix_stream_data_wait", "unix_stream_read_generic"];
/// Pipe read waits: pipe_read until 6.15 split it; anon_pipe_read on 6.18.
const PIPE_READ_WCHANS: &[&str] = &["pipe_read", "anon_pipe_read", "pipe_wait"];
const DEADLINE: Duration = Duration::from_secs(10);

fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "snapshot integration tests need root (/proc/PID/stack, /proc/PID/syscall of other processes)"
    );
}

/// Kills and reaps the child on drop, so a failed assertion leaks nothing.
struct Py {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Py {
    fn spawn(script: &str) -> Py {
        let mut child = Command::new("python3")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 must be installed");
        let out = BufReader::new(child.stdout.take().unwrap());
        Py { child, out }
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
    /// The script says `ready` and integers (pids, fds) once its fds are
    /// set up.
    fn ints(&mut self) -> Vec<i64> {
        wait_ready(&mut self.out)
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect()
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wchan(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/wchan"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Poll until the thread sleeps in one of `names` (bounded); return which.
fn wait_for_wchan(pid: u32, names: &[&str]) -> String {
    let end = Instant::now() + DEADLINE;
    loop {
        let w = wchan(pid);
        if names.contains(&w.as_str()) {
            return w;
        }
        assert!(
            Instant::now() < end,
            "pid {pid} never slept in {names:?} (last wchan {w:?})"
        );
        sleep(Duration::from_millis(20));
    }
}

fn sock_inode(pid: u32, fd: i64) -> u64 {
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).unwrap();
    let s = link.to_string_lossy();
    s.trim_start_matches("socket:[")
        .trim_end_matches(']')
        .parse()
        .unwrap()
}

fn findings<'a>(s: &'a Snapshot, kind: &str, pid: u32) -> Vec<&'a snapshot::Finding> {
    s.findings
        .iter()
        .filter(|f| f.kind == kind && f.pid == pid)
        .collect()
}

#[test]
fn reader_of_a_socketpair_it_holds_both_ends_of_is_self_held_peer() {
    require_root();
    let mut py = Py::spawn(
        "import socket\n\
         a, b = socket.socketpair()\n\
         print('ready', a.fileno(), b.fileno(), flush=True)\n\
         a.recv(1)\n",
    );
    let pid = py.pid();
    let fds = py.ints();
    let (a, b) = (fds[0], fds[1]);
    let observed = wait_for_wchan(pid, UNIX_READ_WCHANS);

    let snap = snapshot::take(&[pid]);
    assert!(
        snap.notes.is_empty(),
        "sock_diag and the /proc scan must be complete: {:?}",
        snap.notes
    );
    let hits = findings(&snap, SELF_HELD_PEER, pid);
    assert_eq!(hits.len(), 1, "{}", snapshot::render_text(&snap));
    let f = hits[0];
    assert_eq!(f.tid, Some(pid));
    assert_eq!(
        f.fds,
        vec![a as i32, b as i32],
        "read fd first, then the peer's holder"
    );
    let (ia, ib) = (sock_inode(pid, a), sock_inode(pid, b));
    assert!(
        f.detail.contains(&format!("blocked in {observed}")),
        "{}",
        f.detail
    );
    assert!(
        f.detail.contains("recvfrom on fd"),
        "syscall args name the fd: {}",
        f.detail
    );
    assert!(
        f.detail.contains(&format!("fd {a} socket:[{ia}]")),
        "{}",
        f.detail
    );
    assert!(
        f.detail.contains(&format!(
            "peer socket:[{ib}] is held only by this process (fd {b})"
        )),
        "{}",
        f.detail
    );

    // The capture itself: the peer inode comes from sock_diag.
    let p = &snap.processes[0];
    assert_eq!(p.pid, pid);
    let fa = p.fd(a as i32).unwrap();
    match &fa.kind {
        FdKind::Unix {
            inode,
            sock_type,
            peer,
            peer_holders,
            ..
        } => {
            assert_eq!(
                (*inode, sock_type.as_str(), *peer),
                (ia, "stream", Some(ib))
            );
            assert_eq!(peer_holders.len(), 1);
            assert_eq!((peer_holders[0].pid, peer_holders[0].fd), (pid, b as i32));
        }
        k => panic!("fd {a} should be a unix socket, got {k:?}"),
    }
    let t = &p.threads[0];
    assert_eq!(t.wchan.as_deref(), Some(observed.as_str()));
    assert!(!t.stack.is_empty(), "root reads /proc/TID/stack");
    assert!(p.start_ns > 0 && p.argv[0].contains("python3"));
    // Round-trips through serde unchanged.
    let json = serde_json::to_string(&snap).unwrap();
    assert_eq!(serde_json::from_str::<Snapshot>(&json).unwrap(), snap);
    assert!(snapshot::render_text(&snap).starts_with("findings:\n  [self_held_peer]"));
}

#[test]
fn reader_whose_peer_is_held_by_another_process_is_not_flagged() {
    require_root();
    // The parent reads `a`; its child holds `b` (parent closed its copy).
    // The child blocks on a pipe whose write end only the parent holds, so
    // it exits by EOF when we kill the parent.
    let mut py = Py::spawn(
        "import os, socket\n\
         a, b = socket.socketpair()\n\
         r, w = os.pipe()\n\
         pid = os.fork()\n\
         if pid == 0:\n    os.close(w); a.close(); os.read(r, 1); os._exit(0)\n\
         os.close(r); b.close()\n\
         print('ready', pid, a.fileno(), flush=True)\n\
         a.recv(1)\n",
    );
    let pid = py.pid();
    let v = py.ints();
    let (child, a) = (v[0] as u32, v[1]);
    wait_for_wchan(pid, UNIX_READ_WCHANS);
    wait_for_wchan(child, PIPE_READ_WCHANS);

    let snap = snapshot::take(&[pid]);
    let text = snapshot::render_text(&snap);
    assert!(findings(&snap, SELF_HELD_PEER, pid).is_empty(), "{text}");
    assert!(findings(&snap, SELF_HELD_PEER, child).is_empty(), "{text}");
    // The child is included as a descendant, and named as the peer holder.
    assert!(snap.processes.iter().any(|p| p.pid == child), "{text}");
    let parent = snap.processes.iter().find(|p| p.pid == pid).unwrap();
    match &parent.fd(a as i32).unwrap().kind {
        FdKind::Unix { peer_holders, .. } => {
            assert_eq!(
                peer_holders.iter().map(|h| h.pid).collect::<Vec<_>>(),
                vec![child],
                "{text}"
            )
        }
        k => panic!("{k:?}"),
    }
}

#[test]
fn parent_waiting_on_a_child_blocked_on_its_own_pipe() {
    require_root();
    // Child reads a pipe whose write end only it holds (self_held_peer);
    // the parent sits in waitpid on it. PDEATHSIG ties the child's life to
    // the parent's, which is the only process we signal.
    let mut py = Py::spawn(
        "import os, ctypes\n\
         r, w = os.pipe()\n\
         parent = os.getpid()\n\
         pid = os.fork()\n\
         if pid == 0:\n    ctypes.CDLL(None).prctl(1, 9)\n    \
             if os.getppid() != parent: os._exit(1)\n    \
             os.read(r, 1); os._exit(0)\n\
         os.close(w)\n\
         print('ready', pid, r, w, flush=True)\n\
         os.waitpid(pid, 0)\n",
    );
    let pid = py.pid();
    let v = py.ints();
    let (child, r, w) = (v[0] as u32, v[1] as i32, v[2] as i32);
    let parent_wchan = wait_for_wchan(pid, &["do_wait"]);
    let child_wchan = wait_for_wchan(child, PIPE_READ_WCHANS);

    let snap = snapshot::take(&[pid]);
    let text = snapshot::render_text(&snap);
    let waits = findings(&snap, WAITS_ON_BLOCKED_CHILD, pid);
    assert_eq!(waits.len(), 1, "{text}");
    let f = waits[0];
    assert_eq!((f.tid, f.related_pids.clone()), (Some(pid), vec![child]));
    assert!(
        f.detail.contains(&format!("waits in {parent_wchan}")),
        "{}",
        f.detail
    );
    assert!(
        f.detail.contains(&format!(
            "child {child} (python3) thread {child} S in {child_wchan}"
        )),
        "{}",
        f.detail
    );
    assert!(
        f.detail.contains(&format!("[read fd {r} pipe:[")),
        "{}",
        f.detail
    );
    assert!(f.detail.contains("(see self_held_peer)"), "{}", f.detail);

    let own = findings(&snap, SELF_HELD_PEER, child);
    assert_eq!(own.len(), 1, "{text}");
    assert_eq!(own[0].fds, vec![r, w]);
    assert!(
        own[0]
            .detail
            .contains("its write end is held only by this process"),
        "{}",
        own[0].detail
    );
}

#[test]
fn tcp_loopback_connection_to_itself_is_self_held_peer() {
    require_root();
    // Both ends of one loopback connection in one process: the peer is
    // found by matching endpoints in the inet table.
    let mut py = Py::spawn(
        "import socket\n\
         s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
         c = socket.create_connection(s.getsockname()); a, _ = s.accept()\n\
         print('ready', c.fileno(), a.fileno(), flush=True)\n\
         c.recv(1)\n",
    );
    let pid = py.pid();
    let v = py.ints();
    let (c, a) = (v[0] as i32, v[1] as i32);
    // TCP reads sleep in the generic wait_woken (sk_wait_data inlined).
    let observed = wait_for_wchan(pid, &["wait_woken", "sk_wait_data"]);

    let snap = snapshot::take(&[pid]);
    let text = snapshot::render_text(&snap);
    let hits = findings(&snap, SELF_HELD_PEER, pid);
    assert_eq!(hits.len(), 1, "{text}");
    assert_eq!(hits[0].fds, vec![c, a], "{text}");
    assert!(
        hits[0].detail.contains(&format!("blocked in {observed}")),
        "{}",
        hits[0].detail
    );
    match &snap.processes[0].fd(c).unwrap().kind {
        FdKind::Inet {
            proto,
            state,
            remote,
            ..
        } => {
            assert_eq!((proto.as_str(), state.as_str()), ("tcp", "ESTABLISHED"));
            assert!(remote.starts_with("127.0.0.1:"), "{remote}");
        }
        k => panic!("{k:?}"),
    }
}

#[test]
fn a_pid_that_is_gone_is_a_note_not_a_panic() {
    require_root();
    let mut done = Command::new("true").spawn().unwrap();
    let pid = done.id();
    done.wait().unwrap();
    let snap = snapshot::take(&[pid]);
    assert!(
        snap.processes.is_empty() && snap.findings.is_empty(),
        "{snap:?}"
    );
    assert_eq!(
        snap.notes,
        vec![format!("pid {pid} vanished before it was read")]
    );
}

/// Round 3, finding 5: a process's threads and fds were read without
/// bound (each thread four /proc reads and up to 64 stack frames in the
/// log). At most `MAX_THREADS_SHOWN` threads and the lowest `MAX_FDS_SHOWN`
/// fds are read now; the rest are counted, and the rendering says so.
#[test]
fn threads_and_fds_past_the_caps_are_counted_not_read() {
    require_root();
    let (threads, fds) = (
        snapshot::MAX_THREADS_SHOWN + 100,
        snapshot::MAX_FDS_SHOWN + 500,
    );
    let mut py = Py::spawn(&format!(
        r#"import os, resource, threading
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, {fds} + 64), max(hard, {fds} + 64)))
held = [os.open("/dev/null", os.O_RDONLY) for _ in range({fds})]
stop = threading.Event()
for _ in range({threads}):
    threading.Thread(target=stop.wait, daemon=True).start()
print('ready', len(held), threading.active_count(), flush=True)
stop.wait()
"#
    ));
    let got = py.ints();
    assert_eq!(got, [fds as i64, threads as i64 + 1]);
    let snap = snapshot::take(&[py.pid()]);
    let p = snap
        .processes
        .iter()
        .find(|p| p.pid == py.pid())
        .expect("the process");
    assert_eq!(p.threads.len(), snapshot::MAX_THREADS_SHOWN);
    assert_eq!(p.threads_left_out as usize, threads + 1 - p.threads.len());
    assert_eq!(p.fds.len(), snapshot::MAX_FDS_SHOWN);
    // stdio and the handful python opens besides the ones it made.
    let total = p.fds.len() + p.fds_left_out as usize;
    assert!((fds..fds + 16).contains(&total), "{total} fds");
    assert!(
        p.fds.windows(2).all(|w| w[0].fd < w[1].fd) && p.fds[0].fd == 0,
        "the lowest"
    );
    let text = snapshot::render_text(&snap);
    assert!(
        text.contains(&format!("… {} more threads, not read", p.threads_left_out)),
        "{text}"
    );
    assert!(text.contains(&format!("… {} more fds, not read", p.fds_left_out)));
}
