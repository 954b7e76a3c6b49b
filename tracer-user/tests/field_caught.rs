//! Caught, then re-raised or exited, on the real kernel with the real
//! programs: Node's default SIGTERM/SIGINT handling and an explicit handler,
//! bash's cooperative exit on SIGINT, Python handlers that exit(1) or
//! re-raise, `pkill -f` against a Node runner, and a CI cancellation (SIGINT
//! to the tracer). The certificate names the sender of the caught signal,
//! never "killed by itself".
//!
//! Hermetic: each scenario signals only processes it spawned (the `pkill -f`
//! pattern is unique to the run and absent from every ancestor's argv), and
//! synchronises on what the children print or on /proc state, never on time.
mod common;

#[allow(dead_code)]
#[path = "certificates/support.rs"]
mod support;

use std::{
    io::{BufRead, BufReader},
    os::unix::process::{CommandExt, ExitStatusExt},
    process::{Child, Command, Stdio},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use common::*;
use nix::{sys::signal::Signal, unistd::Pid};
use serde_json::Value;
use support::*;

/// Every child naps at most this long, so a failed test leaves nothing for long.
const NODE_NAP: &str = "setTimeout(() => {}, 60000)";

fn tag(line: String) {
    println!("{TAG}{line}");
}

fn pid(line: &str, key: &str) -> u32 {
    field(line, key).parse().unwrap()
}

fn unique(what: &str) -> String {
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("h1-{what}-{}-{nonce}", std::process::id())
}

/// Spawns `cmd` with stdout piped and returns once it printed a line
/// starting with `ready` (the rest of that line is returned). The caller
/// waits for the child it is handed.
#[allow(clippy::zombie_processes)]
fn spawn_ready(mut cmd: Command) -> (Child, String) {
    let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            let status = child.wait().unwrap();
            panic!("child never got ready: {status}");
        }
        if let Some(rest) = line.trim_end().strip_prefix("ready") {
            let rest = rest.trim().to_string();
            // Keep draining so a chatty child never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
            return (child, rest);
        }
    }
}

/// Waits (bounded) until `pid` sleeps in wait(): a shell waiting for its
/// foreground child, the moment its SIGINT handling is the cooperative one.
fn wait_in_do_wait(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default() != "do_wait" {
        assert!(Instant::now() < deadline, "pid {pid} never waited");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill(pid: u32, sig: Signal) {
    nix::sys::signal::kill(Pid::from_raw(pid as i32), sig).unwrap();
}

/// The chain every caught-then-re-raised certificate shows.
fn assert_reraised(c: &Value, sig: &str, code: &str) {
    let re = &c["cause"]["reraised"];
    assert_eq!(
        (s(&re["sig_name"]), s(&re["code_name"])),
        (sig, code),
        "{c:#}"
    );
    assert_eq!(c["cause"]["signal"]["sig_name"], sig);
    assert!(c["cause"]["signal"]["seq"].as_u64() < re["seq"].as_u64());
    let evidence = c["evidence"].as_array().unwrap();
    assert!(
        evidence.contains(&re["seq"]),
        "the re-raise stays in the evidence"
    );
    let h = s(&c["headline"]);
    assert!(h.contains(&format!("caught {sig} from ")), "{h}");
    assert!(h.contains("and re-raised it on itself via "), "{h}");
    assert!(!h.contains("sent by itself"), "{h}");
}

#[test]
fn node_reraises_sigterm_from_pkill() {
    const NAME: &str = "node_reraises_sigterm_from_pkill";
    if in_scenario(NAME) {
        let marker = unique("pkill");
        let mut node = Command::new("node");
        node.args(["-e", &format!("console.log('ready'); {NODE_NAP}"), &marker]);
        let (mut n, _) = spawn_ready(node);
        let mut pk = Command::new("pkill")
            .args(["-TERM", "-f", &marker])
            .spawn()
            .unwrap();
        assert!(pk.wait().unwrap().success(), "pkill matched node");
        assert_eq!(n.wait().unwrap().signal(), Some(15));
        tag(format!("node={} pkill={} marker={marker}", n.id(), pk.id()));
        return;
    }
    let (r, rep) = certify(NAME);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let (n, pk, marker) = (
        pid(&line, "node"),
        pid(&line, "pkill"),
        field(&line, "marker"),
    );
    let c = cert(&rep, n);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "killed_in_run")
    );
    assert_eq!(c["killer"]["process"]["pid"], pk);
    assert_eq!(c["killer"]["relation"], "sibling");
    assert_reraised(c, "SIGTERM", "SI_TKILL");
    let want = format!("caught SIGTERM from `pkill -TERM -f {marker}` (pid {pk}), a sibling, via ");
    assert!(s(&c["headline"]).contains(&want), "{}", c["headline"]);
    assert_eq!(
        s(&rep["verdict"]),
        format!("1 unexpected death: {}", s(&c["headline"]))
    );
}

