//! Pid namespaces, on the real kernel: a command that starts its own pid
//! namespace (as a container runtime does), a tracer that itself runs inside
//! one (a pod's shared namespace), and the sidecar daemon there.
//!
//! Every signal goes to a process of a namespace the test created, so a
//! fabricated pid cannot reach a stranger.
use std::{
    path::Path,
    process::{Child, Command},
};

use crate::common::*;
use nix::{sys::signal::kill, unistd::Pid};
use tracer_user::{
    analysis::Certificate,
    eventlog::{read_log, read_series, EventLog, Record},
    report::{build_report, Report, ReportOptions},
};

fn report(log: &EventLog) -> Report {
    build_report(log, &ReportOptions::default())
}

fn read_pid(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path:?}: {e}"))
        .trim()
        .parse()
        .unwrap()
}

fn cert_by(r: &Report, pred: impl Fn(&Certificate) -> bool) -> &Certificate {
    r.analysis
        .certificates
        .iter()
        .find(|c| pred(c))
        .unwrap_or_else(|| panic!("no such certificate in {:#?}", r.analysis.certificates))
}

/// `sh -c SCRIPT` where the killed `sleep` writes its pid (as the shell
/// sees it) to `pid_file`, a sibling kills it by that pid, and a second
/// kill aims at a pid nobody has.
fn kill_script(pid_file: &Path) -> String {
    format!(
        "sleep 30 & a=$!; echo $a > {}; sh -c \"kill -KILL $a; kill -TERM 77\"; wait $a; exit 1",
        pid_file.display()
    )
}

#[test]
fn a_command_in_its_own_pid_namespace_is_certified_with_both_pids() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_file = tmp.path().join("sleep.pid");
    let script = kill_script(&pid_file);
    let r = record(
        &[],
        &[
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "sh",
            "-c",
            &script,
        ],
    );
    assert!(
        r.log.header.pid_namespace.is_none(),
        "the tracer is on the host"
    );
    let inside = read_pid(&pid_file);
    let rep = report(&r.log);
    let c = cert_by(&rep, |c| {
        c.victim.process.ns_pid.is_some_and(|n| n.pid == inside)
    });
    assert_ne!(
        c.victim.process.pid, inside,
        "host pid and namespace pid differ"
    );
    assert!(
        c.headline.contains(&format!(
            "pid {}, pid {inside} in its namespace",
            c.victim.process.pid
        )),
        "{}",
        c.headline
    );
    let k = c.killer.as_ref().expect("the sibling that killed it");
    assert_eq!(k.target_arg, Some(i64::from(inside)));
    assert_eq!(
        k.target_ns.and_then(|t| t.pid),
        Some(c.victim.process.pid),
        "kill({inside}) inside the namespace resolved to the victim"
    );
    let miss = rep
        .analysis
        .near_misses
        .iter()
        .find(|m| m.target_arg == 77)
        .expect("kill(77) is a near miss");
    assert_eq!(miss.errno.as_deref(), Some("ESRCH"));
    assert_eq!(miss.target_ns.map(|t| t.pid), Some(None));
}

