//! End-to-end death certificates: real scenarios under the real `tracer
//! record`, checked against the report.json a human investigator would
//! write, and against `tracer report` re-rendering it byte for byte.
//!
//! Hermetic: every signal goes to a process the scenario spawned (or, for the
//! outside kill, to a pid whose start time the test checked first); the
//! cgroup is unique and removed; `pkill` gets a pattern unique to this run.
mod others;
mod roles;
pub(crate) mod support;

use std::{
    os::unix::process::{CommandExt, ExitStatusExt},
    process::{Command, Stdio},
};

use serde_json::json;
use support::*;

use crate::common::*;

/// Not a scenario: the body of every re-exec'd worker (see `roles.rs`).
#[test]
fn role() {
    if let Ok(role) = std::env::var(ROLE_ENV) {
        roles::run(&role);
    }
}

/// Seed 000: a worker kills its sibling's process group (and probes a pid
/// that cannot exist); the runner then exits 3.
#[test]
fn sibling_killed_by_a_process_group_kill() {
    let sc = scenario(|| {
        let mut sh = Command::new("sh");
        sh.args(["-c", "sleep 60 & echo ready; wait"])
            .process_group(0);
        let (mut b, _) = spawn_ready(sh);
        let mut a = worker("group_killer", &[])
            .env("CERT_PGID", b.id().to_string())
            .spawn()
            .unwrap();
        assert!(a.wait().unwrap().success());
        assert_eq!(b.wait().unwrap().signal(), Some(9));
        tag(format!("a={} b={}", a.id(), b.id()));
        std::process::exit(3);
    });
    let (r, rep) = certify(&sc);
    assert_eq!(
        r.code(),
        Some(3),
        "exit status passes through: {}",
        r.stderr()
    );
    let line = scenario_tag(&r);
    let (a, b) = (pid(&line, "a"), pid(&line, "b"));

    let c = cert(&rep, b);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "killed_in_run")
    );
    let k = &c["killer"];
    assert_eq!(k["process"]["pid"], a);
    assert_eq!(k["relation"], "sibling");
    assert_eq!(k["syscall"], "kill");
    assert_eq!(k["target_arg"], -i64::from(b));
    assert_eq!(k["aimed_at"], format!("process group {b}"));
    assert_eq!(k["deliveries"], 2, "sh and its sleep");
    let via = format!("a sibling, via kill(-{b}, SIGKILL) — a process-group kill of group {b}");
    assert!(s(&c["headline"]).contains(&via), "{}", c["headline"]);
    assert!(
        s(&c["headline"]).starts_with(&format!(
            "`sh -c sleep 60 & echo ready; wait` (pid {b}) killed by SIGKILL from `"
        )),
        "{}",
        c["headline"]
    );
    // The sleep in B's group died of the same call.
    let other = certs(&rep)
        .iter()
        .find(|c| c["victim"]["pid"] != b && c["killer"]["call_seq"] == k["call_seq"])
        .expect("the group's other member");
    assert_eq!(other["killer"]["relation"], "unrelated_in_run");
    let verdict = s(&rep["verdict"]);
    assert_verdict_leads(
        verdict,
        &format!("2 unexpected deaths: {}", s(&c["headline"])),
    );
    // Unless the 300-character verdict had to cut its clauses (the test
    // names of #21 lengthen the headline): then the certificates say it.
    assert!(
        verdict.contains(&format!(
            "(the same call also killed pid {})",
            other["victim"]["pid"]
        )) || verdict.ends_with('…'),
        "{verdict}"
    );
    // The runner's own exit 3, right after its child B was killed, follows
    // from that kill: a consequence, ranked last, pointing back to B.
    assert_ranked(&rep);
    let last = certs(&rep).last().unwrap();
    assert_eq!(last["victim"]["pid"], root(&r).pid);
    assert_eq!(last["victim"]["status"], json!({"exited": {"code": 3}}));
    assert_eq!(last["rank"], "consequence");
    assert_eq!(last["consequence_of"]["root"], c["id"]);
    // The fabricated pid left only a failed call: a near miss.
    let miss = rep["near_misses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["target_arg"] == NO_SUCH_PID)
        .expect("near miss");
    let sender = &rep["ancestors"][miss["sender_id"].as_u64().unwrap() as usize];
    assert_eq!(
        (&sender["pid"], &miss["errno"], &miss["sig_name"]),
        (&json!(a), &json!("ESRCH"), &json!("SIGKILL"))
    );
    assert!(markdown(&r).contains(&format!("`kill({NO_SUCH_PID}, SIGKILL)`")));
}

