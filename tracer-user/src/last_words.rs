//! The last bytes each traced process wrote to stderr, kept per process with a
//! fixed cap, so memory stays bounded however much a process writes.
use std::collections::{HashMap, VecDeque};

use crate::eventlog::{LastWords, ProcKey, Stamp, Task};

pub struct LastWordsStore {
    cap: usize,
    tails: HashMap<ProcKey, Tail>,
}

struct Tail {
    bytes: VecDeque<u8>,
    total: u64,
}

impl LastWordsStore {
    pub fn new(cap: usize) -> Self {
        Self {
            cap,
            tails: HashMap::new(),
        }
    }

    /// `captured` is the tail of a write of `count` bytes.
    pub fn push(&mut self, key: ProcKey, captured: &[u8], count: u64) {
        if self.cap == 0 {
            return;
        }
        let tail = self.tails.entry(key).or_insert_with(|| Tail {
            bytes: VecDeque::new(),
            total: 0,
        });
        tail.total += count;
        let keep = &captured[captured.len().saturating_sub(self.cap)..];
        tail.bytes.extend(keep);
        let excess = tail.bytes.len().saturating_sub(self.cap);
        tail.bytes.drain(..excess);
    }

    pub fn has(&self, key: &ProcKey) -> bool {
        self.tails.contains_key(key)
    }

    /// The process is gone: its last words, if it said anything.
    pub fn take(&mut self, task: &Task, at: Stamp) -> Option<LastWords> {
        let tail = self.tails.remove(&task.key())?;
        let (a, b) = tail.bytes.as_slices();
        let kept = [a, b].concat();
        Some(LastWords {
            at,
            task: task.clone(),
            truncated: tail.total > kept.len() as u64,
            bytes_total: tail.total,
            text: String::from_utf8_lossy(&kept).into_owned(),
        })
    }

    /// Processes still alive with something said, in a stable order.
    pub fn remaining(&self) -> Vec<ProcKey> {
        let mut keys: Vec<_> = self.tails.keys().copied().collect();
        keys.sort();
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task() -> Task {
        Task {
            pid: 10,
            tid: 10,
            start: 5,
            comm: Some("node".into()),
        }
    }
    fn at() -> Stamp {
        Stamp {
            seq: 1,
            t: 1,
            time: String::new(),
        }
    }

    #[test]
    fn keeps_only_the_last_cap_bytes() {
        let mut s = LastWordsStore::new(8);
        s.push(task().key(), b"hello ", 6);
        s.push(task().key(), b"TypeError: x", 12);
        let lw = s.take(&task(), at()).unwrap();
        assert_eq!(lw.text, "Error: x");
        assert_eq!(lw.bytes_total, 18);
        assert!(lw.truncated);
        assert!(s.take(&task(), at()).is_none(), "taken once");
    }

    #[test]
    fn a_long_write_counts_whole_but_keeps_its_tail() {
        let mut s = LastWordsStore::new(4096);
        s.push(task().key(), b"end of a 1 MiB write", 1 << 20);
        let lw = s.take(&task(), at()).unwrap();
        assert_eq!(
            (lw.text.as_str(), lw.bytes_total, lw.truncated),
            ("end of a 1 MiB write", 1 << 20, true)
        );
    }

    #[test]
    fn zero_cap_disables() {
        let mut s = LastWordsStore::new(0);
        s.push(task().key(), b"x", 1);
        assert!(s.take(&task(), at()).is_none());
    }
}
