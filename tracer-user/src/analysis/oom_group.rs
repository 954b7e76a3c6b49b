//! `memory.oom.group`: the kernel OOM-kills every process of a cgroup at
//! once, for one allocation that hit its limit (cgroup v2; Kubernetes 1.28
//! and later set it on every container). The log holds one `oom` event per
//! victim; this names them as the one kill they were, so each certificate
//! says so and the verdict mentions the kill once.
use super::types::OomGroupKill;
use crate::model::{Model, OomEv};

/// The kernel marks a group's victims in one pass over the cgroup (one
/// `oom_kill_process` call, `mem_cgroup_scan_tasks`): microseconds apart on
/// hardware. A later OOM of the same cgroup, after the first victims were
/// reaped (the OOM reaper waits 2 s), is another kill.
const WINDOW_NS: u64 = 100_000_000;

/// Both events are kills by the same allocation (its task) in the same
/// cgroup, which had `memory.oom.group` set when the tracer looked.
fn same_kill(a: &OomEv, b: &OomEv) -> bool {
    match (&a.ev.memcg, &b.ev.memcg) {
        (Some(ma), Some(mb)) => {
            ma.id == mb.id
                && ma.oom_group == Some(true)
                && mb.oom_group == Some(true)
                && a.trigger == b.trigger
        }
        _ => false,
    }
}

/// The group kill `m.ooms[o]` was part of, when it killed more than one
/// process: the same for each of its victims.
pub(crate) fn group_of(m: &Model, o: usize) -> Option<OomGroupKill> {
    let me = &m.ooms[o];
    // The events of this cgroup's kills by this allocation, in log order,
    // cut where the next one comes more than the window after the last.
    let mut group: Vec<&OomEv> = Vec::new();
    let mut found = false;
    for (i, ev) in m.ooms.iter().enumerate().filter(|(_, e)| same_kill(e, me)) {
        let apart = group
            .last()
            .is_some_and(|last| ev.ev.at.t.saturating_sub(last.ev.at.t) > WINDOW_NS);
        if apart {
            if found {
                break;
            }
            group.clear();
        }
        group.push(ev);
        found |= i == o;
    }
    let mut victims: Vec<u32> = group.iter().map(|e| e.ev.victim_tid).collect();
    victims.sort_unstable();
    victims.dedup();
    (found && victims.len() > 1).then(|| OomGroupKill {
        seq: group[0].ev.at.seq,
        victims: victims.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventlog::{Memcg, Oom, ProcKey, Stamp, Task};

    fn oom(seq: u64, t: u64, victim: u32, trigger: u32, group: Option<bool>, id: u64) -> OomEv {
        let task = |pid| Task {
            pid,
            tid: pid,
            start: 1,
            comm: None,
        };
        OomEv {
            ev: Oom {
                at: Stamp {
                    seq,
                    t,
                    time: String::new(),
                },
                trigger: task(trigger),
                victim_tid: victim,
                rss: None,
                memcg: Some(Memcg {
                    id,
                    name: "job".into(),
                    path: Some("/job".into()),
                    limit_bytes: Some(64 << 20),
                    oom_group: group,
                }),
                oom_score_adj: None,
            },
            victim: None,
            trigger: ProcKey {
                pid: trigger,
                start: 1,
            },
            signal: None,
        }
    }

    /// A real log's model with these OOM events instead of its own.
    fn model(ooms: Vec<OomEv>) -> Model {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/real_memcg_oom.ndjson");
        let mut m = Model::build(&crate::eventlog::read_log(&path).unwrap());
        m.ooms = ooms;
        m
    }

    #[test]
    fn one_pass_of_an_oom_group_cgroup_is_one_kill() {
        let ms = 1_000_000;
        let m = model(vec![
            oom(10, 100 * ms, 7, 7, Some(true), 5),
            oom(12, 100 * ms + 20_000, 8, 7, Some(true), 5),
            oom(13, 100 * ms + 40_000, 9, 7, Some(true), 5),
            // Another cgroup, the same instant: not this kill.
            oom(14, 100 * ms + 50_000, 20, 20, Some(true), 6),
            // The same cgroup 3 s later: a new kill, of one process.
            oom(30, 3_100 * ms, 11, 11, Some(true), 5),
        ]);
        for o in 0..3 {
            assert_eq!(
                group_of(&m, o),
                Some(OomGroupKill {
                    seq: 10,
                    victims: 3
                })
            );
        }
        assert_eq!(group_of(&m, 3), None, "one victim in its cgroup");
        assert_eq!(group_of(&m, 4), None, "a later, single kill");
    }

    /// Without `memory.oom.group` (cgroup v1, or not set, or the cgroup was
    /// gone before the tracer read it) each kill stands alone.
    #[test]
    fn kills_without_the_flag_stand_alone() {
        let m = model(vec![
            oom(10, 100, 7, 7, None, 5),
            oom(11, 200, 8, 7, None, 5),
            oom(12, 300, 9, 7, Some(false), 5),
        ]);
        assert!((0..3).all(|o| group_of(&m, o).is_none()));
    }
}
