//! Where a report's processes sit in time: when each ended, who forked it,
//! and the kernel time of an event by its `seq`. report.html's timeline
//! reads only positions from here (every word comes from the report); a
//! daemon's ledger notes them for its certificates from the look that made
//! each, as it never holds the whole log's model.
use std::collections::BTreeMap;

use super::Model;
use crate::eventlog::ProcKey;

/// Only what a report can draw: the processes it names and the seqs of its
/// near misses and snapshots. A copy of every process's end and parent,
/// and of every kill call's seq, was a fifth of a big log's report memory.
#[derive(Debug, Clone, Default)]
pub struct Positions {
    ends: BTreeMap<(u32, u64), u64>,
    parents: BTreeMap<(u32, u64), (u32, u64)>,
    seq_t: BTreeMap<u64, u64>,
}

impl Positions {
    /// When `key` ended and who forked it, as `m` knows.
    pub fn note(&mut self, m: &Model, key: ProcKey) {
        let Some(proc) = m.proc(key) else {
            return;
        };
        let at = (key.pid, key.start);
        if let Some(e) = &proc.end {
            self.ends.insert(at, e.t);
        }
        if let Some(pa) = proc.parent {
            self.parents.insert(at, (pa.pid, pa.start));
        }
    }

    /// The kernel time of the event `seq`.
    pub fn note_seq(&mut self, seq: u64, t: u64) {
        self.seq_t.insert(seq, t);
    }

    /// What `other` noted too.
    pub fn merge(&mut self, other: Positions) {
        self.ends.extend(other.ends);
        self.parents.extend(other.parents);
        self.seq_t.extend(other.seq_t);
    }

    pub fn end(&self, k: (u32, u64)) -> Option<u64> {
        self.ends.get(&k).copied()
    }

    pub fn parent(&self, k: (u32, u64)) -> Option<(u32, u64)> {
        self.parents.get(&k).copied()
    }

    pub fn seq_t(&self, seq: u64) -> Option<u64> {
        self.seq_t.get(&seq).copied()
    }
}
