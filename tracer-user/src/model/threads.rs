//! tid -> process over time. Only needed where the kernel hands us a bare tid
//! (the OOM victim); every other record carries `(pid, start)` already.
use super::Model;
use crate::eventlog::ProcKey;

use std::collections::HashMap;

use super::Process;

pub(super) fn owner(model: &Model, tid: u32, t: u64) -> Option<ProcKey> {
    owner_among(model.procs.values().map(|p| &**p), tid, t)
}

/// Among `procs`, the most recently started that had thread `tid` alive at `t`.
fn owner_among<'a>(procs: impl Iterator<Item = &'a Process>, tid: u32, t: u64) -> Option<ProcKey> {
    procs
        .filter(|p| p.start_t() <= t)
        .filter_map(|p| {
            let span = p.threads.get(&tid)?;
            // A thread that ended before `t` cannot own the tid at `t`; the
            // process end bounds threads whose exit was not recorded.
            let until = span.until.or(p.end.as_ref().map(|e| e.t));
            let alive = span.from <= t && until.is_none_or(|u| u >= t);
            alive.then_some(p.key)
        })
        .max_by_key(|k| k.start)
}

/// The processes that ever had each tid: [`owner`] for many tids without a
/// scan of every process per tid (40,000 OOM kills made that 1.6 billion
/// thread lookups).
pub(super) struct TidIndex(HashMap<u32, Vec<ProcKey>>);

impl TidIndex {
    pub(super) fn of(model: &Model) -> TidIndex {
        let mut by_tid: HashMap<u32, Vec<ProcKey>> = HashMap::new();
        for p in model.procs.values() {
            for tid in p.threads.tids() {
                by_tid.entry(tid).or_default().push(p.key);
            }
        }
        TidIndex(by_tid)
    }

    /// As [`owner`].
    pub(super) fn owner(&self, model: &Model, tid: u32, t: u64) -> Option<ProcKey> {
        let keys = self.0.get(&tid)?;
        owner_among(keys.iter().filter_map(|k| model.proc(*k)), tid, t)
    }
}

#[cfg(test)]
mod tests {
    use crate::eventlog::ProcKey;
    use crate::model::{Model, Process, ThreadSpan};
    use std::collections::BTreeMap;

    fn with_thread(pid: u32, start: u64, tid: u32, until: Option<u64>) -> Process {
        let mut p = Process::new(ProcKey { pid, start });
        p.threads.insert(tid, ThreadSpan { from: start, until });
        p
    }

    #[test]
    fn reused_tid_maps_to_the_owner_at_that_time() {
        let a = with_thread(100, 10, 100, Some(50));
        let b = with_thread(200, 60, 100, None);
        let mut procs = BTreeMap::new();
        procs.insert(a.key, Box::new(a));
        procs.insert(b.key, Box::new(b));
        let m = Model {
            tracer_pid: 1,
            daemon: false,
            boot_to_wall_ns: 0,
            arch: "x86_64".into(),
            odd_times: Default::default(),
            intern: Default::default(),
            root: None,
            procs,
            signals: vec![],
            kill_calls: vec![],
            ooms: vec![],
            oom_index: Default::default(),
            lineage: Default::default(),
            snapshots: vec![],
            resources: Default::default(),
            signal_summaries: vec![],
            first_t: 0,
            last_t: 0,
            not_run: None,
            coverage: Default::default(),
            marks: Vec::new(),
            marks_left_out: 0,
            test_windows: Vec::new(),
            test_windows_left_out: 0,
        };
        assert_eq!(
            m.tid_owner(100, 20),
            Some(ProcKey {
                pid: 100,
                start: 10
            })
        );
        assert_eq!(
            m.tid_owner(100, 70),
            Some(ProcKey {
                pid: 200,
                start: 60
            })
        );
        assert_eq!(m.tid_owner(100, 5), None);
        assert_eq!(m.tid_owner(7, 20), None);
    }
}
