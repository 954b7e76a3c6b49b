//! The pipe idiom whoever ends it, and a wrapper passing its child's death
//! on, on the real kernel with real programs: a Go program's re-raise of
//! SIGPIPE after an EPIPE write, Python's `BrokenPipeError` exit and
//! Node's EPIPE exit into `head` (expected: the reader exited 0) and into
//! a reader that crashed (a consequence of it); `timeout`, `sudo` and
//! `strace -f` re-raising their child's SIGSEGV (its consequence, not a
//! second unexpected death).
use crate::common::{native::compile, suites::require, *};
use tracer_user::{
    analysis::{CauseKind, Certificate, LinkVia, MechanismKind, Rank},
    report::{build_report, Report, ReportOptions},
};

fn report(r: &Recorded) -> Report {
    build_report(&r.log, &ReportOptions::default())
}

fn headlines(rep: &Report) -> Vec<&String> {
    rep.analysis
        .certificates
        .iter()
        .map(|c| &c.headline)
        .collect()
}

/// The one certificate whose victim exec'd `program` (argv[0]'s basename).
fn cert<'a>(rep: &'a Report, program: &str) -> &'a Certificate {
    let found: Vec<&Certificate> = rep
        .analysis
        .certificates
        .iter()
        // Not a fork that never exec'd: strace's own helper, which it
        // SIGKILLs as it ends (expected).
        .filter(|c| !c.victim.process.argv_inherited)
        .filter(|c| {
            c.victim
                .process
                .argv
                .first()
                .is_some_and(|a| a.rsplit('/').next() == Some(program))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one certificate for {program}; verdict: {}; headlines: {:?}",
        rep.verdict,
        headlines(rep)
    );
    found[0]
}

/// Writes lines to stdout for ever: fmt's write returns EPIPE once the
/// reader is gone, and Go's runtime then raises SIGPIPE on itself (a
/// write to fd 1 or 2; runtime.sigpipe).
const GO_WRITER: &str = r#"package main

import (
	"fmt"
	"os"
)

func main() {
	for {
		fmt.Fprintln(os.Stdout, "y")
	}
}
"#;

/// The reader of a pipe that reads a little, then crashes.
const CRASHING_READER: &str = "import os, sys; sys.stdin.buffer.read(10); os.abort()";

fn go_writer(dir: &std::path::Path) -> String {
    require("go", "Debian's golang-go, installed by cargo xtask test");
    compile(dir, "gowriter", "go", GO_WRITER, &[])
        .to_str()
        .unwrap()
        .to_string()
}

/// The writer ended by the pipe idiom, ranked by its reader named right.
fn assert_pipe_idiom(rep: &Report, writer: &str, reader: &str, rank: Rank) -> Certificate {
    let c = cert(rep, writer);
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::Sigpipe, rank),
        "{}",
        c.headline
    );
    let m = c.cause.mechanism.as_ref().expect("a mechanism");
    assert_eq!(m.kind, MechanismKind::PipeReaderGone, "{}", c.headline);
    let r = m.process.as_ref().expect("the reader named");
    assert!(
        r.argv[0].rsplit('/').next().unwrap().starts_with(reader),
        "the reader is {reader}, not {:?}: {}",
        r.argv,
        c.headline
    );
    assert!(c.headline.contains("its reader"), "{}", c.headline);
    c.clone()
}

