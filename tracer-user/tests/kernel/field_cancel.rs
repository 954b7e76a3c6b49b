//! The tracer's own stops on the real kernel: a CI cancellation (SIGINT to
//! the tracer, forwarded to the job) is "the run was cancelled", expected,
//! whatever bash and Node do with it; `--timeout` says it expired.
//!
//! Hermetic: the test signals only the tracer it spawned.
use std::process::Stdio;

use crate::caught::support::*;
use crate::certificates::support::*;
use crate::common::*;
use nix::sys::signal::Signal;

#[test]
fn ci_cancellation_is_expected_whatever_bash_and_node_do() {
    // SIGINT to the tracer itself, as a CI runner cancelling the job: the
    // tracer forwards it to the job's group; node catches and re-raises,
    // bash (waiting for node) re-raises after node died of it.
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let script =
        format!("node -e \"console.log('ready ' + process.ppid); {NODE_NAP}\"; echo after");
    let mut cmd = record_command(dir.path(), &[], &["bash", "-c", &script]);
    cmd.stderr(Stdio::piped());
    let (mut t, bash) = spawn_ready(cmd);
    let bash: u32 = bash.parse().unwrap();
    wait_in_do_wait(bash);
    kill(t.id(), Signal::SIGINT);
    let mut stderr = Vec::new();
    std::io::Read::read_to_end(&mut t.stderr.take().unwrap(), &mut stderr).unwrap();
    let status = t.wait().unwrap();
    let output = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr,
    };
    let r = Recorded::read(dir, output);
    assert_eq!(
        r.code(),
        Some(130),
        "128+SIGINT passes through: {}",
        r.stderr()
    );
    let rep = checked_report(&r);
    assert_eq!(rep["counts"]["unexpected"], 0, "{}", rep["verdict"]);
    assert!(
        !s(&rep["verdict"]).contains("unexpected death:"),
        "{}",
        rep["verdict"]
    );
    let c = cert(&rep, bash);
    let node = certs(&rep)
        .iter()
        .find(|x| x["victim"]["pid"] != bash)
        .expect("node's certificate");
    for c in [c, node] {
        assert_eq!(
            (s(&c["rank"]), s(&c["cause"]["kind"])),
            ("expected", "tracer"),
            "{c:#}"
        );
        assert_eq!(c["cause"]["cancelled"], true);
        assert_eq!(c["killer"]["process"]["pid"], r.log.header.tracer_pid);
        assert!(
            s(&c["headline"]).contains("the run was cancelled"),
            "{}",
            c["headline"]
        );
        assert!(s(&c["rank_reason"]).starts_with("the run was cancelled"));
    }
    assert_reraised(c, "SIGINT", "SI_USER");
    assert_reraised(node, "SIGINT", "SI_TKILL");
}

#[test]
fn the_tracers_timeout_is_named_as_such() {
    // bash waits on sleep; --timeout expires; the tracer SIGTERMs the job's
    // group: both die of it (bash leaves SIGTERM at its default).
    let r = record(
        &["--timeout", "1s", "--kill-grace", "5s"],
        &["bash", "-c", "sleep 30; echo after"],
    );
    assert_eq!(r.code(), Some(124), "{}", r.stderr());
    let rep = checked_report(&r);
    assert_eq!(rep["counts"]["unexpected"], 0, "{}", rep["verdict"]);
    for c in certs(&rep) {
        assert_eq!(
            (s(&c["rank"]), s(&c["cause"]["kind"])),
            ("expected", "tracer")
        );
        assert!(c["cause"].get("cancelled").is_none());
        assert!(
            s(&c["headline"]).ends_with(": its `--timeout` expired and the tracer stopped the run"),
            "{}",
            c["headline"]
        );
        assert_eq!(
            s(&c["rank_reason"]).split(" (").next(),
            Some("stopped by the tracer when its --timeout expired")
        );
    }
    assert_eq!(certs(&rep).len(), 2, "bash and its sleep");
    let bash = cert(&rep, root(&r).pid);
    assert_eq!(bash["killer"]["process"]["pid"], r.log.header.tracer_pid);
}
