//! Findings while a daemon runs: the log so far is analysed on a timer and
//! each finding is handed on (metrics, OTLP) once, with the classification
//! it had when first seen. The final report may classify a death better (a
//! killer's call logged after the death): the counters keep the first view.
mod ledger;
mod resources;
#[cfg(test)]
mod tests;
mod window;

pub use ledger::{Ledger, Ledgered, MAX_CANCEL_SIGNALS, MAX_FOREIGN, MAX_STORIES};
pub use resources::LiveResources;
pub use window::{Look, Window};

use std::collections::HashMap;

use crate::{
    analysis::{
        self, Analysis, AnalysisOptions, Ancestor, Certificate, ForeignSignal, Leftover, NearMiss,
        ProcRef,
    },
    eventlog::ProcKey,
};

/// What appeared since the last look.
#[derive(Default, Debug)]
pub struct Findings {
    pub certificates: Vec<Certificate>,
    /// New failed calls: an entry's `count` is how many of its calls are
    /// new since the last look (a fold grows while the daemon runs).
    pub near_misses: Vec<NearMiss>,
    /// Failed calls the analysis no longer lists (past its cap), new since
    /// the last look.
    pub near_misses_unlisted: u64,
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
            && self.near_misses_unlisted == 0
            && self.foreign_signals.is_empty()
            && self.leaks.is_empty()
    }

    /// The process an `ancestors` entry names (a near miss's sender).
    pub fn entry(&self, id: usize) -> Option<&ProcRef> {
        self.ancestors.get(id).map(|a| &a.process)
    }

    /// The parent of a process an `ancestry_id` points at.
    pub fn parent_pid(&self, ancestry: Option<usize>) -> Option<u32> {
        ancestry
            .and_then(|id| self.ancestors.get(id))
            .map(|a| a.process.pid)
    }
}

/// A fold of near misses: its first call's wall time, sender, syscall,
/// signal, target and thread as given, return value.
type MissKey = (String, ProcKey, String, i32, i64, Option<i64>, i64);

/// How many looks a handed-on finding is remembered after the last look
/// whose analysis produced it. A finding can only be produced again while
/// the window holds its records (a dead ancestor of a live process, a
/// death pending one look); once none does, no later look can make it, so
/// remembering it longer would only grow the daemon by ~100 B a death,
/// forever. Four looks: the window keeps an ended process two.
pub(crate) const FORGET_AFTER_LOOKS: u64 = 4;

/// Which findings were already handed on. Keys are identities or kernel
/// times, never bare sequence numbers: a restarted daemon reads the last
/// run's segments too, numbered from 1 again. Each key carries the last
/// look that produced it; keys no look has produced for
/// [`FORGET_AFTER_LOOKS`] are forgotten, so its size is what the window
/// holds, not what the daemon has seen.
#[derive(Default, Debug)]
pub struct Seen {
    /// Looks so far.
    look: u64,
    deaths: HashMap<ProcKey, u64>,
    /// A fold of near misses (its first call's wall time to the ns, sender,
    /// call): how many of its calls were handed on, and its last look. A
    /// near miss has no kernel time.
    near_misses: HashMap<MissKey, (u64, u64)>,
    /// Failed calls past the analysis's cap, handed on.
    near_misses_unlisted: u64,
    foreign: HashMap<(u64, ProcKey), u64>,
    leaks: HashMap<ProcKey, u64>,
}

/// Mark `key` produced by look `look`; true the first time.
fn first<K: std::hash::Hash + Eq>(set: &mut HashMap<K, u64>, key: K, look: u64) -> bool {
    set.insert(key, look).is_none()
}

impl Seen {
    /// The findings of `a` not seen before; all are marked seen.
    pub fn fresh(&mut self, a: Analysis) -> Findings {
        self.look += 1;
        let look = self.look;
        let key = |pid, start| ProcKey { pid, start };
        let near_misses = a
            .near_misses
            .iter()
            .filter_map(|n| {
                let sender = a.entry(n.sender_id)?;
                let fold = (
                    n.time.clone(),
                    key(sender.pid, sender.start),
                    n.syscall.clone(),
                    n.sig,
                    n.target_arg,
                    n.tid_arg,
                    n.ret,
                );
                let (seen, last) = self.near_misses.entry(fold).or_default();
                *last = look;
                let new = n.count.checked_sub(*seen).filter(|&c| c > 0)?;
                *seen = n.count;
                Some(NearMiss {
                    count: new,
                    ..n.clone()
                })
            })
            .collect();
        let near_misses_unlisted = {
            let all = a.near_misses_left_out.events;
            let new = all.saturating_sub(self.near_misses_unlisted);
            self.near_misses_unlisted = self.near_misses_unlisted.max(all);
            new
        };
        let found = Findings {
            certificates: a
                .certificates
                .into_iter()
                .filter(|c| {
                    let victim = key(c.victim.process.pid, c.victim.process.start);
                    first(&mut self.deaths, victim, look)
                })
                .collect(),
            near_misses,
            near_misses_unlisted,
            foreign_signals: a
                .foreign_signals
                .into_iter()
                .filter(|f| {
                    let sent = (f.signal.t, key(f.target.pid, f.target.start));
                    first(&mut self.foreign, sent, look)
                })
                .collect(),
            leaks: a
                .leftovers
                .into_iter()
                .filter(|l| l.leak.is_some())
                .filter(|l| first(&mut self.leaks, key(l.process.pid, l.process.start), look))
                .collect(),
            ancestors: a.ancestors,
        };
        self.forget();
        found
    }