#[test]
fn a_go_writer_reraising_sigpipe_into_head_is_the_normal_end_of_a_pipeline() {
    let tmp = tempfile::tempdir().unwrap();
    let go = go_writer(tmp.path());
    let r = record(
        &["--fail-on", "unexpected-death"],
        &["bash", "-c", &format!("{go} | head -c 1 >/dev/null")],
    );
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let rep = report(&r);
    let c = assert_pipe_idiom(&rep, "gowriter", "head", Rank::Expected);
    // Its own tgkill is kept as how it died; the kernel's SIGPIPE is the cause.
    let re = c.cause.reraised.as_ref().expect("the re-raise is kept");
    assert_eq!(re.sig_name, "SIGPIPE");
    assert_eq!(c.cause.signal.as_ref().unwrap().code_name, "SI_USER");
    assert!(
        c.headline.contains("re-raised on itself via tgkill("),
        "{}",
        c.headline
    );
    assert!(c.headline.contains("`producer | head`"), "{}", c.headline);
    assert_eq!(rep.analysis.counts.unexpected, 0, "{}", rep.verdict);
    assert!(
        rep.verdict.starts_with("No unexpected deaths"),
        "{}",
        rep.verdict
    );
}

#[test]
fn a_go_writer_whose_reader_crashed_follows_from_the_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let go = go_writer(tmp.path());
    let r = record(
        &[],
        &[
            "bash",
            "-c",
            &format!("ulimit -c 0; {go} | python3 -c '{CRASHING_READER}'"),
        ],
    );
    assert_no_loss(&r);
    let rep = report(&r);
    let c = assert_pipe_idiom(&rep, "gowriter", "python3", Rank::Consequence);
    let link = c.consequence_of.as_ref().expect("linked to the reader");
    assert_eq!(link.via, LinkVia::PipeReader);
    assert_eq!(link.of, cert(&rep, "python3").id);
    assert_eq!(rep.analysis.counts.unexpected, 1, "{}", rep.verdict);
    assert!(rep.verdict.contains("SIGABRT"), "{}", rep.verdict);
}

/// Python ignores SIGPIPE: its write fails with EPIPE and it exits with
/// `BrokenPipeError` (1, or 120 when the flush at exit fails too).
const PY_WRITER: &str = "import sys\nfor i in range(10**7):\n    print(i)\n";

#[test]
fn python_broken_pipe_into_head_is_the_normal_end_of_a_pipeline() {
    let tmp = tempfile::tempdir().unwrap();
    let gen = tmp.path().join("gen.py");
    std::fs::write(&gen, PY_WRITER).unwrap();
    let r = record(
        &["--fail-on", "unexpected-death"],
        &[
            "bash",
            "-c",
            &format!("python3 {} | head -n 3 >/dev/null", gen.display()),
        ],
    );
    assert_no_loss(&r);
    let rep = report(&r);
    let c = assert_pipe_idiom(&rep, "python3", "head", Rank::Expected);
    assert!(
        matches!(c.victim.status, tracer_user::eventlog::ExitStatus::Exited { code } if code != 0),
        "{:?}",
        c.victim.status
    );
    assert!(c.headline.contains("failed with EPIPE"), "{}", c.headline);
    assert_eq!(
        (
            rep.analysis.counts.unexpected,
            rep.analysis.counts.nonzero_exit
        ),
        (0, 0),
        "{}",
        rep.verdict
    );
    assert!(
        rep.verdict.starts_with("No unexpected deaths."),
        "{}",
        rep.verdict
    );
}

#[test]
fn node_epipe_into_a_crashed_reader_follows_from_the_crash() {
    let writer = "const fs = require('fs'); for (;;) fs.writeSync(1, 'y\\n');";
    let r = record(
        &[],
        &[
            "bash",
            "-c",
            &format!("ulimit -c 0; node -e \"{writer}\" | python3 -c '{CRASHING_READER}'"),
        ],
    );
    assert_no_loss(&r);
    let rep = report(&r);
    let c = assert_pipe_idiom(&rep, "node", "python3", Rank::Consequence);
    assert_eq!(
        c.consequence_of.as_ref().map(|l| l.of),
        Some(cert(&rep, "python3").id)
    );
    assert_eq!(rep.analysis.counts.unexpected, 1, "{}", rep.verdict);
}

