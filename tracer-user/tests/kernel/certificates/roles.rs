//! Worker roles: what a re-exec'd copy of this binary does when `CERT_ROLE`
//! names it. A role its parent must not act on too early says `ready` on
//! stdout first (the one handshake, `common/ready.rs`).
use std::{io::Write, time::Duration};

use super::support::NO_SUCH_PID;
use crate::common::proc;

/// Long enough for any scenario, short enough that a failing test cannot
/// leave a worker around for long.
const NAP: Duration = Duration::from_secs(60);

pub(super) fn run(role: &str) {
    match role {
        "sleeper" => {
            let me = std::process::id();
            let start = proc::start_ticks(me).unwrap();
            ready(&format!("pid={me} start={start}"));
            std::thread::sleep(NAP);
        }
        "group_killer" => group_killer(),
        "threaded" => threaded(),
        "tgkiller" => {
            let pid: i32 = env("CERT_PID").parse().unwrap();
            let tid: i32 = env("CERT_TID").parse().unwrap();
            // SAFETY: a plain syscall on integers.
            let rc = unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, libc::SIGKILL) };
            assert_eq!(rc, 0, "tgkill: {}", std::io::Error::last_os_error());
        }
        "segv" => {
            no_core();
            // SAFETY: deliberately not: the point is a real fault.
            unsafe { std::ptr::null_mut::<u8>().write_volatile(1) };
        }
        "abort" => {
            no_core();
            std::process::abort();
        }
        "hog" | "alloc" => memory(role),
        "last_words" => last_words(),
        other => panic!("unknown role {other}"),
    }
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"))
}

/// `ready WORDS` on stdout: the parent acts once it reads it.
fn ready(words: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {words}").unwrap();
    out.flush().unwrap();
}

/// A crash must not leave a core file in the source tree.
fn no_core() {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit with a valid struct.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) };
}

/// Seed 000: a group kill of a sibling worker's process group, plus a kill
/// of a pid that cannot exist (it fails with ESRCH: a near miss).
fn group_killer() {
    let pgid: i32 = env("CERT_PGID").parse().unwrap();
    // SAFETY: kill(2) on integers; the group is the scenario's own worker.
    unsafe {
        assert_eq!(libc::kill(-pgid, libc::SIGKILL), 0);
        assert_eq!(libc::kill(NO_SUCH_PID, libc::SIGKILL), -1);
    }
}

/// A worker with a second thread; it reports that thread's tid.
fn threaded() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        tx.send(unsafe { libc::gettid() }).unwrap();
        std::thread::sleep(NAP);
    });
    let tid = rx.recv().unwrap();
    ready(&format!("pid={} tid={tid}", std::process::id()));
    std::thread::sleep(NAP);
}

/// Joins the test's memory cgroup and holds (hog) or grabs (alloc) 40 MiB.
/// The hog volunteers as the OOM victim (oom_score_adj 1000), so the
/// allocator is the task that triggers the OOM killer without being chosen.
fn memory(role: &str) {
    let me = std::process::id().to_string();
    std::fs::write(env("CERT_CGROUP_PROCS"), &me).unwrap();
    if role == "hog" {
        std::fs::write("/proc/self/oom_score_adj", "1000").unwrap();
    }
    // Each alone fits under the 256 MiB limit with room to spare for the
    // process itself (>= 56 MiB), so once the hog is killed the allocator
    // fits; together they cannot. Touched a MiB at a time.
    let size: usize = if role == "hog" { 100 << 20 } else { 200 << 20 };
    let block: Vec<Vec<u8>> = (0..size >> 20).map(|_| vec![0x5au8; 1 << 20]).collect();
    let block = std::hint::black_box(block);
    ready(&format!("pid={me} held={}", block.len() << 20));
    if role == "hog" {
        std::thread::sleep(NAP);
    }
}

/// A worker that had a child, wrote its troubles to stderr (which its parent
/// discards, as test runners do) and exited 1.
fn last_words() {
    let st = std::process::Command::new("true").status().unwrap();
    assert!(st.success());
    let mut err = std::io::stderr().lock();
    for i in 1..=15 {
        writeln!(err, "worker: step {i:02} done").unwrap();
    }
    writeln!(
        err,
        "TypeError: Cannot read properties of undefined (reading 'port')"
    )
    .unwrap();
    for i in 1..=10 {
        writeln!(err, "    at frame{i:02} (/srv/worker.js:{i}:7)").unwrap();
    }
    err.flush().unwrap();
    std::process::exit(1);
}