/// A real memcg OOM: the hog is chosen, the allocator only triggered it.
#[test]
fn memcg_oom_kill_blames_the_kernel() {
    let sc = scenario(|| {
        let (mut hog, _) = spawn_ready(worker("hog", &[]));
        let mut alloc = worker("alloc", &[])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let a = alloc.wait().unwrap();
        // A memcg OOM can fire twice before the first victim's memory is
        // reaped: the allocator may be a second victim (of the kernel).
        assert!(a.success() || a.signal() == Some(9), "{a:?}");
        assert_eq!(hog.wait().unwrap().signal(), Some(9));
        tag(format!("hog={} alloc={}", hog.id(), alloc.id()));
    });
    let cg = cgroup::TestCgroup::with_memory_limit(256 << 20);
    let procs = cg.dir.join("cgroup.procs");
    let (r, rep) = certify_env(&sc, &[("CERT_CGROUP_PROCS", procs.to_str().unwrap())]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let line = scenario_tag(&r);
    let (hog, alloc) = (pid(&line, "hog"), pid(&line, "alloc"));
    let c = cert(&rep, hog);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "oom")
    );
    assert!(c.get("killer").is_none(), "nobody but the kernel is blamed");
    let o = &c["oom"];
    assert_eq!(o["memcg"]["path"], format!("/{}", cg.name()));
    assert_eq!(o["limit_bytes"], 256 << 20);
    assert_eq!(o["trigger"]["pid"], alloc);
    assert_eq!(o["trigger_is_victim"], false);
    let want = format!(
        "killed by the kernel OOM killer (memcg /{}, limit 256 MiB",
        cg.name()
    );
    assert!(s(&c["headline"]).contains(&want), "{}", c["headline"]);
    assert!(
        certs(&rep)
            .iter()
            .all(|c| c["killer"]["process"]["pid"] != alloc),
        "the allocating task is never named a killer"
    );
    // If the kernel took the allocator too, that is an OOM kill as well.
    for c in certs(&rep).iter().filter(|c| c["victim"]["pid"] == alloc) {
        assert_eq!(s(&c["cause"]["kind"]), "oom", "{c}");
    }
    assert!(markdown(&r).contains("it is **not** the culprit"));
}

/// The traced command itself dereferences null: a kernel-raised SIGSEGV.
#[test]
fn segfault_is_a_fault() {
    let sc = scenario(|| {
        roles::run("segv");
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(128 + 11), "128+SIGSEGV passes through");
    let c = cert(&rep, root(&r).pid);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "fault")
    );
    assert_eq!(c["cause"]["signal"]["sig_name"], "SIGSEGV");
    assert_eq!(c["cause"]["signal"]["code_name"], "SEGV_MAPERR");
    assert!(c.get("killer").is_none());
    // Where it crashed: the crash stack names the scenario's own function.
    assert!(
        s(&c["headline"]).contains("died of SIGSEGV: address 0x0 not mapped (SEGV_MAPERR) in ")
            && s(&c["headline"])
                .contains("kernel::certificates::roles::run (certificates/roles.rs:"),
        "{}",
        c["headline"]
    );
    assert!(s(&rep["verdict"]).starts_with("1 unexpected death: "));
}

/// abort() in a worker: SIGABRT it sent itself.
#[test]
fn abort_is_self_inflicted() {
    let sc = scenario(|| {
        let mut w = worker("abort", &[]).spawn().unwrap();
        assert_eq!(w.wait().unwrap().signal(), Some(6));
        tag(format!("w={}", w.id()));
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(0));
    let w = pid(&scenario_tag(&r), "w");
    let c = cert(&rep, w);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("unexpected", "self_inflicted")
    );
    assert_eq!(c["killer"]["process"]["pid"], w);
    assert_eq!(c["killer"]["relation"], "self");
    assert_eq!(c["cause"]["signal"]["sig_name"], "SIGABRT");
    assert!(
        s(&c["headline"]).contains("killed by SIGABRT, sent by itself via "),
        "{}",
        c["headline"]
    );
}

