//! A `memory.oom.group` kill on cgroup v2, as the kernel made it
//! (tests/fixtures/real_oom_group_v2.ndjson: `tracer record` in Debian
//! 6.12's guest with cgroup v2 only, the scenario of the kernel test
//! `oom::oom_group_kill_is_one_kill_of_every_process_of_the_cgroup`: a
//! shell joins a 64 MiB cgroup with `memory.oom.group=1`, two sleepers
//! inherit it, then dd's 512 MiB buffer cannot fit: all four are killed).
//! Line 1 names the kill once, with its memcg and every victim's pid. No
//! root needed.
use crate::common::fixture_report;
use tracer_user::{
    analysis::{CauseKind, Rank},
    report::render_markdown,
};

#[test]
fn an_oom_group_kill_names_its_memcg_and_every_victim_on_line_1() {
    let r = fixture_report("real_oom_group_v2");
    let ooms: Vec<_> = r
        .analysis
        .certificates
        .iter()
        .filter(|c| c.cause.kind == CauseKind::Oom)
        .collect();
    assert_eq!(ooms.len(), 4, "sh, two sleeps, dd");
    // The kernel's own order: dd first (its allocation), then the others.
    let memcg = ooms[0].oom.as_ref().and_then(|o| o.memcg.as_ref()).unwrap();
    let path = memcg.path.clone().unwrap();
    // dd, run by busybox's sh as an applet: a fork that never exec'd.
    let dd = ooms
        .iter()
        .find(|c| c.oom.as_ref().unwrap().trigger_is_victim)
        .unwrap();
    assert_eq!(dd.victim.process.pid, 199);
    let mut others: Vec<String> = ooms
        .iter()
        .filter(|c| c.id != dd.id)
        .map(|c| c.victim.process.pid.to_string())
        .collect();
    others.sort();
    for c in &ooms {
        assert_eq!(c.rank, Rank::Unexpected);
        assert_eq!(c.oom.as_ref().unwrap().group.as_ref().unwrap().victims, 4);
    }

    let md = render_markdown(&r);
    let line1 = md.lines().next().unwrap();
    assert_eq!(line1, r.verdict);
    assert!(line1.chars().count() <= 300, "{line1}");
    assert!(line1.starts_with("4 unexpected deaths: "), "{line1}");
    assert_eq!(
        line1.matches("one group kill of memcg").count(),
        1,
        "{line1}"
    );
    assert!(
        line1.contains(&format!("one group kill of memcg {path}")),
        "the memcg: {line1}"
    );
    // Led by dd, whose allocation hit the limit; the other three after it.
    let mut listed: Vec<String> = line1
        .split_once(") and pids ")
        .filter(|(lead, _)| lead.contains(&format!("(pid {}", dd.victim.process.pid)))
        .and_then(|(_, rest)| rest.split_once(" killed by the kernel OOM killer"))
        .map(|(pids, _)| pids.split(", ").map(str::to_string).collect())
        .unwrap_or_default();
    listed.sort();
    assert_eq!(listed, others, "every victim's pid: {line1}");
}
