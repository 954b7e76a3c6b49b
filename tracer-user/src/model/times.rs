//! The `time` texts of signals and kill calls that are not what their `t`
//! says (a hand-edited or stitched-together log): the report shows the
//! log's own text. A log can have one per event, so each is kept as the
//! instant it names (eight bytes) where the text is exactly what the
//! formatter would write for it, and as text only otherwise.
use std::collections::HashMap;

use crate::eventlog::{is_wall_time, parse_wall_time, wall_time};

/// Kept instead of an instant: the text is in `texts`.
const TEXT: i64 = i64::MIN;

#[derive(Debug, Clone, Default)]
pub(super) struct OddTimes {
    /// (seq, instant or [`TEXT`]), sorted by seq once built; for a seq
    /// given twice the later record wins.
    at: Vec<(u64, i64)>,
    texts: HashMap<u64, String>,
    sorted: bool,
}

impl OddTimes {
    /// Notes the record `seq` at `t` whose `time` is `text`, if that is not
    /// what `t` says.
    pub(super) fn note(&mut self, seq: u64, t: u64, text: &str, boot_to_wall_ns: i64) {
        if is_wall_time(text, t, boot_to_wall_ns) {
            return;
        }
        self.sorted = false;
        match parse_wall_time(text).filter(|&ns| ns != TEXT) {
            Some(ns) => self.at.push((seq, ns)),
            None => {
                self.at.push((seq, TEXT));
                self.texts.insert(seq, text.to_owned());
            }
        }
    }

    /// Sorted by seq, the last of each seq kept: call once all are noted.
    pub(super) fn finish(&mut self) {
        // Reversed, then a stable sort: of equal seqs the last noted is first.
        self.at.reverse();
        self.at.sort_by_key(|&(seq, _)| seq);
        self.at.dedup_by_key(|&mut (seq, _)| seq);
        self.at.shrink_to_fit();
        self.sorted = true;
    }

    /// The log's own text for `seq`, if it was odd.
    pub(super) fn get(&self, seq: u64) -> Option<String> {
        debug_assert!(self.sorted || self.at.is_empty(), "OddTimes::finish");
        let i = self.at.binary_search_by_key(&seq, |&(s, _)| s).ok()?;
        match self.at[i].1 {
            TEXT => self.texts.get(&seq).cloned(),
            ns => Some(wall_time(0, ns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_texts_come_back_as_written_and_the_last_of_a_seq_wins() {
        let off = 1_764_526_000_000_000_000;
        let mut o = OddTimes::default();
        o.note(1, 5, &wall_time(5, off), off); // not odd
        o.note(2, 5, &wall_time(99, off), off);
        o.note(3, 5, "yesterday", off);
        o.note(4, 5, "2026-11-30T20:57:21.410838850Z", off); // trailing zero
        o.note(2, 5, &wall_time(77, off), off);
        o.note(3, 5, &wall_time(66, off), off);
        o.finish();
        assert_eq!(o.get(1), None);
        assert_eq!(o.get(2), Some(wall_time(77, off)));
        assert_eq!(o.get(3), Some(wall_time(66, off)));
        assert_eq!(o.get(4).as_deref(), Some("2026-11-30T20:57:21.410838850Z"));
    }
}
