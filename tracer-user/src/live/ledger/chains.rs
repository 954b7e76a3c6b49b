//! The ancestry a ledger keeps: each look's certificates name their
//! victims' and killers' ancestors by ids into that look's table; a death
//! held across looks carries its chain apart ([`Chains`], detached), and
//! the ledger interns every chain it shows into one table of the run
//! ([`Table`], attached), report.json's `ancestors`.
use std::collections::HashMap;

use crate::analysis::{Ancestor, Certificate};

/// A finding's ancestry apart from its look's table: the entries its ids
/// name, renumbered from 0, parents first.
#[derive(Clone, Debug, Default)]
pub(super) struct Chains(Vec<Ancestor>);

impl Chains {
    /// Moves the entries `ids` name (and their parents) out of `table`,
    /// renumbering `ids` into the result.
    pub(super) fn detach(ids: &mut [&mut Option<usize>], table: &[Ancestor]) -> Self {
        let mut wanted: Vec<usize> = Vec::new();
        for id in ids.iter().filter_map(|i| **i) {
            let mut at = Some(id);
            // Parent ids are smaller than their child's: the walk ends.
            while let Some(i) = at.filter(|i| !wanted.contains(i)) {
                wanted.push(i);
                at = table.get(i).and_then(|a| a.parent_id);
            }
        }
        wanted.sort_unstable();
        let local = |i: usize| wanted.binary_search(&i).ok();
        let entries = wanted
            .iter()
            .filter_map(|&i| table.get(i))
            .map(|a| Ancestor {
                id: local(a.id).unwrap_or(0),
                process: a.process.clone(),
                parent_id: a.parent_id.and_then(local),
            })
            .collect();
        for id in ids.iter_mut() {
            **id = id.and_then(local);
        }
        Chains(entries)
    }
}

/// An ancestors entry's identity: its process (pid, start) as named
/// (command, exec'd file: what its execs in force decide) under its
/// parent's entry.
type EntryKey = (u32, u64, String, Option<String>, Option<usize>);

/// The ledger's own ancestors table (what report.json's `ancestors` is).
#[derive(Clone, Debug, Default)]
pub(super) struct Table {
    pub(super) entries: Vec<Ancestor>,
    index: HashMap<EntryKey, usize>,
}

impl Table {
    /// Interns `chains` and renumbers `ids` (local to them) into the table.
    pub(super) fn attach(&mut self, chains: &Chains, ids: &mut [&mut Option<usize>]) {
        let mut map = Vec::with_capacity(chains.0.len());
        for a in &chains.0 {
            let parent = a.parent_id.and_then(|p| map.get(p).copied());
            let p = &a.process;
            let key = (
                p.pid,
                p.start,
                p.command.clone(),
                p.filename.clone(),
                parent,
            );
            let next = self.entries.len();
            let id = *self.index.entry(key).or_insert(next);
            if id == next {
                self.entries.push(Ancestor {
                    id,
                    process: a.process.clone(),
                    parent_id: parent,
                });
            }
            map.push(id);
        }
        for id in ids.iter_mut() {
            **id = id.and_then(|i| map.get(i).copied());
        }
    }
}

/// The ancestry ids a certificate holds.
pub(super) fn cert_ids(c: &mut Certificate) -> Vec<&mut Option<usize>> {
    let mut ids = vec![&mut c.victim.ancestry];
    if let Some(k) = &mut c.killer {
        ids.push(&mut k.ancestry);
    }
    ids
}
