//! The last bytes each traced process wrote to stderr, kept per process with a
//! fixed cap, so memory stays bounded however much a process writes.
use std::collections::{HashMap, VecDeque};

use crate::eventlog::{LastWords, ProcKey, Stamp, Task};

/// Whether `cap` bytes (plus the redaction slack) are more than a kernel
/// tail holds, so every write must come to user space on its own.
pub fn per_write(cap: usize, redacting: bool) -> bool {
    let slack = if redacting {
        crate::redact::CUT_SLACK
    } else {
        0
    };
    cap + slack > tracer_common::TAIL_CAP
}

pub struct LastWordsStore {
    cap: usize,
    /// Kept beyond `cap` so `--redact` sees a secret whole before the text
    /// is cut to `cap` (0 without redaction).
    slack: usize,
    tails: HashMap<ProcKey, Tail>,
}

struct Tail {
    bytes: VecDeque<u8>,
    total: u64,
    /// The last write went to /dev/null.
    to_null: bool,
}

impl LastWordsStore {
    pub fn new(cap: usize) -> Self {
        Self::with_slack(cap, 0)
    }

    pub fn with_slack(cap: usize, slack: usize) -> Self {
        Self {
            cap,
            slack,
            tails: HashMap::new(),
        }
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// `captured` is the tail of a write of `count` bytes; `to_null` when
    /// fd 2 was /dev/null.
    pub fn push(&mut self, key: ProcKey, captured: &[u8], count: u64, to_null: bool) {
        if self.cap == 0 {
            return;
        }
        let tail = self.tails.entry(key).or_insert_with(|| Tail {
            bytes: VecDeque::new(),
            total: 0,
            to_null,
        });
        tail.total += count;
        tail.to_null = to_null;
        let room = self.cap + self.slack;
        let keep = &captured[captured.len().saturating_sub(room)..];
        tail.bytes.extend(keep);
        let excess = tail.bytes.len().saturating_sub(room);
        tail.bytes.drain(..excess);
    }

    pub fn has(&self, key: &ProcKey) -> bool {
        self.tails.contains_key(key)
    }

    /// The process is gone: its last words, if it said anything.
    pub fn take(&mut self, task: &Task, at: Stamp) -> Option<LastWords> {
        self.take_redacted(task, at, |s| s.to_owned())
    }

    /// As `take`, with `redact` applied to all that was kept before the text
    /// is cut to the cap: a secret that straddles the cut is masked whole.
    pub fn take_redacted(
        &mut self,
        task: &Task,
        at: Stamp,
        redact: impl Fn(&str) -> String,
    ) -> Option<LastWords> {
        let tail = self.tails.remove(&task.key())?;
        let (a, b) = tail.bytes.as_slices();
        let kept = [a, b].concat();
        let full = redact(&String::from_utf8_lossy(&kept));
        let mut from = full.len().saturating_sub(self.cap);
        while !full.is_char_boundary(from) {
            from += 1;
        }
        Some(LastWords {
            at,
            task: task.clone(),
            truncated: from > 0 || tail.total > kept.len() as u64,
            bytes_total: tail.total,
            text: full[from..].to_owned(),
            to_null: tail.to_null,
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
        s.push(task().key(), b"hello ", 6, false);
        s.push(task().key(), b"TypeError: x", 12, false);
        let lw = s.take(&task(), at()).unwrap();
        assert_eq!(lw.text, "Error: x");
        assert_eq!(lw.bytes_total, 18);
        assert!(lw.truncated);
        assert!(s.take(&task(), at()).is_none(), "taken once");
    }

    #[test]
    fn a_long_write_counts_whole_but_keeps_its_tail() {
        let mut s = LastWordsStore::new(4096);
        s.push(task().key(), b"end of a 1 MiB write", 1 << 20, false);
        let lw = s.take(&task(), at()).unwrap();
        assert_eq!(
            (lw.text.as_str(), lw.bytes_total, lw.truncated),
            ("end of a 1 MiB write", 1 << 20, true)
        );
    }

    #[test]
    fn redaction_sees_the_slack_before_the_cut() {
        let mut s = LastWordsStore::with_slack(8, 16);
        s.push(task().key(), b"token=abc123 ok", 15, false);
        let lw = s
            .take_redacted(&task(), at(), |t| t.replace("abc123", "[X]"))
            .unwrap();
        // Cut after redaction: no "23" of the secret survives the cut.
        assert_eq!(lw.text, "n=[X] ok");
        assert!(lw.truncated);
    }

    #[test]
    fn zero_cap_disables() {
        let mut s = LastWordsStore::new(0);
        s.push(task().key(), b"x", 1, false);
        assert!(s.take(&task(), at()).is_none());
    }
}