#[test]
fn yes_into_head_names_head_as_the_reader_of_yes() {
    let r = record(&[], &["bash", "-c", "yes | head -c 100000 >/dev/null"]);
    assert_no_loss(&r);
    let rep = report(&r);
    let c = assert_pipe_idiom(&rep, "yes", "head", Rank::Expected);
    // The writer is the victim, named first; the reader after "its reader".
    assert!(c.headline.starts_with("`yes`"), "{}", c.headline);
    assert!(c.headline.contains("its reader `head -c"), "{}", c.headline);
}

/// A crash under a wrapper that raises its child's fatal signal on itself:
/// one unexpected death, the wrapper's its consequence.
fn wrapper_passes_the_crash_on(wrapper: &[&str], program: &str) {
    let crash = "import ctypes; ctypes.string_at(0)";
    let mut cmd: Vec<&str> = vec!["bash", "-c"];
    let line = format!("ulimit -c 0; {} python3 -c '{crash}'", wrapper.join(" "));
    cmd.push(&line);
    let r = record(&[], &cmd);
    assert_no_loss(&r);
    let rep = report(&r);
    assert_eq!(
        rep.analysis.counts.unexpected,
        1,
        "{}\n{:?}",
        rep.verdict,
        headlines(&rep)
    );
    assert!(
        rep.verdict.starts_with("1 unexpected death: "),
        "{}",
        rep.verdict
    );
    let py = cert(&rep, "python3");
    assert_eq!(
        (py.cause.kind, py.rank),
        (CauseKind::Fault, Rank::Unexpected)
    );
    let w = cert(&rep, program);
    assert_eq!(w.rank, Rank::Consequence, "{}", w.headline);
    assert_eq!(
        w.consequence_of.as_ref().map(|l| l.root),
        Some(py.id),
        "{}",
        w.headline
    );
    assert!(
        w.headline.contains("passing on the death of"),
        "{}",
        w.headline
    );
}

#[test]
fn timeout_reraising_its_childs_segv_is_its_consequence() {
    wrapper_passes_the_crash_on(&["timeout", "60"], "timeout");
}

#[test]
fn sudo_reraising_its_childs_segv_is_its_consequence() {
    require("sudo", "Debian's sudo, installed by cargo xtask test");
    wrapper_passes_the_crash_on(&["sudo", "-n"], "sudo");
}

#[test]
fn strace_reraising_its_tracees_segv_is_its_consequence() {
    require("strace", "Debian's strace, installed by cargo xtask test");
    wrapper_passes_the_crash_on(&["strace", "-f", "-o", "/dev/null"], "strace");
}

/// `set -eo pipefail` with `cat missing | grep -c x`: grep's silent exit 1
/// is the last failure, cat's (it said why) the first stage that failed;
/// the script's exit follows from cat's. The stages run in the order a
/// pipeline's do when neither is starved: cat fails once the grep stage
/// exists (a fifo the grep stage opens first; each stage then execs its
/// program, so they stay the shell's children). Without it, a loaded CI
/// machine let cat end before bash had forked grep: then cat is a command
/// the script ran before, not a stage beside grep, and no link is the rule
/// (`analysis/cascade.rs`, `pipeline_stage`).
#[test]
fn a_pipefail_script_follows_from_its_first_failing_stage() {
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    nix::unistd::mkfifo(&go, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let go = go.display();
    let script = format!(
        "set -eo pipefail; \
         {{ read _ < {go}; exec cat /nonexistent/tracer-test-input; }} \
         | {{ echo > {go}; exec grep -c x; }}"
    );
    let r = record(&[], &["bash", "-c", &script]);
    assert_no_loss(&r);
    let rep = report(&r);
    let cat = cert(&rep, "cat");
    assert_eq!(cat.rank, Rank::NonzeroExit, "{}", cat.headline);
    let bash = cert(&rep, "bash");
    assert_eq!(bash.rank, Rank::Consequence, "{}", bash.headline);
    assert_eq!(
        bash.consequence_of.as_ref().map(|l| l.of),
        Some(cat.id),
        "{}",
        bash.headline
    );
    assert!(rep.verdict.contains("`cat /nonexistent"), "{}", rep.verdict);
}
