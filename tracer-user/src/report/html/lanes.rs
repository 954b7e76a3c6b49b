//! Which processes get a lane in the timeline, and in what order: the
//! processes a reader needs (victims, killers, senders, leaks, their in-run
//! ancestry), capped for big runs, ordered depth-first by fork ancestry.
use std::collections::{BTreeMap, BTreeSet};

use super::Context;
use crate::{
    analysis::{Ancestor, CauseKind, Certificate, ProcRef, Rank},
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

    /// Every process the report names, most needed first, so a cap keeps
    /// what matters: the root, unexpected deaths and their killers, the
    /// leftovers, the other deaths and their killers, then the senders of
    /// signals and failed calls and both ends of a signal across the run's
    /// boundary.
    fn add_named(&mut self, r: &Report) {
        if let Some(root) = &r.run.root {
            self.add(root, None);
        }
        let certs = r.analysis.shown_certificates();
        for c in certs.clone().filter(|c| c.rank == Rank::Unexpected) {
            self.add_death(c);
        }
        for l in &r.analysis.leftovers {
            self.add(&l.process, l.ancestry);
        }
        for c in certs.clone().filter(|c| c.rank != Rank::Unexpected) {
            self.add_death(c);
        }
        for c in certs {
            for h in c.history.iter().filter(|h| !h.raised_by_kernel) {
                self.add(&h.sender, None);
            }
        }
        for n in &r.analysis.near_misses {
            if let Some(sender) = r.analysis.entry(n.sender_id) {
                self.add(sender, None);
            }
        }
        for f in &r.analysis.foreign_signals {
            self.add(&f.sender, None);
            self.add(&f.target, None);
        }
    }

    /// A certificate's victim, then its killer.
    fn add_death(&mut self, c: &Certificate) {
        self.add(&c.victim.process, c.victim.ancestry);
        if let Some(k) = &c.killer {
            self.add(&k.process, k.ancestry);
        }
    }

    /// The picked processes under each parent (`None`: the roots), by
    /// start time.
    fn children(&self) -> BTreeMap<Option<Key>, Vec<Key>> {
        let mut children: BTreeMap<Option<Key>, Vec<Key>> = BTreeMap::new();
        for &k in self.procs.keys() {
            children.entry(self.parent(k)).or_default().push(k);
        }
        for v in children.values_mut() {
            v.sort_by_key(|&(pid, start)| (start, pid));
        }
        children
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
    pk.add_named(r);
    let dropped = pk
        .dropped
        .iter()
        .filter(|k| !pk.procs.contains_key(k))
        .count();
    let ends = Ends::of(r);
    Lanes {
        lanes: depth_first(&pk, &ends),
        dropped,
    }
}

/// How each lane ends, and the test it ran, from the report's findings.
struct Ends {
    /// Per victim: its certificate's id, its class and its end.
    cert_of: BTreeMap<Key, (usize, EndClass, u64)>,
    test_of: BTreeMap<Key, String>,
    leaks: BTreeSet<Key>,
}

impl Ends {
    fn of(r: &Report) -> Ends {
        let mut cert_of: BTreeMap<Key, (usize, EndClass, u64)> = BTreeMap::new();
        for c in r.analysis.shown_certificates() {
            cert_of
                .entry(key(&c.victim.process))
                .or_insert((c.id, end_class(c), c.victim.end_t));
        }
        let leaks: BTreeSet<Key> = r
            .analysis
            .leftovers
            .iter()
            .map(|l| key(&l.process))
            .collect();
        Ends {
            cert_of,
            test_of: tests_of(r),
            leaks,
        }
    }

    /// The lane's certificate, how it ends, and when.
    fn of_lane(&self, k: Key, cx: &Context) -> (Option<usize>, EndClass, Option<u64>) {
        match self.cert_of.get(&k) {
            Some(&(id, class, end)) => (Some(id), class, Some(end)),
            None if self.leaks.contains(&k) => (None, EndClass::Leak, None),
            None => match cx.end(k) {
                Some(t) => (None, EndClass::Plain, Some(t)),
                None => (None, EndClass::Unknown, None),
            },
        }
    }
}

fn end_class(c: &Certificate) -> EndClass {
    match (c.cause.kind, c.rank) {
        (CauseKind::Oom, _) => EndClass::Oom,
        (_, Rank::Unexpected) => EndClass::Unexpected,
        // A consequence ends as the non-zero exit (or kill) it is; the
        // card and the chain say what it followed from.
        (_, Rank::NonzeroExit | Rank::Consequence) => EndClass::NonzeroExit,
        (_, Rank::Expected) => EndClass::Expected,
    }
}

/// Each lane's test, from the certificates that name one: the victim's,
/// and the killer's at its kill (the first certificate wins).
fn tests_of(r: &Report) -> BTreeMap<Key, String> {
    let mut test_of: BTreeMap<Key, String> = BTreeMap::new();
    for c in r.analysis.shown_certificates() {
        if let Some(t) = &c.victim.test {
            test_of
                .entry(key(&c.victim.process))
                .or_insert_with(|| t.plain());
        }
        if let Some((k, t)) = c.killer.as_ref().and_then(|k| Some((k, k.test.as_ref()?))) {
            test_of.entry(key(&k.process)).or_insert_with(|| t.plain());
        }
    }
    test_of
}

/// The lanes, depth-first from the roots, children by start time.
fn depth_first(pk: &Picker, ends: &Ends) -> Vec<Lane> {
    let children = pk.children();
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
        let (cert, class, end) = ends.of_lane(k, pk.cx);
        lanes.push(Lane {
            key: k,
            proc: pk.procs[&k].clone(),
            depth,
            end,
            class,
            cert,
            test: ends.test_of.get(&k).cloned(),
        });
        if let Some(kids) = children.get(&Some(k)) {
            stack.extend(kids.iter().rev().map(|&c| (c, depth + 1)));
        }
    }
    lanes
}
