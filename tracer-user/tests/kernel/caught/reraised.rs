//! Caught, then re-raised or exited, on the real kernel with the real
//! programs: Node's default SIGTERM/SIGINT handling and an explicit handler,
//! bash's cooperative exit on SIGINT, Python handlers that exit(1) or
//! re-raise (and faulthandler re-raising a fault), `pkill -f` against a Node
//! runner. The certificate names the sender of the caught signal, never
//! "killed by itself". The tracer's own stops are in cancelled.rs.
//!
//! Hermetic: each scenario signals only processes it spawned (the `pkill -f`
//! pattern is unique to the run and absent from every ancestor's argv), and
//! synchronises on what the children print or on /proc state, never on time.
use std::{
    os::unix::process::{CommandExt, ExitStatusExt},
    process::Command,
};

use crate::caught::support::*;
use crate::certificates::support::*;
use crate::common::*;
use nix::sys::signal::Signal;

#[test]
fn node_reraises_sigterm_from_pkill() {
    let sc = scenario(|| {
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
    });
    let (r, rep) = certify(&sc);
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
    // The line under the verdict: pkill's pattern matched the sibling.
    let next = &rep["next_step"]["advice"];
    assert_eq!(
        (s(&next["kind"]), s(&next["pattern"])),
        ("pkill_pattern", marker.as_str())
    );
    assert_eq!(next["pkill"]["pid"], pk);
    assert_eq!(next["certificates"], serde_json::json!([c["id"]]));
    let line = s(&rep["next_step"]["line"]);
    assert!(
        line.ends_with("anchor the pattern, or kill by pid"),
        "{line}"
    );
}

#[test]
fn node_handlers_reraise_their_parents_signals() {
    let sc = scenario(|| {
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
    });
    let (r, rep) = certify(&sc);
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
    let sc = scenario(|| {
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
    });
    let (r, rep) = certify(&sc);
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
    let sc = scenario(|| {
        // bash waits for its foreground child; SIGINT to the group kills the
        // child, and bash then kills itself with SIGINT ("wait and
        // cooperative exit"). The group kill comes from a sibling of bash.
        let mut sh = Command::new("bash");
        sh.args(["-c", "sh -c 'echo ready; exec sleep 60'; echo after"])
            .process_group(0);
        let (mut sh, _) = spawn_ready(sh);
        wait_child_runs(sh.id(), "sleep");
        wait_in_do_wait(sh.id());
        let group = format!("-{}", sh.id());
        let mut k = Command::new("kill")
            .args(["-INT", "--", &group])
            .spawn()
            .unwrap();
        assert!(k.wait().unwrap().success());
        assert_eq!(sh.wait().unwrap().signal(), Some(2));
        tag(format!("bash={} kill={}", sh.id(), k.id()));
    });
    let (r, rep) = certify(&sc);
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