    /// Drop what no look has produced for [`FORGET_AFTER_LOOKS`].
    fn forget(&mut self) {
        let keep = |last: u64| last + FORGET_AFTER_LOOKS >= self.look;
        self.deaths.retain(|_, &mut last| keep(last));
        self.foreign.retain(|_, &mut last| keep(last));
        self.leaks.retain(|_, &mut last| keep(last));
        self.near_misses.retain(|_, &mut (_, last)| keep(last));
    }

    /// Findings remembered (for the tests: bounded by the window).
    pub fn held(&self) -> usize {
        self.deaths.len() + self.foreign.len() + self.leaks.len() + self.near_misses.len()
    }
}

/// Analyse a log (as a report would) and return what is new (the tests'
/// whole-log baseline).
#[cfg(test)]
pub fn fresh_in(
    log: &crate::eventlog::EventLog,
    opts: &AnalysisOptions,
    seen: &mut Seen,
) -> Findings {
    let (_, a) = analysis::analyze(log, opts);
    seen.fresh(a)
}

/// A daemon's look: what `new` (the records written since the last look)
/// makes new, analysed in `window` (see `window`); a death logged in `new`
/// is handed on at the next look, with what the records after it add. At
/// the daemon's stop, a last look with no new records hands on the rest.
/// The daemon's looks go through [`Live::look`], which also keeps its ledger.
#[cfg(test)]
pub fn fresh_in_window(
    window: &mut Window,
    header: &crate::eventlog::Header,
    new: Vec<crate::eventlog::Record>,
    opts: &AnalysisOptions,
    seen: &mut Seen,
) -> Findings {
    let mut res = LiveResources::default();
    look_in(window, header, new, opts, seen, None, &mut res)
}

/// What a daemon keeps between its looks: the window over its records,
/// the findings handed on, the ledger its reports are written from, and
/// the run's resources.
#[derive(Default, Debug)]
pub struct Live {
    pub window: Window,
    pub seen: Seen,
    pub ledger: Ledger,
    pub resources: LiveResources,
}

impl Live {
    /// A look (see [`fresh_in_window`]), merged into the ledger too.
    /// `leftovers`: the ledger keeps this look's processes still running
    /// (a stop's last look, or an interim report's).
    pub fn look(
        &mut self,
        header: &crate::eventlog::Header,
        new: Vec<crate::eventlog::Record>,
        opts: &AnalysisOptions,
        leftovers: bool,
    ) -> Findings {
        let ledger = Some((&mut self.ledger, leftovers));
        look_in(
            &mut self.window,
            header,
            new,
            opts,
            &mut self.seen,
            ledger,
            &mut self.resources,
        )
    }
}

fn look_in(
    window: &mut Window,
    header: &crate::eventlog::Header,
    new: Vec<crate::eventlog::Record>,
    opts: &AnalysisOptions,
    seen: &mut Seen,
    ledger: Option<(&mut Ledger, bool)>,
    res: &mut LiveResources,
) -> Findings {
    let new = res.take_samples(new);
    let Look { log, pending } = window.look(header, new);
    let raw = AnalysisOptions {
        raw: ledger.is_some(),
        ..opts.clone()
    };
    // The look's model gets the run's whole curve (moved in and back out:
    // no copy), so an OOM certificate reads memory's climb whatever the
    // looks cut.
    let mut model = crate::model::Model::build(&log);
    model.resources = std::mem::take(&mut res.curve);
    let mut a = analysis::analyze_model(&model, log.header.boot_to_wall_ns, &raw);
    drop(log);
    res.note_tests(std::mem::take(&mut a.test_memory));
    a.certificates.retain(|c| {
        let key = ProcKey {
            pid: c.victim.process.pid,
            start: c.victim.process.start,
        };
        !pending.contains(&key)
    });
    let found = match ledger {
        None => seen.fresh(a),
        Some((ledger, leftovers)) => {
            if leftovers {
                // Only what the window knows to be running (a `leak`
                // record's process is listed however it ended, as the
                // whole log lists it).
                a.leftovers.retain(|l| {
                    let key = ProcKey {
                        pid: l.process.pid,
                        start: l.process.start,
                    };
                    l.leak.is_some() || window.alive(key)
                });
            }
            if let Some(raw) = a.raw.take() {
                ledger.add(*raw, &a, &pending, &model, leftovers);
            }
            let found = seen.fresh(a);
            ledger.add_side(&found, &model);
            found
        }
    };
    res.curve = std::mem::take(&mut model.resources);
    found
}
