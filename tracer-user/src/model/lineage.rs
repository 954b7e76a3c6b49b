//! "Is A an ancestor of B?" without walking B's chain each time: a deep
//! tree (20,000 levels, each killed by the root) asked it once per signal,
//! each a walk of thousands of links. Short chains are still walked; past
//! [`SHORT_WALK`] links the whole tree is indexed once (a depth-first
//! numbering: A is above B when B's interval lies inside A's).
use std::collections::HashMap;

use super::Model;
use crate::eventlog::ProcKey;

/// Links walked before the index is built (most trees are a few deep).
const SHORT_WALK: usize = 64;

/// `a` is among the ancestors of `b` as [`Model::ancestors`] lists them:
/// up to and including the run root or the tracer, never `b` itself.
pub(super) fn is_ancestor(m: &Model, a: ProcKey, b: ProcKey) -> bool {
    let mut seen = vec![b];
    let mut cur = b;
    for _ in 0..SHORT_WALK {
        let Some(parent) = m.procs.get(&cur).and_then(|p| p.parent) else {
            return false;
        };
        // A cycle (a hand-edited log) ends the walk, as it ends `ancestors`.
        if seen.contains(&parent) {
            return false;
        }
        if parent == a {
            return true;
        }
        if stops_at(m, parent) {
            return false;
        }
        seen.push(parent);
        cur = parent;
    }
    match m.lineage.get_or_init(|| Index::of(m)).above(a, b, m) {
        Some(answer) => answer,
        // In a cycle: not numbered, walked whole.
        None => m.ancestors(b).contains(&a),
    }
}

/// `Model::ancestors` ends after these: the run root and the tracer.
fn stops_at(m: &Model, k: ProcKey) -> bool {
    Some(k) == m.root || m.is_tracer(k)
}

/// Depth-first entry and exit numbers of every process in the forest where
/// each process hangs under its parent, except that the run root and the
/// tracer hang under nothing (an ancestor walk ends there).
#[derive(Debug, Clone, Default)]
pub(super) struct Index {
    span: HashMap<ProcKey, (u32, u32)>,
}

impl Index {
    fn of(m: &Model) -> Index {
        let up = |k: &ProcKey| {
            m.procs
                .get(k)
                .filter(|_| !stops_at(m, *k))
                .and_then(|p| p.parent)
        };
        let mut kids: HashMap<ProcKey, Vec<ProcKey>> = HashMap::new();
        let mut tops = Vec::new();
        for k in m.procs.keys() {
            match up(k) {
                Some(p) => {
                    kids.entry(p).or_default().push(*k);
                    // A parent the log never described is a top of its own.
                    if !m.procs.contains_key(&p) && kids[&p].len() == 1 {
                        tops.push(p);
                    }
                }
                None => tops.push(*k),
            }
        }
        let mut span = HashMap::with_capacity(m.procs.len());
        let mut clock = 0u32;
        for top in tops {
            // (process, entered): its exit number is set when it is popped
            // the second time, after all of its subtree.
            let mut stack = vec![(top, false)];
            while let Some((k, entered)) = stack.pop() {
                if entered {
                    span.entry(k).and_modify(|s: &mut (u32, u32)| s.1 = clock);
                    continue;
                }
                clock += 1;
                span.insert(k, (clock, 0));
                stack.push((k, true));
                for &c in kids.get(&k).into_iter().flatten() {
                    stack.push((c, false));
                }
            }
        }
        Index { span }
    }

    /// As [`is_ancestor`]; `None` when `b` is not numbered (a cycle).
    fn above(&self, a: ProcKey, b: ProcKey, m: &Model) -> Option<bool> {
        let parent = m.procs.get(&b).and_then(|p| p.parent)?;
        if parent == b {
            return Some(false);
        }
        if parent == a {
            return Some(true);
        }
        if stops_at(m, parent) {
            return Some(false);
        }
        let &(pin, pout) = self.span.get(&parent)?;
        // `a` strictly above `b`'s parent, where the walk goes on from.
        Some(
            self.span
                .get(&a)
                .is_some_and(|&(ain, aout)| ain < pin && pout <= aout),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Process;

    fn key(pid: u32) -> ProcKey {
        ProcKey {
            pid,
            start: u64::from(pid),
        }
    }

    /// A model of `edges` (child, parent), rooted at `root`.
    fn model(edges: &[(u32, u32)], root: u32) -> Model {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crashes.ndjson");
        let mut m = Model::build(&crate::eventlog::read_log(&path).unwrap());
        m.procs.clear();
        m.root = Some(key(root));
        m.tracer_pid = 1;
        for &(c, p) in edges {
            let mut proc_ = Process::new(key(c));
            proc_.parent = Some(key(p));
            m.procs.insert(key(c), Box::new(proc_));
        }
        m
    }

    /// The index answers as the walk does, for every pair, in a tree deep
    /// enough to need it, with the tracer above the root, a parent the log
    /// never described, and a hand-made cycle.
    #[test]
    fn the_index_agrees_with_the_walk() {
        let mut edges = vec![(10, 1)];
        // A chain 10 <- 11 <- ... <- 99, with side branches.
        for pid in 11..100 {
            edges.push((pid, pid - 1));
            if pid % 17 == 0 {
                edges.push((pid + 1000, pid));
            }
        }
        // Outside the run: a chain under an undescribed parent 5000.
        for pid in 5001..5020 {
            edges.push((pid, pid - 1));
        }
        edges.push((7000, 7001));
        edges.push((7001, 7000));
        let m = model(&edges, 10);
        let keys: Vec<ProcKey> = m.procs.keys().copied().chain([key(1), key(5000)]).collect();
        let mut above = 0;
        for &a in &keys {
            for &b in &keys {
                let want = m.ancestors(b).contains(&a);
                assert_eq!(is_ancestor(&m, a, b), want, "{a:?} above {b:?}");
                above += usize::from(want);
            }
        }
        assert!(m.lineage.get().is_some(), "deep enough to be indexed");
        assert!(above > 4_000, "{above}");
    }
}