#[test]
fn node_handlers_reraise_their_parents_signals() {
    const NAME: &str = "node_handlers_reraise_their_parents_signals";
    if in_scenario(NAME) {
        // An explicit handler that cleans up and re-raises with process.kill,
        // and Node's own SIGINT handling (it catches, then raise()s).
        let handler = "process.on('SIGTERM', () => { console.error('cleaning up'); \
                       process.removeAllListeners('SIGTERM'); process.kill(process.pid, 'SIGTERM'); }); \
                       console.log('ready');";
        let mut a = Command::new("node");
        a.args(["-e", &format!("{handler} {NODE_NAP}")]);
        let (mut a, _) = spawn_ready(a);
        let mut b = Command::new("node");
        b.args(["-e", &format!("console.log('ready'); {NODE_NAP}")]);
        let (mut b, _) = spawn_ready(b);
        kill(a.id(), Signal::SIGTERM);
        kill(b.id(), Signal::SIGINT);
        assert_eq!(a.wait().unwrap().signal(), Some(15));
        assert_eq!(b.wait().unwrap().signal(), Some(2));
        tag(format!("a={} b={}", a.id(), b.id()));
        return;
    }
    let (r, rep) = certify(NAME);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let me = root(&r).pid;
    let a = cert(&rep, pid(&line, "a"));
    assert_eq!(
        (s(&a["rank"]), s(&a["killer"]["relation"])),
        ("expected", "parent")
    );
    assert_eq!(a["killer"]["process"]["pid"], me);
    assert_reraised(a, "SIGTERM", "SI_USER");
    assert!(s(&a["last_words"]["text"]).contains("cleaning up"));
    let b = cert(&rep, pid(&line, "b"));
    assert_eq!(
        (s(&b["rank"]), s(&b["killer"]["relation"])),
        ("expected", "parent")
    );
    assert_reraised(b, "SIGINT", "SI_TKILL");
    assert!(s(&b["rank_reason"]).contains("re-raised it on itself"));
    assert_eq!(rep["counts"]["unexpected"], 0, "{}", rep["verdict"]);
}

#[test]
fn python_handlers_exit_or_reraise() {
    const NAME: &str = "python_handlers_exit_or_reraise";
    if in_scenario(NAME) {
        let script = |handler: &str| {
            format!(
                "import signal, sys, time\n\
                 def h(n, f):\n    {handler}\n\
                 signal.signal(signal.SIGTERM, h)\n\
                 print('ready', flush=True)\ntime.sleep(60)\n"
            )
        };
        let exit1 = script("sys.stderr.write('worker: interrupted\\n'); sys.exit(1)");
        let reraise = script("signal.signal(n, signal.SIG_DFL); signal.raise_signal(n)");
        let mut a = Command::new("python3");
        a.args(["-c", &exit1]);
        let (mut a, _) = spawn_ready(a);
        let mut b = Command::new("python3");
        b.args(["-c", &reraise]);
        let (mut b, _) = spawn_ready(b);
        // A sibling's kill for the first, the parent's own for the second.
        let mut k = Command::new("kill")
            .args(["-TERM", &a.id().to_string()])
            .spawn()
            .unwrap();
        assert!(k.wait().unwrap().success());
        kill(b.id(), Signal::SIGTERM);
        assert_eq!(a.wait().unwrap().code(), Some(1));
        assert_eq!(b.wait().unwrap().signal(), Some(15));
        tag(format!("a={} b={} kill={}", a.id(), b.id(), k.id()));
        return;
    }
    let (r, rep) = certify(NAME);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let (k, me) = (pid(&line, "kill"), root(&r).pid);
    let a = cert(&rep, pid(&line, "a"));
    assert_eq!(
        (s(&a["rank"]), s(&a["cause"]["kind"])),
        ("unexpected", "killed_in_run")
    );
    assert_eq!(a["victim"]["status"]["exited"]["code"], 1);
    assert_eq!(a["cause"]["handled_then_exited"], 1);
    assert_eq!(a["killer"]["process"]["pid"], k);
    assert_eq!(a["killer"]["relation"], "sibling");
    let h = s(&a["headline"]);
    assert!(
        h.contains(&format!(
            "caught SIGTERM from `kill -TERM {}` (pid {k}), a sibling",
            a["victim"]["pid"]
        )) && h.contains("and exited with code 1 ")
            && !h.contains("no signal involved"),
        "{h}"
    );
    let b = cert(&rep, pid(&line, "b"));
    assert_eq!(
        (s(&b["rank"]), s(&b["killer"]["relation"])),
        ("expected", "parent")
    );
    assert_eq!(b["killer"]["process"]["pid"], me);
    assert_reraised(b, "SIGTERM", "SI_TKILL");
}

