//! Hangs that explain themselves, on the real kernel: a reader whose pipe
//! only a leaked grandchild holds, a socket read the run waits on, a stopped process and who stopped it, a
//! frozen cgroup (v1 freezer and v2 cgroup.freeze), and a job that merely
//! sleeps (no deadlock finding).
use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use crate::common::*;
use tracer_user::{
    report::{build_report, Report, ReportOptions},
    snapshot::{Finding, SyscallState},
};

/// When tracer snapshots the run: late enough that the scenario is in place
/// on a loaded machine. With 1-2 s, a CI run under load (two test suites on
/// 2 cores) snapshotted python before it had started its child: no finding.
/// The scenarios block for ever (sleep 100, a read nobody answers), so a
/// later snapshot sees the same state; only the test's length grows.
const HANG_AFTER: &str = "8s";

fn report(r: &Recorded) -> Report {
    build_report(&r.log, &ReportOptions::default())
}

fn findings(rep: &Report) -> &[Finding] {
    assert_eq!(rep.snapshots.len(), 1, "one timeout snapshot");
    &rep.snapshots[0].snapshot.findings
}

fn find<'a>(rep: &'a Report, kind: &str) -> &'a Finding {
    findings(rep)
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} finding: {:#?}", findings(rep)))
}

/// `tracer report` on the log gives the same report.json: the findings
/// that need the log are derived again, not stored.
fn rerenders_the_same(r: &Recorded) {
    let out = tempfile::tempdir().unwrap();
    let o = report_cmd(&r.path("events.ndjson"), out.path());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        std::fs::read(r.path("report.json")).unwrap(),
        std::fs::read(out.path().join("report.json")).unwrap()
    );
}

#[test]
fn a_reader_held_open_by_a_leaked_grandchild_names_the_holder() {
    let py =
        "import subprocess\nsubprocess.check_output([\"sh\", \"-c\", \"sleep 100 & echo hi\"])";
    let r = record(
        &["--timeout", HANG_AFTER, "--kill-grace", "2s"],
        &["python3", "-c", py],
    );
    assert_eq!(r.code(), Some(124), "{}", r.stderr());
    let rep = report(&r);
    let held = find(&rep, "held_by_leaked");
    assert!(
        held.detail.contains("held only by a leaked process: pid")
            && held
                .detail
                .contains("(sleep 100, fd 1; its parent `sh -c sleep 100 & echo hi`"),
        "{}",
        held.detail
    );
    let sleep = held.related_pids[0];
    // The tracer is the run's subreaper: the orphan's ppid is the tracer.
    let orphan = findings(&rep)
        .iter()
        .find(|f| f.kind == "orphaned" && f.pid == sleep)
        .unwrap_or_else(|| panic!("no orphaned finding for {sleep}: {:#?}", findings(&rep)));
    assert!(
        orphan
            .detail
            .contains(&format!("has ppid {}, the tracer", r.log.header.tracer_pid)),
        "{}",
        orphan.detail
    );
    assert!(
        rep.verdict.starts_with("Timed out while blocked: thread")
            && rep.verdict.contains("leaked process"),
        "{}",
        rep.verdict
    );
    rerenders_the_same(&r);
}

/// A client blocked reading a unix socket whose other end a detached daemon
/// (setsid, then a fork) accepted and holds without answering: the
/// `device-daemon` a test starts and leaves behind.
const SOCKET_DAEMON: &str = r#"
import os, socket, sys, time
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path); srv.listen(1)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        conn, _ = srv.accept()
        time.sleep(60)
        os._exit(0)
    os._exit(0)
srv.close()
time.sleep(0.2)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect(path)
c.recv(1)
"#;

#[test]
fn a_reader_whose_socket_peer_is_a_detached_daemon_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("daemon.sock");
    let r = record(
        &[
            "--timeout",
            HANG_AFTER,
            "--kill-grace",
            "2s",
            "--leaks",
            "kill",
        ],
        &["python3", "-c", SOCKET_DAEMON, sock.to_str().unwrap()],
    );
    assert_eq!(r.code(), Some(124), "{}", r.stderr());
    let rep = report(&r);
    let held = find(&rep, "held_by_leaked");
    assert!(
        held.detail
            .contains("blocked in unix_stream_read_generic reading a unix socket")
            && held
                .detail
                .contains("held only by a leaked or detached process: pid")
            // setsid, then a fork: the session it is in is its exited
            // parent's, not its own.
            && held.detail.contains("; detached: session ")
            && held.detail.contains(", not the run's; its parent"),
        "{}",
        held.detail
    );
    assert!(
        rep.verdict.starts_with("Timed out while blocked: thread")
            && rep.verdict.contains("detached"),
        "{}",
        rep.verdict
    );
    rerenders_the_same(&r);
}

