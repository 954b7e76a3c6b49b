//! Kills from other processes: `pkill -f`, a process outside the run, and a
//! tgkill() aimed at one thread. Scenario names carry this module's path.
use std::{
    os::unix::process::ExitStatusExt,
    process::Command,
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::json;

use super::support::*;
use crate::common::*;

/// `pkill -f PATTERN` from a sibling, with a pattern no stranger can match.
#[test]
fn worker_killed_by_pkill() {
    let sc = scenario(|| {
        let nonce = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let pattern = format!("tracer-cert-{}-{nonce}", std::process::id());
        let (mut w, _) = spawn_ready(worker("sleeper", &[&pattern]));
        let mut pk = Command::new("pkill")
            .args(["-f", &pattern])
            .spawn()
            .unwrap();
        assert!(pk.wait().unwrap().success(), "pkill matched the worker");
        assert_eq!(w.wait().unwrap().signal(), Some(15));
        tag(format!("w={} pkill={} pattern={pattern}", w.id(), pk.id()));
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let (w, pk, pattern) = (
        pid(&line, "w"),
        pid(&line, "pkill"),
        field(&line, "pattern"),
    );
    let c = cert(&rep, w);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "killed_in_run")
    );
    let k = &c["killer"];
    assert_eq!(k["process"]["pid"], pk);
    assert_eq!(k["process"]["argv"], json!(["pkill", "-f", pattern]));
    assert_eq!(k["relation"], "sibling");
    let call = s(&k["call"]);
    assert!(call.ends_with(", SIGTERM)"), "{call}");
    let want =
        format!("killed by SIGTERM from `pkill -f {pattern}` (pid {pk}), a sibling, via {call}");
    assert!(s(&c["headline"]).contains(&want), "{}", c["headline"]);
    assert_verdict_leads(
        s(&rep["verdict"]),
        &format!("1 unexpected death: {}", s(&c["headline"])),
    );
}

/// The test itself (outside the run) kills a worker of the run, after
/// checking that the pid still names the worker that reported it.
#[test]
fn worker_killed_from_outside_the_run() {
    let sc = scenario(|| {
        let mut w = worker("sleeper", &[]).spawn().unwrap();
        assert_eq!(w.wait().unwrap().signal(), Some(9));
    });
    let mut victim = 0;
    let (r, rep) = certify_live(&sc, |out| {
        let line = wait_ready(out);
        victim = pid(&line, "pid");
        let start: u64 = field(&line, "start").parse().unwrap();
        assert_eq!(
            proc::start_ticks(victim),
            Some(start),
            "pid {victim} is still the worker that reported it"
        );
        let pid = nix::unistd::Pid::from_raw(victim as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
    });
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let c = cert(&rep, victim);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "killed_outside_run")
    );
    let k = &c["killer"];
    assert_eq!(k["process"]["pid"], std::process::id());
    assert_eq!(k["process"]["in_run"], false);
    assert_eq!(k["relation"], "outside_run");
    // Named by its command line (read at capture time), not a thread name.
    let me: Vec<String> = std::env::args().collect();
    assert_eq!(k["process"]["argv"][0], me[0].as_str(), "{k}");
    let via = format!("a process outside the run, via kill({victim}, SIGKILL)");
    assert!(s(&c["headline"]).contains(&via), "{}", c["headline"]);
    let foreign = rep["foreign_signals"].as_array().unwrap();
    assert!(foreign.iter().any(|f| f["direction"] == "outside_to_run"
        && f["sender"]["pid"] == std::process::id()
        && f["target"]["pid"] == victim));
}

/// tgkill() at the second thread of a multi-threaded worker kills it all.
#[test]
fn thread_directed_kill() {
    let sc = scenario(|| {
        let (mut w, line) = spawn_ready(worker("threaded", &[]));
        let tid = field(&line, "tid");
        let mut k = worker("tgkiller", &[])
            .env("CERT_PID", w.id().to_string())
            .env("CERT_TID", &tid)
            .spawn()
            .unwrap();
        assert!(k.wait().unwrap().success());
        assert_eq!(w.wait().unwrap().signal(), Some(9));
        tag(format!("w={} tid={tid} k={}", w.id(), k.id()));
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let (w, tid, killer) = (pid(&line, "w"), pid(&line, "tid"), pid(&line, "k"));
    assert_ne!(w, tid);
    let c = cert(&rep, w);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "killed_in_run")
    );
    assert_eq!(c["victim"]["status"]["signaled"]["name"], "SIGKILL");
    let sig = &c["cause"]["signal"];
    assert_eq!(
        (&sig["target_tid"], &sig["group"]),
        (&json!(tid), &json!(false))
    );
    assert_eq!(sig["code_name"], "SI_TKILL");
    let k = &c["killer"];
    assert_eq!(k["process"]["pid"], killer);
    assert_eq!(k["relation"], "sibling");
    assert_eq!(
        (&k["syscall"], &k["target_arg"], &k["tid_arg"]),
        (&json!("tgkill"), &json!(w), &json!(tid))
    );
    assert_eq!(k["aimed_at"], format!("thread {tid} of pid {w}"));
    let want = format!("via tgkill({w}, {tid}, SIGKILL) — aimed at thread {tid}");
    assert!(s(&c["headline"]).contains(&want), "{}", c["headline"]);
}