#[test]
fn bash_reraises_sigint_after_its_foreground_child() {
    const NAME: &str = "bash_reraises_sigint_after_its_foreground_child";
    if in_scenario(NAME) {
        // bash waits for its foreground child; SIGINT to the group kills the
        // child, and bash then kills itself with SIGINT ("wait and
        // cooperative exit"). The group kill comes from a sibling of bash.
        let mut sh = Command::new("bash");
        sh.args(["-c", "sh -c 'echo ready; exec sleep 60'; echo after"])
            .process_group(0);
        let (mut sh, _) = spawn_ready(sh);
        wait_in_do_wait(sh.id());
        let group = format!("-{}", sh.id());
        let mut k = Command::new("kill")
            .args(["-INT", "--", &group])
            .spawn()
            .unwrap();
        assert!(k.wait().unwrap().success());
        assert_eq!(sh.wait().unwrap().signal(), Some(2));
        tag(format!("bash={} kill={}", sh.id(), k.id()));
        return;
    }
    let (r, rep) = certify(NAME);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let (bash, k) = (pid(&line, "bash"), pid(&line, "kill"));
    let c = cert(&rep, bash);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "killed_in_run")
    );
    assert_eq!(c["killer"]["process"]["pid"], k);
    assert_eq!(c["killer"]["relation"], "sibling");
    assert_eq!(c["killer"]["target_arg"], -i64::from(bash));
    assert_reraised(c, "SIGINT", "SI_USER");
    assert_eq!(
        c["cause"]["reraised"]["group"], true,
        "kill(getpid(), SIGINT)"
    );
    // Its child died of the same call, with nothing to re-raise.
    let child = certs(&rep)
        .iter()
        .find(|x| x["victim"]["pid"] != bash && x["killer"]["process"]["pid"] == k)
        .expect("the foreground child's certificate");
    assert_eq!(child["killer"]["relation"], "unrelated_in_run");
    assert!(child["cause"].get("reraised").is_none());
}

#[test]
fn ci_cancellation_is_expected_whatever_bash_and_node_do() {
    // SIGINT to the tracer itself, as a CI runner cancelling the job: the
    // tracer forwards it to the job's group; node catches and re-raises,
    // bash (waiting for node) re-raises after node died of it.
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let script =
        format!("node -e \"console.log('ready ' + process.ppid); {NODE_NAP}\"; echo after");
    let mut cmd = tracer();
    cmd.arg("record")
        .arg("--output")
        .arg(dir.path())
        .args(["--", "bash", "-c", &script])
        .stderr(Stdio::piped());
    let (mut t, bash) = spawn_ready(cmd);
    let bash: u32 = bash.parse().unwrap();
    wait_in_do_wait(bash);
    kill(t.id(), Signal::SIGINT);
    let mut stderr = Vec::new();
    std::io::Read::read_to_end(&mut t.stderr.take().unwrap(), &mut stderr).unwrap();
    let status = t.wait().unwrap();
    let log = tracer_user::eventlog::read_log(&dir.path().join("events.ndjson")).unwrap();
    let output = std::process::Output {
        status,
        stdout: Vec::new(),
        stderr,
    };
    let r = Recorded { dir, output, log };
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
fn python_faulthandler_reraise_is_the_fault() {
    let r = record(
        &[],
        &[
            "python3",
            "-X",
            "faulthandler",
            "-c",
            "import ctypes; ctypes.string_at(0)",
        ],
    );
    assert_eq!(r.code(), Some(128 + 11), "{}", r.stderr());
    let rep = checked_report(&r);
    let c = cert(&rep, root(&r).pid);
    assert_eq!(s(&c["cause"]["kind"]), "fault", "{c:#}");
    assert!(c.get("killer").is_none());
    assert_eq!(c["cause"]["reraised"]["sig_name"], "SIGSEGV");
    assert!(
        s(&c["headline"]).contains("; its handler caught it and re-raised it via tgkill("),
        "{}",
        c["headline"]
    );
    assert!(s(&c["last_words"]["line"]).contains("Segmentation fault"));
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
