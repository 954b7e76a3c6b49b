//! Which processes get a lane in the timeline, and in what order: the
//! processes a reader needs (victims, killers, senders, leaks, their in-run
//! ancestry), capped for big runs, ordered depth-first by fork ancestry.
use std::collections::{BTreeMap, BTreeSet};

use super::Context;
use crate::{
    analysis::{Ancestor, CauseKind, ProcRef, Rank},
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
    /// The test the process ran, as a certificate names it (plain text,
    /// escaped where drawn): "tests::cleanup_… (cargo test)".
    pub test: Option<String>,
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
    /// Per `ancestors` entry, once known: the nearest in-run entry at or
    /// above it (`None` inside: there is none).
    in_run_up: Vec<Option<Option<usize>>>,
    /// Entries whose parent edge, and every entry's above them, is in
    /// `parents` already: a chain's edges are added only below the first
    /// such entry. Walking every chain whole made a 20,000-deep chain of
    /// certificates take 18 s here.
    edged: Vec<bool>,
}

impl Picker<'_> {
    /// The entry above entry `i`, as [`crate::analysis::chain`] follows it.
    fn above(&self, i: usize) -> Option<usize> {
        let cur = self.ancestors.get(i)?;
        cur.parent_id
            .filter(|&p| p < cur.id)
            .filter(|&p| p < self.ancestors.len())
    }

    /// The nearest in-run entry at or above entry `i`, if any.
    fn in_run_from(&mut self, i: Option<usize>) -> Option<usize> {
        let mut walked = Vec::new();
        let mut cur = i;
        let found = loop {
            // A missing entry ends a chain, as it ends `analysis::chain`.
            let Some(c) = cur.filter(|&c| c < self.ancestors.len()) else {
                break None;
            };
            if let Some(known) = self.in_run_up[c] {
                break known;
            }
            if self.ancestors[c].process.in_run {
                break Some(c);
            }
            walked.push(c);
            cur = self.above(c);
        };
        for c in walked {
            self.in_run_up[c] = Some(found);
        }
        if let Some(f) = found {
            self.in_run_up[f] = Some(Some(f));
        }
        found
    }

    /// Adds `p` and its in-run ancestry (parent first), if there is room.
    /// What the whole chain `[p, in-run ancestors…]` would do, walking it
    /// only as far as it decides anything.
    fn add(&mut self, p: &ProcRef, ancestry: Option<usize>) {
        // Its windows' parent edges, first come first kept: `p`'s, then
        // every in-run entry's not yet edged (an edged one's are all in).
        let first = self.in_run_from(ancestry);
        if let Some(f) = first {
            self.parents
                .entry(key(p))
                .or_insert(key(&self.ancestors[f].process));
        }
        let mut cur = first;
        while let Some(c) = cur.filter(|&c| !self.edged[c]) {
            self.edged[c] = true;
            let next = self.above(c).and_then(|a| self.in_run_from(Some(a)));
            if let Some(n) = next {
                let (child, parent) = (
                    key(&self.ancestors[c].process),
                    key(&self.ancestors[n].process),
                );
                self.parents.entry(child).or_insert(parent);
            }
            cur = next;
        }
        // Room: counted only until the chain is known not to fit.
        let room = MAX_LANES.saturating_sub(self.procs.len());
        let mut new = usize::from(!self.procs.contains_key(&key(p)));
        let mut chain = Vec::new();
        let mut cur = first;
        while let Some(c) = cur.filter(|_| new <= room) {
            new += usize::from(!self.procs.contains_key(&key(&self.ancestors[c].process)));
            chain.push(c);
            cur = self.above(c).and_then(|a| self.in_run_from(Some(a)));
        }
        if new > room {
            if !self.procs.contains_key(&key(p)) {
                self.dropped.insert(key(p));
            }
            return;
        }
        self.procs.entry(key(p)).or_insert_with(|| p.clone());
        for i in chain {
            let q = &self.ancestors[i].process;
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
        in_run_up: vec![None; r.analysis.ancestors.len()],
        edged: vec![false; r.analysis.ancestors.len()],
    };
    if let Some(root) = &r.run.root {
        pk.add(root, None);
    }
    let certs = r.analysis.shown_certificates();
    // Unexpected deaths and their killers first, so a cap keeps what matters.
    for c in certs.clone().filter(|c| c.rank == Rank::Unexpected) {
        pk.add(&c.victim.process, c.victim.ancestry);
        if let Some(k) = &c.killer {
            pk.add(&k.process, k.ancestry);
        }
    }
    for l in &r.analysis.leftovers {
        pk.add(&l.process, l.ancestry);
    }
    for c in certs.clone().filter(|c| c.rank != Rank::Unexpected) {
        pk.add(&c.victim.process, c.victim.ancestry);
        if let Some(k) = &c.killer {
            pk.add(&k.process, k.ancestry);
        }
    }
    for c in certs.clone() {
        for h in c.history.iter().filter(|h| !h.raised_by_kernel) {
            pk.add(&h.sender, None);
        }
    }
    for n in &r.analysis.near_misses {
        if let Some(sender) = r.analysis.entry(n.sender_id) {
            pk.add(sender, None);
        }
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
    for c in certs.clone() {
        let class = match (c.cause.kind, c.rank) {
            (CauseKind::Oom, _) => EndClass::Oom,
            (_, Rank::Unexpected) => EndClass::Unexpected,
            // A consequence ends as the non-zero exit (or kill) it is; the
            // card and the chain say what it followed from.
            (_, Rank::NonzeroExit | Rank::Consequence) => EndClass::NonzeroExit,
            (_, Rank::Expected) => EndClass::Expected,
        };
        cert_of
            .entry(key(&c.victim.process))
            .or_insert((c.id, class, c.victim.end_t));
    }
    // Each lane's test, from the certificates that name one: the victim's,
    // and the killer's at its kill (the first certificate wins).
    let mut test_of: BTreeMap<Key, String> = BTreeMap::new();
    for c in certs {
        if let Some(t) = &c.victim.test {
            test_of
                .entry(key(&c.victim.process))
                .or_insert_with(|| t.plain());
        }
        if let Some((k, t)) = c.killer.as_ref().and_then(|k| Some((k, k.test.as_ref()?))) {
            test_of.entry(key(&k.process)).or_insert_with(|| t.plain());
        }
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
            test: test_of.get(&k).cloned(),
        });
        if let Some(kids) = children.get(&Some(k)) {
            stack.extend(kids.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    Lanes { lanes, dropped }
}
