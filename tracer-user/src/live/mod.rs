//! Findings while a daemon runs: the log so far is analysed on a timer and
//! each finding is handed on (metrics, OTLP) once, with the classification
//! it had when first seen. The final report may classify a death better (a
//! killer's call logged after the death): the counters keep the first view.
#[cfg(test)]
mod tests;
mod window;

pub use window::{Look, Window};

use std::collections::HashSet;

use crate::{
    analysis::{
        self, Analysis, AnalysisOptions, Ancestor, Certificate, ForeignSignal, Leftover, NearMiss,
    },
    eventlog::{EventLog, ProcKey},
};

/// What appeared since the last look.
#[derive(Default, Debug)]
pub struct Findings {
    pub certificates: Vec<Certificate>,
    pub near_misses: Vec<NearMiss>,
    pub foreign_signals: Vec<ForeignSignal>,
    /// Processes reported as leaked (`leak` records only: a daemon's live
    /// processes are not leaks).
    pub leaks: Vec<Leftover>,
    /// The analysis's ancestry table, which `ancestry_id`s index.
    pub ancestors: Vec<Ancestor>,
}

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.certificates.is_empty()
            && self.near_misses.is_empty()
            && self.foreign_signals.is_empty()
            && self.leaks.is_empty()
    }

    /// The parent of a process an `ancestry_id` points at.
    pub fn parent_pid(&self, ancestry: Option<usize>) -> Option<u32> {
        ancestry
            .and_then(|id| self.ancestors.get(id))
            .map(|a| a.process.pid)
    }
}

/// Which findings were already handed on. Keys are identities or kernel
/// times, never bare sequence numbers: a restarted daemon reads the last
/// run's segments too, numbered from 1 again.
#[derive(Default, Debug)]
pub struct Seen {
    deaths: HashSet<ProcKey>,
    /// (wall time to the ns, sender): a near miss has no kernel time.
    near_misses: HashSet<(String, ProcKey)>,
    foreign: HashSet<(u64, ProcKey)>,
    leaks: HashSet<ProcKey>,
}

impl Seen {
    /// The findings of `a` not seen before; all are marked seen.
    pub fn fresh(&mut self, a: Analysis) -> Findings {
        let key = |pid, start| ProcKey { pid, start };
        Findings {
            certificates: a
                .certificates
                .into_iter()
                .filter(|c| {
                    self.deaths
                        .insert(key(c.victim.process.pid, c.victim.process.start))
                })
                .collect(),
            near_misses: a
                .near_misses
                .into_iter()
                .filter(|n| {
                    self.near_misses
                        .insert((n.time.clone(), key(n.sender.pid, n.sender.start)))
                })
                .collect(),
            foreign_signals: a
                .foreign_signals
                .into_iter()
                .filter(|f| {
                    self.foreign
                        .insert((f.signal.t, key(f.target.pid, f.target.start)))
                })
                .collect(),
            leaks: a
                .leftovers
                .into_iter()
                .filter(|l| l.leak.is_some())
                .filter(|l| self.leaks.insert(key(l.process.pid, l.process.start)))
                .collect(),
            ancestors: a.ancestors,
        }
    }
}

/// Analyse a log (as a report would) and return what is new.
pub fn fresh_in(log: &EventLog, opts: &AnalysisOptions, seen: &mut Seen) -> Findings {
    let (_, a) = analysis::analyze(log, opts);
    seen.fresh(a)
}

/// A daemon's look: what `new` (the records written since the last look)
/// makes new, analysed in `window` (see `window`); a death logged in `new`
/// is handed on at the next look, with what the records after it add. At
/// the daemon's stop, a last look with no new records hands on the rest.
pub fn fresh_in_window(
    window: &mut Window,
    header: &crate::eventlog::Header,
    new: Vec<crate::eventlog::Record>,
    opts: &AnalysisOptions,
    seen: &mut Seen,
) -> Findings {
    let Look { log, pending } = window.look(header, new);
    let (_, mut a) = analysis::analyze(&log, opts);
    a.certificates.retain(|c| {
        let key = ProcKey {
            pid: c.victim.process.pid,
            start: c.victim.process.start,
        };
        !pending.contains(&key)
    });
    seen.fresh(a)
}
