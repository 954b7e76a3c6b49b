//! Smaller field truths (issue 11 §5) on the real kernel: a short-lived
//! worker that says why it fails is certified; a command that cannot be run
//! still gets the three reports with a certificate saying why.
use std::os::unix::fs::PermissionsExt;

use crate::certificates::support::*;
use crate::common::*;

#[test]
fn short_node_worker_that_prints_an_error_is_certified() {
    let sc = scenario(|| {
        // A Node worker that throws at once: well under a second, no
        // children; only what it said makes it worth a certificate.
        let out = std::process::Command::new("node")
            .args(["-e", "const cfg = undefined; console.log(cfg.port)"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        tag("ok".into());
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let c = certs(&rep)
        .iter()
        .find(|c| c["victim"]["argv"][0] == "node")
        .unwrap_or_else(|| panic!("node's exit 1 is certified: {rep:#}"));
    assert_eq!(c["rank"], "nonzero_exit");
    assert!(c["victim"]["lifetime_ns"].as_u64().unwrap() < 5_000_000_000);
    assert_eq!(c["victim"]["children"], 0);
    let line = s(&c["last_words"]["line"]);
    assert!(
        line.starts_with("TypeError: Cannot read properties of undefined"),
        "{line}"
    );
    assert!(s(&c["headline"]).ends_with(&format!("— last words: `{line}`")));
}

#[test]
fn v8_heap_exhaustion_is_quoted_not_its_native_stack() {
    let sc = scenario(|| {
        // V8 prints FATAL ERROR, then a native stack of ~16 frames whose
        // names hold "OOMErrorHandler", "FatalProcessOutOfMemory"...
        let out = std::process::Command::new("node")
            .args([
                "--max-old-space-size=16",
                "-e",
                "const a = []; for (;;) a.push(new Array(1e5).fill(1))",
            ])
            .output()
            .unwrap();
        assert!(!out.status.success());
        tag("ok".into());
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let c = certs(&rep)
        .iter()
        .find(|c| c["victim"]["argv"][0] == "node")
        .unwrap_or_else(|| panic!("node's death is certified: {rep:#}"));
    let lw = &c["last_words"];
    assert_eq!(
        s(&lw["line"]),
        "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"
    );
    assert!(
        s(&lw["text"]).contains("----- Native stack trace -----"),
        "the raw tail stays"
    );
}

#[test]
fn pidfd_targets_are_resolved_by_their_signal_or_said_unresolved() {
    let sc = scenario(|| {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        // SAFETY: plain syscalls on our own child; no pointers but NULL.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, child.id(), 0) };
        assert!(fd >= 0, "pidfd_open: {}", std::io::Error::last_os_error());
        // SAFETY: as above: the pidfd of our own child, a plain signal number.
        let send = || unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                fd,
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        assert_eq!(send(), 0);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(9));
        // Reaped: the pidfd now reaches nobody (ESRCH), a near miss.
        assert_eq!(send(), -1);
        tag(format!("sleep={} fd={fd}", child.id()));
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let (sleep, fd) = (field(&line, "sleep"), field(&line, "fd"));
    let c = cert(&rep, sleep.parse().unwrap());
    let k = &c["killer"];
    assert_eq!(k["syscall"], "pidfd_send_signal");
    assert_eq!(s(&k["aimed_at"]), format!("pid {sleep} through pidfd {fd}"));
    assert_eq!(
        s(&k["call"]),
        format!("pidfd_send_signal(pidfd {fd}, SIGKILL)")
    );
    let miss = rep["near_misses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["syscall"] == "pidfd_send_signal")
        .unwrap_or_else(|| panic!("the failed pidfd call is a near miss: {rep:#}"));
    assert_eq!(miss["errno"], "ESRCH");
    assert_eq!(s(&miss["aimed_at"]), format!("pidfd {fd} (unresolved)"));
}

/// `record -- CMD` where CMD cannot be run: the status a shell would give,
/// the one-line error, and still the log and the three reports, whose
/// certificate `tracer report` reproduces.
fn not_run(cmd: &str, code: i32, reason: &str) {
    let r = record(&[], &[cmd]);
    assert_eq!(r.code(), Some(code), "{}", r.stderr());
    let stderr = r.stderr();
    assert!(
        stderr
            .lines()
            .last()
            .is_some_and(|l| l.starts_with(&format!("tracer: error: cannot run `{cmd}`"))),
        "the error is the last line: {stderr}"
    );
    assert!(r.path("report.html").is_file());
    let rep = checked_report(&r);
    let c = &certs(&rep)[0];
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("nonzero_exit", "not_run")
    );
    assert_eq!(c["victim"]["argv"][0], cmd);
    assert_eq!(c["victim"]["pid"], root(&r).pid);
    let h = s(&c["headline"]);
    assert!(
        h.contains(&format!(
            "could not be run: executing `{cmd}` failed with {reason}"
        )) && h.contains(&format!("tracer exited {code}, as a shell does")),
        "{h}"
    );
    assert_eq!(rep["run"]["command_status"]["exited"]["code"], code);
    assert!(s(&rep["verdict"]).contains(h), "{}", rep["verdict"]);
}

#[test]
fn command_not_found_still_writes_the_reports() {
    not_run(
        "/nonexistent/tracer-h1-command",
        127,
        "No such file or directory",
    );
}

#[test]
fn command_not_executable_still_writes_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable.sh");
    std::fs::write(&script, "#!/bin/sh\necho never\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    not_run(script.to_str().unwrap(), 126, "Permission denied");
}
