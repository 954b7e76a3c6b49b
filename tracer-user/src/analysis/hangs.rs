//! What the log adds to a hang snapshot: which of its processes were leaked
//! (the parent that forked them had ended), who stopped a stopped one, and
//! which is the run's root (what the run waits on is followed from it).
use tracer_common::signals::STOP_SIGS;

use super::{wording as w, AnalysisOptions, Ctx};
use crate::{
    eventlog::ProcKey,
    model::Model,
    snapshot::{LogFacts, Snapshot},
};

/// The log's facts about the processes of `snap`, taken at time `t`.
pub fn snapshot_facts(model: &Model, t: u64, snap: &Snapshot) -> LogFacts {
    let opts = AnalysisOptions::default();
    let cx = Ctx::new(model, 0, &opts);
    let mut facts = LogFacts {
        reaper: (model.tracer_pid != 0).then_some(model.tracer_pid),
        // The wrapped command, when the snapshot holds that very process
        // (not a later one with its pid).
        root: model
            .root
            .filter(|k| owner(model, k.pid, t) == Some(*k))
            .map(|k| k.pid)
            .filter(|pid| snap.processes.iter().any(|p| p.pid == *pid)),
        ..LogFacts::default()
    };
    for sp in &snap.processes {
        let Some(key) = owner(model, sp.pid, t) else {
            continue;
        };
        let p = model.proc(key).expect("owner is known");
        if let Some(parent) = p.parent.filter(|pp| !model.is_tracer(*pp)) {
            let ended = model
                .proc(parent)
                .and_then(|pp| pp.end.as_ref())
                .is_some_and(|e| e.t <= t);
            if ended {
                let fork_t = p.fork.as_ref().map_or(t, |f| f.t);
                facts
                    .orphans
                    .insert(sp.pid, w::proc_phrase(&cx.proc_ref(parent, fork_t)));
            }
        }
        if matches!(sp.state, 'T' | 't') {
            let stop = p
                .signals_in()
                .iter()
                .map(|&i| &model.signals[i])
                .rfind(|s| STOP_SIGS.contains(&s.ev.sig) && s.ev.at.t <= t);
            if let Some(s) = stop {
                let sender = cx.proc_ref(s.sender, s.ev.at.t);
                let via = cx
                    .call_of(s)
                    .map(|(sc, a, tid)| {
                        format!(", via {}", w::call_notation(&sc, a, tid, &s.ev.sig_name))
                    })
                    .unwrap_or_default();
                let rel = w::relation_phrase(super::cause::relation(model, s.sender, key));
                facts.stops.insert(
                    sp.pid,
                    format!(
                        "{} from {}, {rel}{via}",
                        s.ev.sig_name,
                        w::proc_phrase(&sender)
                    ),
                );
            }
        }
    }
    facts
}

/// The process that had pid `pid` alive at `t` (the newest, if several).
fn owner(model: &Model, pid: u32, t: u64) -> Option<ProcKey> {
    let lo = ProcKey { pid, start: 0 };
    let hi = ProcKey {
        pid,
        start: u64::MAX,
    };
    model
        .procs
        .range(lo..=hi)
        .filter(|(_, p)| p.alive_at(t))
        .map(|(k, _)| *k)
        .next_back()
}
