//! A real memcg OOM kill, captured with its memory cgroup and figures.
use crate::common::cgroup::TestCgroup;
use crate::common::*;
use tracer_user::eventlog::{ExitStatus, Record};

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

    let oom = r
        .events()
        .find_map(|e| match e {
            Record::Oom(o) => Some(o),
            _ => None,
        })
        .expect("oom event");
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
        .find_map(|e| match e {
            Record::Signal(s) if s.sig == 9 && s.target.pid == root.pid => Some(s),
            _ => None,
        })
        .expect("the OOM killer's SIGKILL");
    assert_eq!(kill.code_name, "SI_KERNEL");
    assert!(kill.call.is_none(), "no syscall sent it");
    // __oom_kill_process sends SIGKILL first, then marks the victim.
    assert!(kill.at.seq < oom.at.seq, "SIGKILL precedes mark_victim");
    assert!(oom.at.t - kill.at.t < 1_000_000_000);
    let exit = r.events().find_map(|e| match e {
        Record::Exit(x) if x.group_dead && x.task.key() == root.key() => Some(x.status.clone()),
        _ => None,
    });
    assert!(matches!(exit, Some(ExitStatus::Signaled { signal: 9, .. })));
}