#[test]
fn a_tracer_inside_a_pid_namespace_reports_that_namespace_s_pids() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let (killed, leaked) = (tmp.path().join("sleep.pid"), tmp.path().join("leak.pid"));
    let script = format!(
        // Exit only once the leak runs `sleep`, so /proc shows its argv.
        "{}; setsid sleep 300 & l=$!; echo $l > {}; \
         until grep -qx sleep /proc/$l/comm; do sleep 0.01; done; \
         echo 'dying in a namespace' >&2; exit 3",
        kill_script(&killed).replace("; exit 1", ""),
        leaked.display()
    );
    let output = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc"])
        .arg(env!("CARGO_BIN_EXE_tracer"))
        .args(record_args(
            &out,
            &["--leaks", "kill", "--leak-grace", "1s"],
            &["sh", "-c", &script],
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");

    let log = read_log(&out.join("events.ndjson")).unwrap();
    let ns = log
        .header
        .pid_namespace
        .expect("the header names the namespace");
    assert!(ns.level >= 1);
    assert_eq!(
        log.header.tracer_pid, 1,
        "the tracer is the namespace's init"
    );

    // Its last words are found under its pid in the namespace (the
    // stderr capture's ids in a pid-namespace view).
    let root = log
        .events
        .iter()
        .forks()
        .find(|f| f.parent.pid == 1)
        .map(|f| f.child.pid)
        .expect("the tracer's fork of the command");
    assert!(
        log.events.iter().any(|e| matches!(e, Record::LastWords(l)
            if l.task.pid == root && l.text.ends_with("dying in a namespace\n"))),
        "the command's last words, under its namespace pid {root}"
    );

    // The pids are the ones the script itself printed.
    let rep = report(&log);
    let killed = read_pid(&killed);
    let c = cert_by(&rep, |c| c.victim.process.pid == killed);
    assert!(
        c.victim.process.ns_pid.is_none(),
        "same namespace as the log"
    );
    assert_eq!(
        c.killer.as_ref().and_then(|k| k.target_arg),
        Some(killed.into())
    );

    // The leak was found, read from /proc and stopped under the right pid.
    let leaked = read_pid(&leaked);
    let leak = log
        .events
        .iter()
        .leaks()
        .find(|l| l.task.pid == leaked)
        .expect("the setsid sleep is reported leaked");
    assert_eq!(leak.argv, ["sleep", "300"]);
    assert!(
        log.events.iter().any(|e| matches!(e, Record::Signal(s)
            if s.target.pid == leaked && s.sig == 15 && s.sender.pid == 1)),
        "--leaks kill sent SIGTERM to namespace pid {leaked}"
    );
}

/// The Kubernetes sidecar: `tracer daemon --all` in a pod's shared pid
/// namespace watches that namespace, numbered as the pod sees it.
#[test]
fn a_daemon_inside_a_pid_namespace_watches_that_namespace() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("report");
    let pid_file = tmp.path().join("sleep.pid");
    // (No --kill-child: busybox's unshare, in the VM tests, lacks it.)
    let mut ns = Namespace {
        unshare: Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc"])
            .arg(env!("CARGO_BIN_EXE_tracer"))
            .args(["daemon", "--all", "--output"])
            .arg(&out)
            .spawn()
            .unwrap(),
        daemon: None,
    };
    wait_for_log(&out, "\"tracer_pid\":1,");
    let daemon = daemon_host_pid(&ns.unshare);
    ns.daemon = Some(daemon);

    // A job step entering the namespace, as a pod's CI container would be.
    let status = Command::new("nsenter")
        .args(["--target", &daemon.to_string(), "--pid", "--"])
        .args(["sh", "-c", &kill_script(&pid_file)])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let killed = read_pid(&pid_file);
    wait_for_log(&out, "\"sig\":9");
    kill(Pid::from_raw(daemon as i32), nix::sys::signal::SIGTERM).unwrap();
    let code = ns.unshare.wait().unwrap().code();
    ns.daemon = None; // gone with its namespace: never signal a recycled pid
    assert_eq!(code, Some(0), "daemon stopped cleanly on SIGTERM");

    let log = read_series(&out).unwrap();
    assert!(log.header.pid_namespace.is_some());
    let rep = report(&log);
    let c = cert_by(&rep, |c| c.victim.process.pid == killed);
    assert_eq!(
        c.killer.as_ref().and_then(|k| k.target_arg),
        Some(killed.into())
    );
    // Nothing outside the namespace is named by a host pid: the test
    // process itself (on the host) never appears.
    let me = std::process::id();
    assert!(!log.events.iter().any(|e| match e {
        Record::Signal(s) => s.sender.pid == me || s.target.pid == me,
        Record::Exec(x) => x.task.pid == me,
        _ => false,
    }));
    assert!(
        out.join("report.json").exists(),
        "reports written on SIGTERM"
    );
}

/// The `unshare` wrapping a daemon, and the daemon (the namespace's init:
/// its death ends every process of the namespace). Both are killed if the
/// test fails before stopping them.
struct Namespace {
    unshare: Child,
    daemon: Option<u32>,
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // While unshare runs, the daemon (its child) is alive or its
        // unreaped zombie: its pid cannot have been recycled.
        let running = matches!(self.unshare.try_wait(), Ok(None));
        if let (Some(pid), true) = (self.daemon, running) {
            let _ = kill(Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        }
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

/// unshare's only child is the daemon (pid 1 of the new namespace).
fn daemon_host_pid(unshare: &Child) -> u32 {
    let id = unshare.id();
    let children =
        std::fs::read_to_string(format!("/proc/{id}/task/{id}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .expect("unshare has forked the daemon")
}

/// In a pid namespace whose /proc is still the parent's, every pid the
/// tracer read from /proc would name another process: refuse, in one line.
#[test]
fn a_foreign_proc_mount_is_one_clear_line() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let out = Command::new("unshare")
        .args(["--pid", "--fork"])
        .arg(env!("CARGO_BIN_EXE_tracer"))
        .args(record_args(&tmp.path().join("out"), &[], &["true"]))
        .output()
        .unwrap();
    let stderr = one_line_failure(&out);
    assert!(
        stderr.contains("/proc belongs to another pid namespace")
            && stderr.contains("--mount-proc"),
        "{stderr}"
    );
}
