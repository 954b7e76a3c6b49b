//! The tracer's own stops on the real kernel: a CI cancellation (SIGINT to
//! the tracer, forwarded to the job) is "the run was cancelled", expected,
//! whatever bash and Node do with it; `--timeout` says it expired. A CI
//! runner's own cancellation of the job (GitHub's SIGINT, SIGTERM, SIGKILL;
//! gitlab-runner's group SIGKILL; cargo-nextest's SIGTERM then SIGKILL to a
//! test's group) is one finding that leads the verdict (analysis/cancel.rs),
//! and a `tracer daemon` that watched the job names it on line 1 too, from
//! the ledger its looks merged (live/ledger/cancel.rs).
//!
//! Hermetic: the tests signal only the tracer they spawned, and the runner
//! scripts only the pids and the process group of the job the test started.
use std::{
    io::Write,
    os::unix::process::ExitStatusExt,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::caught::support::*;
use crate::certificates::support::*;
use crate::common::{metrics_daemon::Reaped, *};
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

/// A runner of `name` outside the run: bash exec'd through a link of that
/// name, so its process (and the thread that sends) is called `name`, as
/// the CI runner's is.
fn outside_runner(dir: &std::path::Path, name: &str, script: &str, args: &[String]) {
    let link = dir.join(name);
    std::os::unix::fs::symlink(which_bash(), &link).unwrap();
    let status = std::process::Command::new(&link)
        .args(["-c", script, "runner"])
        .args(args)
        .status()
        .unwrap();
    assert!(status.success(), "the runner script failed: {status}");
}

fn which_bash() -> std::path::PathBuf {
    ["/usr/bin/bash", "/bin/bash"]
        .iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .expect("bash")
}

/// Words of a `ready` line: `key=pid`.
fn ready_pid(words: &str, key: &str) -> u32 {
    crate::certificates::support::pid(words, key)
}

/// The job: bash waiting on node, a sleep beside it; `ready` with the pids.
const JOB: &str = "sleep 60 & S=$! node -e \"console.log('ready bash=' + process.ppid + \
                   ' node=' + process.pid + ' sleep=' + process.env.S); \
                   setTimeout(() => {}, 60000)\"; wait";

/// Records JOB with the leaks waited for (the runner's last SIGKILLs come
/// after the command's own end), has `runner` (name, script) act on its
/// pids, and returns the recording, its report and the pids.
fn cancelled_job(name: &str, script: &str) -> (Recorded, serde_json::Value, [u32; 3]) {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let extra = ["--leaks", "wait", "--leak-grace", "60s"];
    let (mut t, words) = spawn_ready(record_command(dir.path(), &extra, &["bash", "-c", JOB]));
    let pids = ["bash", "node", "sleep"].map(|k| ready_pid(&words, k));
    wait_in_do_wait(pids[0]);
    let bin = tempfile::tempdir().unwrap();
    let pgid = nix::unistd::getpgid(Some(nix::unistd::Pid::from_raw(pids[0] as i32))).unwrap();
    let mut args: Vec<String> = pids.iter().map(u32::to_string).collect();
    args.push(pgid.to_string());
    outside_runner(bin.path(), name, script, &args);
    let status = t.wait().unwrap();
    let output = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    let r = Recorded::read(dir, output);
    let rep = checked_report(&r);
    // Neither the deaths nor the runner's signals fail `--fail-on`: the
    // runner has already marked the job cancelled.
    let again = tempfile::tempdir().unwrap();
    let judged = tracer()
        .arg("report")
        .arg(r.path("events.ndjson"))
        .args(["--output", again.path().to_str().unwrap()])
        .args(["--fail-on", "foreign-signal,unexpected-death"])
        .output()
        .unwrap();
    assert!(judged.status.success(), "{judged:?}");
    (r, rep, pids)
}

/// Every death is the cancellation's: expected, `cancelled`, killed by the
/// runner, and the report's first line says so.
fn assert_cancelled(r: &Recorded, rep: &serde_json::Value, runner: u32, lead: &str) {
    assert_eq!(rep["counts"]["unexpected"], 0, "{}", rep["verdict"]);
    assert_verdict_leads(s(&rep["verdict"]), lead);
    let md = markdown(r);
    assert!(
        md.lines().next().is_some_and(|l| l.contains(lead)),
        "report.md's line 1: {md}"
    );
    for c in certs(rep) {
        assert_eq!(s(&c["rank"]), "expected", "{c:#}");
        assert_eq!(c["cause"]["cancelled"], true, "{c:#}");
        if !c["killer"].is_null() {
            assert_eq!(c["killer"]["process"]["pid"], runner, "{c:#}");
        }
    }
    let foreign = rep["foreign_signals"].as_array().unwrap();
    assert!(!foreign.is_empty());
    assert!(
        foreign.iter().all(|f| f["cancellation"] == true),
        "{foreign:?}"
    );
}

#[test]
fn github_runners_cancellation_is_one_finding_on_line_1() {
    // GitHub's order with short waits (the signature reads no interval):
    // SIGINT to the step's process, SIGTERM, then SIGKILL to what is left
    // of the tree. bash waits on node through the SIGINT, dies of the
    // SIGTERM; node and sleep die of the SIGKILLs.
    let script = "kill -INT $1; sleep 0.2; kill -TERM $1; sleep 0.2; kill -KILL $2 $3";
    let (r, rep, [bash, node, sleep]) = cancelled_job("Runner.Worker", script);
    let c = &rep["cancellation"];
    let runner = c["sender"]["pid"].as_u64().unwrap() as u32;
    assert_cancelled(
        &r,
        &rep,
        runner,
        "The job was cancelled by GitHub's runner (`Runner.Worker`, pid",
    );
    assert_eq!(c["runner"], "github");
    let sigs: Vec<&str> = c["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| s(&x["sig_name"]))
        .collect();
    assert_eq!(sigs, ["SIGINT", "SIGTERM", "SIGKILL", "SIGKILL"]);
    assert_eq!(c["deaths"], 3);
    assert!(
        s(&c["summary"]).contains(&format!("SIGINT to `bash` (pid {bash}), SIGTERM to it "))
            && s(&c["summary"]).contains("then SIGKILL to 2 processes"),
        "{}",
        c["summary"]
    );
    for (pid, sig) in [(bash, "SIGTERM"), (node, "SIGKILL"), (sleep, "SIGKILL")] {
        let x = cert(&rep, pid);
        assert_eq!(s(&x["cause"]["signal"]["sig_name"]), sig, "{x:#}");
        assert!(
            s(&x["headline"]).ends_with(": the job was cancelled by GitHub's runner"),
            "{}",
            x["headline"]
        );
        assert_eq!(
            s(&x["rank_reason"]),
            "the job was cancelled by GitHub's runner"
        );
    }
}

#[test]
fn gitlab_runners_group_kill_is_one_finding_on_line_1() {
    // gitlab-runner's shell executor: SIGKILL to the job's process group.
    let (r, rep, pids) = cancelled_job("gitlab-runner", "kill -KILL -- -$4");
    let c = &rep["cancellation"];
    let runner = c["sender"]["pid"].as_u64().unwrap() as u32;
    assert_cancelled(
        &r,
        &rep,
        runner,
        "The job was cancelled by gitlab-runner (`gitlab-runner`, pid",
    );
    assert_eq!(c["runner"], "gitlab");
    assert!(
        s(&c["summary"]).contains(": SIGKILL to process group "),
        "{}",
        c["summary"]
    );
    for pid in pids {
        assert_eq!(
            s(&cert(&rep, pid)["cause"]["signal"]["sig_name"]),
            "SIGKILL"
        );
    }
}

#[test]
fn nextests_terminator_names_the_runner_of_the_run() {
    // cargo-nextest inside the run: a test in a process group of its own
    // (`set -m`) that ignores SIGTERM; SIGTERM to the group, then SIGKILL.
    // The test says it is set up through a fifo before the runner acts.
    require_root();
    let bin = tempfile::tempdir().unwrap();
    let nextest = bin.path().join("cargo-nextest");
    std::os::unix::fs::symlink(which_bash(), &nextest).unwrap();
    let fifo = bin.path().join("up");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let script =
        "set -m; bash -c 'trap \"\" TERM; echo up > \"$0\"; exec sleep 60' \"$1\" & T=$!; \
                  read _ < \"$1\"; kill -TERM -- -$T; sleep 0.2; kill -KILL -- -$T; wait $T; true";
    let r = record(
        &[],
        &[
            nextest.to_str().unwrap(),
            "-c",
            script,
            "nextest",
            fifo.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let rep = checked_report(&r);
    let c = &rep["cancellation"];
    assert_eq!(c["runner"], "nextest", "{rep:#}");
    assert_eq!(c["sender_in_run"], true);
    assert_eq!(c["sender"]["pid"], root(&r).pid);
    assert_verdict_leads(
        s(&rep["verdict"]),
        "The tests were stopped by cargo-nextest (`cargo-nextest`, pid",
    );
    let sigs: Vec<&str> = c["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| s(&x["sig_name"]))
        .collect();
    assert_eq!(sigs, ["SIGTERM", "SIGKILL"]);
    assert_eq!(rep["counts"]["unexpected"], 0);
    let sleep = certs(&rep)
        .iter()
        .find(|x| s(&x["victim"]["command"]).starts_with("sleep"))
        .expect("the test's certificate");
    assert_eq!(s(&sleep["rank"]), "expected");
    assert_eq!(
        s(&sleep["rank_reason"]),
        "stopped by cargo-nextest, the run's own test runner"
    );
}

/// SIGKILL to a process of the test's own on drop, if it is still the one
/// the test started (pid and start time): a guard for what the test's
/// children fork, which `Reaped` does not reach.
struct KillIfRunning(u32, Option<u64>);

impl KillIfRunning {
    fn new(pid: u32) -> Self {
        KillIfRunning(pid, crate::common::proc::start_ticks(pid))
    }
}

impl Drop for KillIfRunning {
    fn drop(&mut self) {
        if self
            .1
            .is_some_and(|start| crate::common::proc::running(self.0, start))
        {
            let pid = nix::unistd::Pid::from_raw(self.0 as i32);
            let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
        }
    }
}

/// Signals from outside into the run the daemon's looks have handed on so
/// far (its `tracer_foreign_signals_total`): a look has analysed each.
fn foreign_handed_on(addr: &str) -> u64 {
    let (_, text) = crate::common::metrics_daemon::get(addr, "/metrics", Duration::from_secs(5))
        .unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with("tracer_foreign_signals_total{direction=\"outside_to_run\"}"))
        .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map_or(0, |n| n as u64)
}

/// Bounded wait until the daemon's looks have handed on `n` signals from
/// outside (a condition, not a sleep: the machine may be loaded).
fn wait_handed_on(addr: &str, n: u64, said: &crate::common::metrics_daemon::StderrLines) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while foreign_handed_on(addr) < n {
        assert!(
            Instant::now() < deadline,
            "the daemon's looks never handed on {n} signals from outside: {:?}",
            said.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Line 1 of the report.md in `dir`.
fn line_1(dir: &std::path::Path) -> String {
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    md.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_daemon_names_githubs_cancellation_on_line_1() {
    // A `tracer daemon` watches a step of the test's own (`--root-pid`):
    // bash, which ignores SIGINT and SIGTERM (so does the sleep it forks:
    // an ignored disposition is inherited). GitHub's runner, outside the
    // scope (bash run through a link named `Runner.Worker`), does its three
    // steps: SIGINT to the step's root, SIGTERM to it, then SIGKILL to what
    // is left of the tree. Each step waits until the daemon's looks have
    // handed on the one before (its metrics), so the SIGINT, the SIGTERM
    // and the SIGKILLs reach the daemon's ledger in different looks. Its
    // stop names the cancellation on line 1, as `tracer report` of its log
    // does, and `--fail-on` passes: the runner has marked the job.
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let step = "trap '' INT TERM; read go; sleep 600 & echo \"ready bash=$$ sleep=$!\"; wait";
    let mut step = Reaped(
        Command::new(which_bash())
            .args(["-c", step])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut daemon = Reaped(
        tracer()
            .args(["daemon", "--output"])
            .arg(&out)
            .args(["--root-pid", &step.0.id().to_string()])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .args(["--metrics-interval", "200ms"])
            .args(["--fail-on", "foreign-signal,unexpected-death"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Watching, in its own words: the step is seeded as `existing`.
    let (addr, said) = crate::common::metrics_daemon::metrics_addr(&mut daemon.0);
    step.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut stdout = std::io::BufReader::new(step.0.stdout.take().unwrap());
    let words = crate::common::wait_ready(&mut stdout);
    let (bash, sleep) = (ready_pid(&words, "bash"), ready_pid(&words, "sleep"));
    let _sleep = KillIfRunning::new(sleep);
    assert_eq!(bash, step.0.id());

    // The runner: each line on its stdin is its next step.
    let bin = tempfile::tempdir().unwrap();
    let link = bin.path().join("Runner.Worker");
    std::os::unix::fs::symlink(which_bash(), &link).unwrap();
    let steps = "read _; kill -INT $1; read _; kill -TERM $1; read _; kill -KILL $1 $2";
    let mut runner = Reaped(
        Command::new(&link)
            .args(["-c", steps, "runner", &bash.to_string(), &sleep.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let runner_pid = runner.0.id();
    let mut to_runner = runner.0.stdin.take().unwrap();
    for handed_on in 1..=2 {
        to_runner.write_all(b"next\n").unwrap();
        wait_handed_on(&addr, handed_on, &said);
    }
    to_runner.write_all(b"next\n").unwrap();
    assert!(runner.0.wait().unwrap().success());
    // The step's root and its sleep died of the SIGKILLs.
    let status = step.0.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{status:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while crate::common::proc::alive(sleep) {
        assert!(Instant::now() < deadline, "the sleep outlived its SIGKILL");
        std::thread::sleep(Duration::from_millis(20));
    }
    wait_handed_on(&addr, 4, &said);

    // The stop: its reports come from the ledger, merged look by look.
    kill(daemon.0.id(), Signal::SIGTERM);
    let status = daemon.0.wait().unwrap();
    let err = said.lock().unwrap().join("\n");
    assert_eq!(status.code(), Some(0), "--fail-on passes: {err}");
    let first = line_1(&out);
    let lead = format!(
        "The job was cancelled by GitHub's runner (`Runner.Worker`, pid {runner_pid}): \
         SIGINT to `bash` (pid {bash}), SIGTERM to it "
    );
    assert!(first.starts_with(&lead), "the daemon's line 1: {first}");
    assert!(
        first.contains(", then SIGKILL to 2 processes ")
            && first.ends_with("No unexpected deaths."),
        "{first}"
    );
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let c = &rep["cancellation"];
    assert_eq!(c["runner"], "github", "{rep:#}");
    let sigs: Vec<&str> = c["signals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| s(&x["sig_name"]))
        .collect();
    assert_eq!(sigs, ["SIGINT", "SIGTERM", "SIGKILL", "SIGKILL"]);
    assert_eq!(c["deaths"], 2, "{rep:#}");
    assert_eq!(rep["counts"]["unexpected"], 0);
    for pid in [bash, sleep] {
        let x = cert(&rep, pid);
        assert_eq!(x["cause"]["cancelled"], true, "{x:#}");
        assert_eq!(s(&x["rank"]), "expected", "{x:#}");
    }

    // `tracer report` of the daemon's log says the same on line 1.
    let again = tempfile::tempdir().unwrap();
    let judged = report_cmd(&out, again.path());
    assert!(judged.status.success(), "{judged:?}");
    assert_eq!(first, line_1(again.path()));
}
