//! A real memcg OOM kill, captured with its memory cgroup and figures.
use crate::common::cgroup::TestCgroup;
use crate::common::*;
use tracer_user::eventlog::ExitStatus;

const LIMIT: u64 = 64 << 20;

#[test]
fn memcg_oom_kill_is_captured() {
    require_root();
    let cg = TestCgroup::with_memory_limit(LIMIT);
    let procs = cg.dir.join("cgroup.procs");
    // The shell joins the cgroup, then becomes dd, whose 512 MiB buffer
    // cannot fit under the 64 MiB limit.
    let script = format!(
        "echo $$ > {} && exec dd if=/dev/zero of=/dev/null bs=512M count=1",
        procs.display()
    );
    let r = record(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(137), "dd is OOM-killed: {}", r.stderr());

    let oom = r.events().ooms().next().expect("oom event");
    let root = root(&r);
    assert_eq!(
        oom.victim_tid, root.pid,
        "the victim is the process that joined the cgroup"
    );
    let memcg = oom.memcg.as_ref().expect("memcg captured");
    assert_eq!(memcg.name, cg.name());
    assert_eq!(
        memcg.path.as_deref(),
        Some(format!("/{}", cg.name()).as_str())
    );
    assert_eq!(memcg.limit_bytes, Some(LIMIT));
    if let Some(rss) = &oom.rss {
        assert!(rss.anon_rss_kb > 0);
    }

    let kill = r
        .events()
        .signals()
        .find(|s| s.sig == 9 && s.target.pid == root.pid)
        .expect("the OOM killer's SIGKILL");
    assert_eq!(kill.code_name, "SI_KERNEL");
    assert!(kill.call.is_none(), "no syscall sent it");
    // __oom_kill_process sends SIGKILL first, then marks the victim.
    assert!(kill.at.seq < oom.at.seq, "SIGKILL precedes mark_victim");
    assert!(oom.at.t - kill.at.t < 1_000_000_000);
    let exit = r
        .events()
        .exits()
        .find(|x| x.group_dead && x.task.key() == root.key())
        .map(|x| x.status.clone());
    assert!(matches!(exit, Some(ExitStatus::Signaled { signal: 9, .. })));
}

/// A cgroup v2 `memory.oom.group` cgroup (Kubernetes 1.28+ sets it on every
/// container) hits its limit: the kernel kills all of its processes at
/// once. Each victim is certified as an OOM kill, named as one group kill of
/// that cgroup with its limit, and the verdict names the kill once.
///
/// Needs the memory controller on cgroup v2 (`cargo xtask vm-test
/// --cgroup-v2`, where suite.sh sets TRACER_REQUIRE_CGROUP_V2=1 and this
/// test must run); a host with v1 memory cannot make such a kill.
#[test]
fn oom_group_kill_is_one_kill_of_every_process_of_the_cgroup() {
    require_root();
    let Some(cg) = TestCgroup::v2_oom_group(LIMIT) else {
        assert!(
            std::env::var_os("TRACER_REQUIRE_CGROUP_V2").is_none(),
            "TRACER_REQUIRE_CGROUP_V2 is set, but no cgroup v2 memory controller"
        );
        eprintln!("skipped: the memory controller is not on cgroup v2 here");
        return;
    };
    let procs = cg.dir.join("cgroup.procs");
    // The shell joins the cgroup, two sleepers inherit it, then dd's 512 MiB
    // buffer cannot fit under the 64 MiB limit: all four are killed.
    let script = format!(
        "echo $$ > {} || exit 9; sleep 300 & sleep 300 & sleep 0.2; \
         dd if=/dev/zero of=/dev/null bs=512M count=1; wait",
        procs.display()
    );
    let r = record(&[], &["sh", "-c", &script]);
    assert_eq!(
        r.code(),
        Some(137),
        "the shell is killed too: {}",
        r.stderr()
    );

    let ooms: Vec<_> = r.events().ooms().collect();
    assert_eq!(ooms.len(), 4, "sh, two sleeps, dd: {ooms:?}");
    for o in &ooms {
        let m = o.memcg.as_ref().expect("memcg captured");
        assert_eq!(m.name, cg.name());
        assert_eq!(m.limit_bytes, Some(LIMIT));
        assert_eq!(m.oom_group, Some(true));
    }

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap();
    let certs: Vec<&serde_json::Value> = report["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["cause"]["kind"] == "oom")
        .collect();
    assert_eq!(certs.len(), 4, "every victim certified as an OOM kill");
    let seq = &certs[0]["oom"]["group"]["seq"];
    assert!(seq.is_u64(), "{}", certs[0]["oom"]);
    for c in &certs {
        assert_eq!(c["rank"], "unexpected");
        assert_eq!(&c["oom"]["group"]["seq"], seq, "one kill");
        assert_eq!(c["oom"]["group"]["victims"], 4);
        assert_eq!(c["oom"]["limit_bytes"], LIMIT);
        let summary = c["cause"]["summary"].as_str().unwrap();
        assert!(
            summary.contains(&format!("one group kill of memcg /{}", cg.name()))
                && summary.contains("limit 64 MiB"),
            "{summary}"
        );
    }
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    let verdict = md.lines().next().unwrap();
    assert!(verdict.starts_with("4 unexpected deaths: "), "{verdict}");
    assert_eq!(
        verdict.matches("one group kill of memcg").count(),
        1,
        "named once: {verdict}"
    );
    // Every victim's pid and the memcg on line 1: led by dd, whose
    // allocation hit the limit ("`sh -c …` (pid N, a fork that never
    // exec'd)" under busybox, whose sh runs dd as an applet), "and pids …"
    // the other three.
    let dd = certs
        .iter()
        .find(|c| c["oom"]["trigger_is_victim"] == true)
        .expect("dd certified");
    let mut others: Vec<String> = certs
        .iter()
        .filter(|c| c["victim"]["pid"] != dd["victim"]["pid"])
        .map(|c| c["victim"]["pid"].to_string())
        .collect();
    others.sort();
    let mut listed: Vec<String> = verdict
        .split_once(") and pids ")
        .filter(|(lead, _)| lead.contains(&format!("(pid {}", dd["victim"]["pid"])))
        .and_then(|(_, rest)| rest.split_once(" killed by the kernel OOM killer"))
        .map(|(pids, _)| pids.split(", ").map(str::to_string).collect())
        .unwrap_or_default();
    listed.sort();
    assert!(
        listed == others && verdict.contains(&format!("one group kill of memcg /{}", cg.name())),
        "{verdict}"
    );
}
