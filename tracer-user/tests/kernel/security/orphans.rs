//! Hole 3: the run never outlives an unobserved tracer. A grandchild that
//! left the process group and the session (setsid, double fork) and ignores
//! SIGTERM is still ended when tracer is SIGKILLed: tracer's watchdog
//! SIGTERMs the run and SIGKILLs it after the grace period.
use std::{
    io::Read,
    process::{Child, Stdio},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};
use tracer_user::eventlog::{read_log, ProcKey};

use crate::common::*;

/// Double fork, setsid, ignore SIGTERM, print its pid, sleep: the shape of a
/// daemon that escapes a process-group kill.
const DETACHED_GRANDCHILD: &str = r#"
import os, signal, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print(f"ready grandchild={os.getpid()}", flush=True)
        time.sleep(300)
    os._exit(0)
os.wait()
time.sleep(300)
"#;

/// Not a PATH lookup: root's PATH may lead where `nobody` cannot go.
const PYTHON: &str = "/usr/bin/python3";

/// The command's pid: the tracer's child, from the log being written.
fn root_pid_of(dir: &std::path::Path) -> u32 {
    let log = read_log(&dir.join("events.ndjson")).unwrap();
    let found = log
        .events
        .iter()
        .forks()
        .find(|f| f.parent.pid == log.header.tracer_pid)
        .map(|f| f.child.pid)
        .expect("the tracer's fork of the command is in the log");
    found
}

/// Hermetic clean-up: only if it is still the process the test started.
fn kill_if_ours(pid: u32, start: u64) {
    if proc::start_ticks(pid) == Some(start) {
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

/// `tracer record` of `cmd`, returned once the grandchild said `ready
/// grandchild=PID`, with that pid; stderr piped.
fn spawn(dir: &std::path::Path, extra: &[&str], cmd: &[&str]) -> (Child, u32) {
    require_root();
    let mut tracer = record_command(dir, extra, cmd);
    tracer.stdin(Stdio::null()).stderr(Stdio::piped());
    let (tracer, words) = spawn_ready(tracer);
    let gc = words
        .strip_prefix("grandchild=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("expected `ready grandchild=PID`, got {words:?}"));
    (tracer, gc)
}

#[test]
fn sigkilled_tracer_takes_a_detached_grandchild_with_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let grace = Duration::from_secs(1);
    let (mut tracer, gc) = spawn(
        &dir,
        &["--user", "nobody", "--kill-grace", "1s"],
        &[PYTHON, "-c", DETACHED_GRANDCHILD],
    );
    let start = proc::start_ticks(gc).expect("the grandchild is alive");
    let tracer_pid = tracer.id();
    // It really left: another session (so another process group) than the
    // tracer's and the command's.
    let sid = |p: u32| nix::unistd::getsid(Some(Pid::from_raw(p as i32))).unwrap();
    let cmd_pid = root_pid_of(&dir);
    assert_ne!(sid(gc), sid(tracer_pid));
    assert_ne!(sid(gc), sid(cmd_pid));

    kill(Pid::from_raw(tracer_pid as i32), Signal::SIGKILL).unwrap();
    tracer.wait().unwrap();
    let killed_at = Instant::now();
    // It ignores SIGTERM: only the SIGKILL after the grace period ends it.
    let bound = grace + Duration::from_secs(5);
    while proc::running(gc, start) && killed_at.elapsed() < bound {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = proc::running(gc, start);
    kill_if_ours(gc, start);
    assert!(
        !survived,
        "the detached grandchild (pid {gc}) outlived the SIGKILLed tracer by {bound:?}"
    );
    // The watchdog said what it did (stderr reaches EOF once the watchdog
    // and the run are gone).
    let mut stderr = String::new();
    tracer
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains(&format!(
            "tracer: watchdog: tracer (pid {tracer_pid}) is gone"
        )) && stderr.contains("SIGKILL"),
        "{stderr}"
    );
    // The run's cgroup (where one could be made) is gone with it.
    assert!(
        no_run_cgroup_of(tracer_pid),
        "a tracer-run cgroup was left behind"
    );
}

/// A tracer that finishes normally stands its watchdog down: what
/// `--leaks report` (the default) leaves running stays running.
#[test]
fn a_finished_tracer_leaves_reported_leaks_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let (mut tracer, gc) = spawn(
        &dir,
        &[],
        &[
            PYTHON,
            "-c",
            &DETACHED_GRANDCHILD.replace("os.wait()\ntime.sleep(300)", "os.wait()"),
        ],
    );
    let start = proc::start_ticks(gc).unwrap();
    let status = tracer.wait().unwrap();
    let log = read_log(&dir.join("events.ndjson")).unwrap();
    // The watchdog was reaped by tracer before it exited: it cannot act now.
    let alive = proc::running(gc, start);
    let leaked: Vec<ProcKey> = log.events.iter().leaks().map(|l| l.task.key()).collect();
    let cgroup_left = !no_run_cgroup_of(log.header.tracer_pid);
    let in_run_cgroup = std::fs::read_to_string(format!("/proc/{gc}/cgroup"))
        .unwrap_or_default()
        .contains("tracer-run-");
    kill_if_ours(gc, start);
    // EOF now: the leak held tracer's stderr.
    let mut stderr = String::new();
    tracer
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(alive, "the reported leak was killed after tracer finished");
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert_eq!(leaked[0].pid, gc);
    assert!(!cgroup_left, "the run's cgroup was not removed");
    assert!(
        !in_run_cgroup,
        "the leak was left in the removed run's cgroup"
    );
}

/// No `tracer-run-<tracer pid>-*` directory in any cgroup hierarchy.
fn no_run_cgroup_of(tracer_pid: u32) -> bool {
    let prefix = format!("tracer-run-{tracer_pid}-");
    [
        "/sys/fs/cgroup",
        "/sys/fs/cgroup/unified",
        "/sys/fs/cgroup/freezer",
    ]
    .iter()
    .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
    .all(|e| !e.file_name().to_string_lossy().starts_with(&prefix))
}

/// A tracer and its watchdog both SIGKILLed leave an empty run cgroup
/// behind: the next tracer removes it (a live tracer's is never touched).
#[test]
fn a_stale_run_cgroup_is_swept() {
    require_root();
    // The test's own cgroup in the cgroup2 hierarchy: where tracer, its
    // child, makes the run's.
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let path = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a cgroup2 hierarchy")
        .trim_start_matches('/')
        .to_string();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mnt = mountinfo
        .lines()
        .find(|l| l.contains(" - cgroup2 "))
        .and_then(|l| l.split(' ').nth(4))
        .expect("cgroup2 mounted");
    let parent = std::path::Path::new(mnt).join(path);
    // A pid that is gone: our own child, reaped.
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let stale = parent.join(format!("tracer-run-{dead_pid}-1"));
    std::fs::create_dir(&stale).unwrap();
    let r = record(&[], &["true"]);
    let swept = !stale.exists();
    let _ = std::fs::remove_dir(&stale);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert!(swept, "{} was left", stale.display());
}
