//! The `ancestors` table of report.json: every ancestry chain a report cites,
//! stored once. A chain is the entry of the nearest ancestor; each entry
//! names its own parent's entry. Entries are interned by value (the process
//! as it was at the time cited, and its parent's entry), so the chains of a
//! deep process tree share their common tails and the report grows with the
//! number of processes, not with processes times tree depth: a 400-deep
//! recursion repeated whole chains into a 50 MB report.json.
use std::collections::HashMap;

use serde::Serialize;

use super::ProcRef;

/// One process of an ancestry chain, as it was when the chain was cited.
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
    index: HashMap<(ProcRef, Option<usize>), usize>,
}

impl Table {
    /// The entry of `chain[0]` for a chain given nearest first. A parent is
    /// always interned before its child, so every `parent_id` is smaller than
    /// its entry's `id`: the table has no cycles.
    pub fn intern(&mut self, chain: Vec<ProcRef>) -> Option<usize> {
        let mut parent = None;
        for process in chain.into_iter().rev() {
            let key = (process, parent);
            let id = match self.index.get(&key) {
                Some(&id) => id,
                None => {
                    let id = self.entries.len();
                    self.entries.push(Ancestor {
                        id,
                        process: key.0.clone(),
                        parent_id: parent,
                    });
                    self.index.insert(key, id);
                    id
                }
            };
            parent = Some(id);
        }
        parent
    }

    pub fn into_entries(self) -> Vec<Ancestor> {
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
