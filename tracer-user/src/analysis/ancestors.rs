//! The `ancestors` table of report.json: every ancestry chain a report cites,
//! stored once. A chain is the entry of the nearest ancestor; each entry
//! names its own parent's entry. An entry is one process as it was at the
//! time cited, which only its exec in force decides (see [`Image`]), plus its
//! parent's entry; interned on that, the chains of a deep process tree share
//! their common tails and the report grows with the number of processes, not
//! with processes times tree depth: a 400-deep recursion repeated whole
//! chains into a 50 MB report.json.
use std::collections::HashMap;

use serde::Serialize;

use super::ProcRef;
use crate::eventlog::ProcKey;

/// A process and how many of its execs were in force: all a `ProcRef` of it
/// depends on (argv and filename come from that exec, or from the image
/// inherited at fork; the rest does not change).
pub(crate) type Image = (ProcKey, usize);

/// One process of an ancestry chain, as it was when the chain was cited.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Ancestor {
    /// Its index in `ancestors`: what `ancestry_id` and `parent_id` name.
    pub id: usize,
    #[serde(flatten)]
    pub process: ProcRef,
    /// Its own parent's entry; absent at the run root (or where the parent is
    /// unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<usize>,
}

#[derive(Default, Debug)]
pub(crate) struct Table {
    entries: Vec<Ancestor>,
    index: HashMap<(Image, Option<usize>), usize>,
    /// Each process's own entry (it, then its ancestry) as last cited, and
    /// the times it stands for: a chain is walked only up to the first
    /// process whose entry still holds, so each process's ancestry is
    /// computed once, not once per descendant cited (a 20,000-deep chain
    /// of crashing processes walked 200 million links: 74 s).
    memo: HashMap<ProcKey, Memo>,
}

/// A process's entry, valid at every time in `[from, until)` (`None`: no
/// end): no exec of it or of any of its ancestors happens in between.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Memo {
    pub id: usize,
    pub from: u64,
    pub until: Option<u64>,
}

impl Memo {
    pub(crate) fn holds_at(&self, t: u64) -> bool {
        self.from <= t && self.until.is_none_or(|u| t < u)
    }
}

impl Table {
    /// The entry of `image` under `parent`, made by `name` only when new. A
    /// parent is interned before its child, so every `parent_id` is smaller
    /// than its entry's `id`: the table has no cycles.
    pub(crate) fn intern(
        &mut self,
        image: Image,
        parent: Option<usize>,
        name: impl FnOnce() -> ProcRef,
    ) -> usize {
        let next = self.entries.len();
        let id = *self.index.entry((image, parent)).or_insert(next);
        if id == next {
            self.entries.push(Ancestor {
                id,
                process: name(),
                parent_id: parent,
            });
        }
        id
    }

    /// `key`'s own entry as memoised, if it still holds at `t`.
    pub(crate) fn memo(&self, key: ProcKey, t: u64) -> Option<Memo> {
        self.memo.get(&key).copied().filter(|m| m.holds_at(t))
    }

    pub(crate) fn remember(&mut self, key: ProcKey, memo: Memo) {
        self.memo.insert(key, memo);
    }

    pub(crate) fn into_entries(self) -> Vec<Ancestor> {
        self.entries
    }
}

/// The chain that starts at entry `id`, nearest first. Stops at a missing
/// entry or one that does not lead strictly upwards, so a hand-edited table
/// cannot loop.
pub fn chain(table: &[Ancestor], id: Option<usize>) -> impl Iterator<Item = &ProcRef> {
    let mut next = id.and_then(|i| table.get(i));
    std::iter::from_fn(move || {
        let cur = next?;
        next = cur
            .parent_id
            .filter(|&p| p < cur.id)
            .and_then(|p| table.get(p));
        Some(&cur.process)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(pid: u32) -> ProcRef {
        ProcRef {
            pid,
            start: u64::from(pid) * 10,
            command: format!("sh {pid}"),
            argv: vec!["sh".into(), pid.to_string()],
            argv_inherited: false,
            filename: None,
            comm: None,
            in_run: true,
            ns_pid: None,
        }
    }

    fn key(pid: u32) -> ProcKey {
        ProcKey {
            pid,
            start: u64::from(pid) * 10,
        }
    }

    /// 1 ← 2 ← 3 and 1 ← 2 ← 4 share the tail 1 ← 2; a new exec of 2
    /// makes a new entry for it, and for everything below it.
    #[test]
    fn chains_share_their_tails() {
        let mut t = Table::default();
        let mut cite = |pids: &[(u32, usize)]| {
            let mut parent = None;
            for &(pid, execs) in pids {
                parent = Some(t.intern((key(pid), execs), parent, || named(pid)));
            }
            parent.unwrap()
        };
        let a = cite(&[(1, 1), (2, 1), (3, 1)]);
        let b = cite(&[(1, 1), (2, 1), (4, 1)]);
        let c = cite(&[(1, 1), (2, 2)]);
        let entries = t.into_entries();
        assert_eq!((a, b, c), (2, 3, 4));
        assert_eq!(entries.len(), 5, "1, 2, 3, 4, and 2 after its second exec");
        let pids = |id| chain(&entries, Some(id)).map(|p| p.pid).collect::<Vec<_>>();
        assert_eq!(pids(b), [4, 2, 1]);
        assert_eq!(pids(c), [2, 1]);
    }

    /// A table that does not lead upwards (hand-edited) ends the walk.
    #[test]
    fn a_looping_table_ends() {
        let entries = vec![
            Ancestor {
                id: 0,
                process: named(1),
                parent_id: Some(1),
            },
            Ancestor {
                id: 1,
                process: named(2),
                parent_id: Some(0),
            },
        ];
        assert_eq!(chain(&entries, Some(1)).count(), 2);
        assert_eq!(chain(&entries, Some(7)).count(), 0);
    }
}
