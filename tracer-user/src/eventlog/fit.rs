//! Records cut to fit one log line. The sources are bounded (argv as an
//! exec's, fds and threads per process, processes per snapshot), but not so
//! that their product is: a snapshot of thousands of processes with long
//! escaped paths, a leak with a thousand fds of 4 KiB names, last words of
//! a `--last-words-bytes` in the hundreds of MB. Such a record is cut here,
//! the parts that cost the most first, and says what it lost; a record
//! with nothing to cut is refused by the writer.
use std::io;

use super::schema::{LastWords, Leak, Record, SnapshotTaken};
use crate::snapshot::ProcSnapshot;

/// Bytes `value` takes as JSON, counted without keeping them.
pub(super) fn json_len(value: &impl serde::Serialize) -> usize {
    let mut n = Count(0);
    serde_json::to_writer(&mut n, value).expect("log records always serialize");
    n.0
}

struct Count(usize);

impl io::Write for Count {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `rec` cut to at most `limit` bytes of JSON, or `None` when it cannot be.
pub(super) fn cut_to_fit(rec: &Record, limit: usize) -> Option<Record> {
    let cut = match rec {
        Record::Snapshot(s) => Record::Snapshot(snapshot(s, limit)?),
        Record::Leak(l) => Record::Leak(Leak {
            fds_left_out: l.fds_left_out.saturating_add(l.fds.len() as u32),
            fds: Vec::new(),
            ..l.clone()
        }),
        Record::LastWords(l) => Record::LastWords(last_words(l, limit)),
        _ => return None,
    };
    (json_len(&cut) <= limit).then_some(cut)
}

/// The end of the text, as much as surely fits: one byte of text is at
/// most 6 of JSON (`\u001b`).
fn last_words(l: &LastWords, limit: usize) -> LastWords {
    let keep = limit / 8;
    let mut from = l.text.len().saturating_sub(keep);
    while !l.text.is_char_boundary(from) {
        from += 1;
    }
    LastWords {
        text: l.text[from..].to_string(),
        truncated: true,
        ..l.clone()
    }
}

/// Threads and fds left out of the largest processes first, then (if that
/// is not enough) the last processes themselves; a note says so.
fn snapshot(s: &SnapshotTaken, limit: usize) -> Option<SnapshotTaken> {
    let line_limit = limit;
    // Room for the note this adds.
    let limit = limit.checked_sub(512)?;
    let mut cut = s.clone();
    let size = |p: &ProcSnapshot| json_len(p) + 1;
    let bare = {
        let mut b = cut.clone();
        b.snapshot.processes.clear();
        json_len(&b)
    };
    let mut sizes: Vec<usize> = cut.snapshot.processes.iter().map(size).collect();
    let mut total = bare + sizes.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
    let mut emptied = 0;
    for i in order {
        if total <= limit {
            break;
        }
        let p = &mut cut.snapshot.processes[i];
        p.threads_left_out = p.threads_left_out.saturating_add(p.threads.len() as u32);
        p.fds_left_out = p.fds_left_out.saturating_add(p.fds.len() as u32);
        p.threads.clear();
        p.fds.clear();
        let now = size(p);
        total = total - sizes[i] + now;
        sizes[i] = now;
        emptied += 1;
    }
    let mut dropped = 0;
    while total > limit {
        total -= sizes.pop()?;
        cut.snapshot.processes.pop();
        dropped += 1;
    }
    let mut note = format!(
        "the snapshot was cut to fit a log line of {} MiB: the threads and fds of {emptied} \
         process(es) are left out",
        line_limit >> 20
    );
    if dropped > 0 {
        note.push_str(&format!(", and the last {dropped} process(es) entirely"));
    }
    cut.snapshot.notes.push(note);
    Some(cut)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{FdEntry, FdKind, Snapshot, SyscallState, ThreadSnapshot};

    fn process(pid: u32, fds: usize, path: &str) -> ProcSnapshot {
        ProcSnapshot {
            pid,
            start_ns: 1,
            ppid: 1,
            pgid: pid,
            sid: pid,
            comm: "java".into(),
            argv: vec!["java".into(), "-cp".into(), "x".repeat(4000)],
            argv_truncated: true,
            exe: Some("/usr/bin/java".into()),
            state: 'S',
            threads: vec![ThreadSnapshot {
                tid: pid,
                comm: "java".into(),
                state: 'S',
                wchan: Some("futex_wait_queue".into()),
                stack: vec!["futex_wait_queue+0x60/0x90".into(); 20],
                syscall: SyscallState::Running,
            }],
            threads_left_out: 0,
            fds: (0..fds as i32)
                .map(|fd| FdEntry {
                    fd,
                    target: path.into(),
                    access: None,
                    kind: FdKind::File { path: path.into() },
                })
                .collect(),
            fds_left_out: 0,
            vanished: false,
            withheld: None,
            frozen: None,
        }
    }

    fn snap(processes: Vec<ProcSnapshot>) -> Record {
        Record::Snapshot(SnapshotTaken {
            at: Default::default(),
            reason: "timeout".into(),
            snapshot: Snapshot {
                processes,
                findings: Vec::new(),
                notes: Vec::new(),
            },
        })
    }

    /// The heaviest processes lose their fds and threads first, and the
    /// record says how many.
    #[test]
    fn a_snapshot_loses_its_heaviest_parts_first() {
        let heavy = "\u{1}".repeat(1000);
        let rec = snap(vec![process(10, 2, "/a"), process(11, 200, &heavy)]);
        let limit = json_len(&rec) / 2;
        let Some(Record::Snapshot(cut)) = cut_to_fit(&rec, limit) else {
            panic!("cut");
        };
        assert!(json_len(&Record::Snapshot(cut.clone())) <= limit);
        let p = &cut.snapshot.processes;
        assert_eq!(p.len(), 2, "both stay");
        assert_eq!(
            (p[0].fds.len(), p[0].fds_left_out),
            (2, 0),
            "the light one is whole"
        );
        assert_eq!((p[1].fds.len(), p[1].fds_left_out), (0, 200));
        assert_eq!(p[1].threads_left_out, 1);
        assert!(
            cut.snapshot.notes[0].contains("of 1 process(es)"),
            "{:?}",
            cut.snapshot.notes
        );
    }

    /// When emptying every process is not enough, the last ones go.
    #[test]
    fn then_whole_processes_go() {
        let rec = snap((0..100).map(|pid| process(pid, 0, "/a")).collect());
        let limit = json_len(&rec) / 3;
        let Some(Record::Snapshot(cut)) = cut_to_fit(&rec, limit) else {
            panic!("cut");
        };
        let n = cut.snapshot.processes.len();
        assert!(n > 10 && n < 40, "{n} processes kept");
        assert_eq!(
            cut.snapshot.processes[n - 1].pid,
            n as u32 - 1,
            "the first ones kept"
        );
        assert!(cut.snapshot.notes[0].contains(&format!("the last {} process(es)", 100 - n)));
    }

    #[test]
    fn last_words_keep_their_end() {
        let rec = Record::LastWords(LastWords {
            at: Default::default(),
            task: crate::eventlog::Task {
                pid: 1,
                tid: 1,
                start: 1,
                comm: None,
            },
            text: format!("{}the end", "é".repeat(100_000)),
            bytes_total: 200_007,
            truncated: false,
            to_null: false,
        });
        let Some(Record::LastWords(cut)) = cut_to_fit(&rec, 8_000) else {
            panic!("cut");
        };
        assert!(cut.truncated && cut.text.ends_with("the end"));
        assert!(cut.text.len() <= 1_000, "{}", cut.text.len());
        assert!(cut_to_fit(&Record::Trailer(Default::default()), 1).is_none());
    }
}