/// The tracer exits with the command's status: the code, or 128+N.
#[test]
fn exit_status_passes_through() {
    let r = record(&[], &["sh", "-c", "exit 42"]);
    assert_eq!(r.code(), Some(42));
    let rep = checked_report(&r);
    assert_eq!(
        rep["run"]["command_status"],
        json!({"exited": {"code": 42}})
    );

    let r = record(&[], &["sh", "-c", "kill -TERM $$"]);
    assert_eq!(r.code(), Some(128 + 15));
    let rep = checked_report(&r);
    let c = cert(&rep, root(&r).pid);
    assert_eq!(c["cause"]["kind"], "self_inflicted");
    assert_eq!(c["victim"]["status"]["signaled"]["signal"], 15);
}

/// A worker that had a child, wrote an error to stderr (thrown away by its
/// parent) and exited 1 while its parent carried on: its certificate keeps
/// its last words, labelled as said to /dev/null, but no headline quotes
/// them, and it is a quiet helper: line 1 counts it, never names it.
#[test]
fn nonzero_exit_keeps_last_words_said_to_dev_null() {
    let sc = scenario(|| {
        let mut w = worker("last_words", &[])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        assert_eq!(w.wait().unwrap().code(), Some(1));
        tag(format!("w={}", w.id()));
    });
    let (r, rep) = certify(&sc);
    assert_eq!(r.code(), Some(0));
    let w = pid(&scenario_tag(&r), "w");
    let c = cert(&rep, w);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("nonzero_exit", "nonzero_exit")
    );
    // A quiet helper lives under a second: one slower under load is a
    // worker, named.
    let quick = c["victim"]["lifetime_ns"].as_u64().unwrap() < 1_000_000_000;
    assert_eq!(c["quiet_helper"] == true, quick, "{c}");
    let error = "TypeError: Cannot read properties of undefined (reading 'port')";
    let lw = &c["last_words"];
    assert!(s(&lw["text"]).contains(error), "{lw}");
    assert_eq!(lw["to_null"], true, "{lw}");
    assert!(
        !s(&c["headline"]).contains("last words"),
        "{}",
        c["headline"]
    );
    let verdict = s(&rep["verdict"]);
    if quick {
        assert_eq!(
            verdict,
            "No unexpected deaths. Routine: 1 quiet helper exited non-zero (its stderr to /dev/null)."
        );
    } else {
        assert_eq!(
            verdict,
            format!(
                "No unexpected deaths; 1 non-zero exit: {}",
                s(&c["headline"])
            )
        );
    }
    let md = markdown(&r);
    assert!(md.contains("```text\nworker: step 07 done\n"), "{md}");
    assert!(
        !md.contains("worker: step 06 done"),
        "only the last 20 lines"
    );
    assert!(md.contains("    at frame10 (/srv/worker.js:10:7)\n```"));
}

/// A daemon that outlives the command: the leftovers name it with the
/// facts of its `leak` record and the run process that spawned it.
#[test]
fn leaked_daemon_is_traced_to_its_spawner() {
    let script = "(setsid sleep 300 >/dev/null 2>&1 &); sleep 0.2; exit 0";
    let r = record(
        &["--leaks", "kill", "--leak-grace", "5s"],
        &["sh", "-c", script],
    );
    assert_eq!(r.code(), Some(0));
    let rep = checked_report(&r);
    let leftovers = rep["leftovers"].as_array().unwrap();
    assert_eq!(leftovers.len(), 1, "{rep:#}");
    let l = &leftovers[0];
    assert_eq!(l["process"]["argv"], json!(["sleep", "300"]));
    let leak = &l["leak"];
    assert_eq!(
        (&leak["detached"], &leak["reparented"]),
        (&json!(true), &json!(true))
    );
    assert!(leak["fds"]
        .as_array()
        .unwrap()
        .contains(&json!("1: /dev/null")));
    // Spawned by the subshell `( ... &)`, a fork of the run's root shell.
    let by = &l["spawned_by"];
    assert_eq!(by["in_run"], true);
    // The chain is by id: its parent's entry in `ancestors`.
    let parent = &rep["ancestors"][l["ancestry_id"].as_u64().unwrap() as usize];
    assert_eq!(parent["pid"], by["pid"]);
    assert!(
        s(&rep["verdict"]).contains("Leaked: `sleep 300`"),
        "{}",
        rep["verdict"]
    );
    assert!(markdown(&r).contains("detached (setsid)"));
    // `--leaks kill` then removed it: an expected stop, and said so.
    let c = cert(&rep, l["process"]["pid"].as_u64().unwrap() as u32);
    assert_eq!(
        (s(&c["rank"]), s(&c["cause"]["kind"])),
        ("expected", "tracer")
    );
    assert!(s(&c["headline"]).ends_with("`--leaks kill` removed it"));
}