/// Issue 40's socket hang: the run's root forks a client and waits for
/// it; the client talks to a server (a daemon in its own session, whose
/// thread then waits in accept4 for the next connection), then blocks in
/// recvfrom on a socketpair whose other end only the root holds. The
/// server's accept is no read, and the client is in the run's session: the
/// lead is the client's read, with the root named as the holder.
const SOCKET_HANG: &str = r#"
import os, socket, sys, threading
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path); srv.listen(4)
if os.fork() == 0:
    os.setsid()
    conns = []
    def serve():
        while True:
            c, _ = srv.accept(); conns.append(c); c.send(b"k")
    t = threading.Thread(target=serve); t.start(); t.join()
srv.close()
a, b = socket.socketpair()
pid = os.fork()
if pid == 0:
    a.close()
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.connect(path)
    c.recv(1)
    b.recv(1)
    os._exit(0)
b.close()
os.waitpid(pid, 0)
"#;

#[test]
fn a_socket_hang_leads_with_the_read_the_run_waits_on_and_its_holder() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("server.sock");
    let r = record(
        &[
            "--timeout",
            HANG_AFTER,
            "--kill-grace",
            "2s",
            "--leaks",
            "kill",
        ],
        &["python3", "-c", SOCKET_HANG, sock.to_str().unwrap()],
    );
    assert_eq!(r.code(), Some(124), "{}", r.stderr());
    let rep = report(&r);
    let procs = &rep.snapshots[0].snapshot.processes;
    let in_call = |call: &str| {
        procs
            .iter()
            .find(|p| {
                p.threads.iter().any(|t| {
                    matches!(&t.syscall, SyscallState::Syscall { name: Some(n), .. } if n == call)
                })
            })
            .unwrap_or_else(|| panic!("nobody in {call}: {procs:#?}"))
    };
    let client = in_call("recvfrom");
    let server = in_call("accept4");
    let root = client.ppid;
    // The scenario as the issue saw it: the server setsid'd, the client is
    // in the run's session (the root's).
    assert_ne!(server.sid, client.sid);
    assert_eq!(
        procs.iter().find(|p| p.pid == root).unwrap().sid,
        client.sid
    );
    let all = findings(&rep);
    let first = &all[0];
    assert_eq!(
        (
            first.kind.as_str(),
            first.pid,
            first.related_pids.as_slice()
        ),
        ("blocks_the_run", client.pid, &[root][..]),
        "{all:#?}"
    );
    assert!(
        first
            .detail
            .contains(&format!("thread {0} of pid {0} (", client.pid))
            && first
                .detail
                .contains("blocked in recvfrom reading a unix socket (fd ")
            && first
                .detail
                .contains(&format!("whose other end only pid {root} ("))
            && first.detail.contains(&format!(
                "and pid {root} waits in wait4 for pid {}: neither can go on",
                client.pid
            )),
        "{}",
        first.detail
    );
    // Nothing the snapshot contradicts: the accept is not a read, and no
    // process of the run's session is called detached.
    assert!(
        all.iter()
            .all(|f| f.pid != server.pid || f.kind != "held_by_leaked"),
        "{all:#?}"
    );
    assert!(
        all.iter().all(|f| !f.detail.contains("detached")),
        "{all:#?}"
    );
    assert!(
        rep.verdict.starts_with(&format!(
            "Timed out while blocked: thread {0} of pid {0} (",
            client.pid
        )) && rep.verdict.contains(&format!("only pid {root} (")),
        "{}",
        rep.verdict
    );
    rerenders_the_same(&r);
}

#[test]
fn a_stopped_process_is_said_stopped_and_by_whom() {
    let r = record(
        &["--timeout", HANG_AFTER, "--kill-grace", "1s"],
        // Stopped once it is `sleep` (its exec done), so it is named so.
        &[
            "bash",
            "-c",
            "sleep 100 & p=$!; until [ \"$(cat /proc/$p/comm)\" = sleep ]; do :; done; kill -STOP $p; wait",
        ],
    );
    assert_eq!(r.code(), Some(124), "{}", r.stderr());
    let rep = report(&r);
    let f = find(&rep, "stopped");
    assert!(
        f.detail.contains("is stopped (state T)")
            && f.detail.contains("stopped by SIGSTOP from `bash -c")
            && f.detail.contains(&format!("via kill({}, SIGSTOP)", f.pid)),
        "{}",
        f.detail
    );
    assert!(
        rep.verdict.starts_with(&format!(
            "Timed out while blocked: pid {} (sleep 100) is stopped",
            f.pid
        )),
        "{}",
        rep.verdict
    );
    rerenders_the_same(&r);
}

