//! Which processes get a lane in the timeline, and in what order: the
//! processes a reader needs (victims, killers, senders, leaks, their in-run
//! ancestry), capped for big runs, ordered depth-first by fork ancestry.
use std::collections::{BTreeMap, BTreeSet};

use super::Context;
use crate::{
    analysis::{self, Ancestor, CauseKind, ProcRef, Rank},
    report::Report,
};

/// At most this many lanes; the rest of the run is a count under the picture.
pub(super) const MAX_LANES: usize = 150;

pub(super) type Key = (u32, u64);

pub(super) fn key(p: &ProcRef) -> Key {
    (p.pid, p.start)
}

/// How a lane ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum EndClass {
    Unexpected,
    Oom,
    NonzeroExit,
    Expected,
    /// Ended with no certificate (an ordinary exit).
    Plain,
    /// A leftover: still running when the log ended.
    Leak,
    /// No end in the log and not a leftover (outside the run, or a truncated log).
    Unknown,
}

impl EndClass {
    pub(super) fn css(self) -> &'static str {
        match self {
            EndClass::Unexpected => "unexpected",
            EndClass::Oom => "oom",
            EndClass::NonzeroExit => "nonzero",
            EndClass::Expected => "expected",
            EndClass::Plain => "plain",
            EndClass::Leak => "leak",
            EndClass::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Lane {
    pub key: Key,
    pub proc: ProcRef,
    pub depth: usize,
    pub end: Option<u64>,
    pub class: EndClass,
    /// Certificate id, when the process has one.
    pub cert: Option<usize>,
}

pub(super) struct Lanes {
    pub lanes: Vec<Lane>,
    /// Processes that mattered but did not fit under [`MAX_LANES`].
    pub dropped: usize,
}

struct Picker<'a> {
    cx: &'a Context,
    ancestors: &'a [Ancestor],
    procs: BTreeMap<Key, ProcRef>,
    /// Parent edges known from the report's ancestry chains.
    parents: BTreeMap<Key, Key>,
    dropped: BTreeSet<Key>,
}

impl Picker<'_> {
    /// Adds `p` and its in-run ancestry (parent first), if there is room.
    fn add(&mut self, p: &ProcRef, ancestry: Option<usize>) {
        let mut chain = vec![p];
        chain.extend(analysis::chain(self.ancestors, ancestry).filter(|a| a.in_run));
        for w in chain.windows(2) {
            self.parents.entry(key(w[0])).or_insert(key(w[1]));
        }
        let new = chain
            .iter()
            .filter(|q| !self.procs.contains_key(&key(q)))
            .count();
        if self.procs.len() + new > MAX_LANES {
            if !self.procs.contains_key(&key(p)) {
                self.dropped.insert(key(p));
            }
            return;
        }
        for q in chain {
            self.procs.entry(key(q)).or_insert_with(|| q.clone());
        }
    }

    fn parent(&self, k: Key) -> Option<Key> {
        self.cx
            .parent(k)
            .or_else(|| self.parents.get(&k).copied())
            .filter(|p| self.procs.contains_key(p))
    }
}

pub(super) fn pick(r: &Report, cx: &Context) -> Lanes {
    let mut pk = Picker {
        cx,
        ancestors: &r.analysis.ancestors,
        procs: BTreeMap::new(),
        parents: BTreeMap::new(),
        dropped: BTreeSet::new(),
    };
    if let Some(root) = &r.run.root {
        pk.add(root, None);
    }
    let certs = &r.analysis.certificates;
    // Unexpected deaths and their killers first, so a cap keeps what matters.
    for c in certs.iter().filter(|c| c.rank == Rank::Unexpected) {
        pk.add(&c.victim.process, c.victim.ancestry);
        if let Some(k) = &c.killer {
            pk.add(&k.process, k.ancestry);
        }
    }
    for l in &r.analysis.leftovers {
        pk.add(&l.process, l.ancestry);
    }
    for c in certs.iter().filter(|c| c.rank != Rank::Unexpected) {
        pk.add(&c.victim.process, c.victim.ancestry);
        if let Some(k) = &c.killer {
            pk.add(&k.process, k.ancestry);
        }
    }
    for c in certs {
        for h in c.history.iter().filter(|h| !h.raised_by_kernel) {
            pk.add(&h.sender, None);
        }
    }
    for n in &r.analysis.near_misses {
        pk.add(&n.sender, None);
    }
    for f in &r.analysis.foreign_signals {
        pk.add(&f.sender, None);
        pk.add(&f.target, None);
    }
    let dropped = pk
        .dropped
        .iter()
        .filter(|k| !pk.procs.contains_key(k))
        .count();

    let mut cert_of: BTreeMap<Key, (usize, EndClass, u64)> = BTreeMap::new();
    for c in certs {
        let class = match (c.cause.kind, c.rank) {
            (CauseKind::Oom, _) => EndClass::Oom,
            (_, Rank::Unexpected) => EndClass::Unexpected,
            (_, Rank::NonzeroExit) => EndClass::NonzeroExit,
            (_, Rank::Expected) => EndClass::Expected,
        };
        cert_of
            .entry(key(&c.victim.process))
            .or_insert((c.id, class, c.victim.end_t));
    }
    let leaks: BTreeSet<Key> = r
        .analysis
        .leftovers
        .iter()
        .map(|l| key(&l.process))
        .collect();

    // Depth-first from the roots, children by start time.
    let mut children: BTreeMap<Option<Key>, Vec<Key>> = BTreeMap::new();
    for &k in pk.procs.keys() {
        children.entry(pk.parent(k)).or_default().push(k);
    }
    for v in children.values_mut() {
        v.sort_by_key(|&(pid, start)| (start, pid));
    }
    let mut lanes = Vec::new();
    let mut stack: Vec<(Key, usize)> = children
        .get(&None)
        .map(|v| v.iter().rev().map(|&k| (k, 0)).collect())
        .unwrap_or_default();
    let mut seen = BTreeSet::new();
    while let Some((k, depth)) = stack.pop() {
        if !seen.insert(k) {
            continue;
        }
        let (cert, class, end) = match cert_of.get(&k) {
            Some(&(id, class, end)) => (Some(id), class, Some(end)),
            None if leaks.contains(&k) => (None, EndClass::Leak, None),
            None => match cx.end(k) {
                Some(t) => (None, EndClass::Plain, Some(t)),
                None => (None, EndClass::Unknown, None),
            },
        };
        lanes.push(Lane {
            key: k,
            proc: pk.procs[&k].clone(),
            depth,
            end,
            class,
            cert,
        });
        if let Some(kids) = children.get(&Some(k)) {
            stack.extend(kids.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    Lanes { lanes, dropped }
}