fn mount_of(fstype: &str, option: Option<&str>) -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split(' ');
        let (fs, _, opts) = (r.next()?, r.next()?, r.next()?);
        (fs == fstype && option.is_none_or(|o| opts.split(',').any(|x| x == o)))
            .then(|| left.split(' ').nth(4).unwrap().into())
    })
}

/// Kill what is left in our own cgroup (only this test's `sleep`: the
/// cgroup's name is unique to this test process), thaw it so the kill
/// lands, wait (bounded) for it to empty, remove it.
fn remove_cgroup(cg: &Path, thaw: (&str, &str)) {
    let procs = std::fs::read_to_string(cg.join("cgroup.procs")).unwrap_or_default();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = std::fs::write(cg.join(thaw.0), thaw.1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(cg.join("cgroup.procs")).is_ok_and(|p| !p.trim().is_empty()) {
        assert!(Instant::now() < deadline, "{} did not empty", cg.display());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir(cg).unwrap();
}

fn frozen_run(cg: &Path, freeze: (&str, &str), thaw: (&str, &str)) -> Recorded {
    std::fs::create_dir(cg).unwrap();
    let script = format!(
        // The frozen sleep must not hold the tracer's output pipes: a v1
        // frozen task cannot die before it is thawed. So it is frozen only
        // once it is `sleep`: its redirections are done before its exec (a
        // fork frozen earlier kept the pipes and hung the test).
        "sleep 100 </dev/null >/dev/null 2>&1 & p=$!; \
         until [ \"$(cat /proc/$p/comm)\" = sleep ]; do :; done; \
         echo $p > '{0}/cgroup.procs'; echo {2} > '{0}/{1}'; wait",
        cg.display(),
        freeze.0,
        freeze.1
    );
    let r = record(
        &["--timeout", HANG_AFTER, "--kill-grace", "1s"],
        &["bash", "-c", &script],
    );
    remove_cgroup(cg, thaw);
    r
}

#[test]
fn a_v1_frozen_cgroup_is_said_frozen_and_where() {
    let root = mount_of("cgroup", Some("freezer")).expect("a v1 freezer hierarchy is mounted");
    let cg = root.join(format!("tracer-h5-freeze-{}", std::process::id()));
    let r = frozen_run(
        &cg,
        ("freezer.state", "FROZEN"),
        ("freezer.state", "THAWED"),
    );
    let rep = report(&r);
    let f = find(&rep, "frozen");
    assert!(
        f.detail.contains(&format!("v1 freezer {}", cg.display())),
        "{}",
        f.detail
    );
    assert!(rep.verdict.contains("is frozen"), "{}", rep.verdict);
}

#[test]
fn a_v2_frozen_cgroup_is_said_frozen_and_where() {
    let root = mount_of("cgroup2", None).expect("cgroup v2 is mounted");
    let cg = root.join(format!("tracer-h5-freeze2-{}", std::process::id()));
    let r = frozen_run(&cg, ("cgroup.freeze", "1"), ("cgroup.freeze", "0"));
    let rep = report(&r);
    let f = find(&rep, "frozen");
    assert!(
        f.detail.contains(&format!("cgroup v2 {}", cg.display())),
        "{}",
        f.detail
    );
    assert!(rep.verdict.contains("is frozen"), "{}", rep.verdict);
}

#[test]
fn a_job_waiting_on_a_sleeping_child_is_no_deadlock() {
    let py = "import subprocess\nsubprocess.run([\"bash\", \"-c\", \"sleep 100; true\"])";
    let r = record(
        &["--timeout", HANG_AFTER, "--kill-grace", "1s"],
        &["python3", "-c", py],
    );
    assert_eq!(r.code(), Some(124), "{}", r.stderr());
    let rep = report(&r);
    assert!(
        !findings(&rep)
            .iter()
            .any(|f| f.kind == "waits_on_blocked_child"),
        "{:#?}",
        findings(&rep)
    );
    assert!(
        rep.verdict
            .starts_with("Timed out; no deadlock pattern found"),
        "{}",
        rep.verdict
    );
}
