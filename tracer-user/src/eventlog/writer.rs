//! Appends records to `events.ndjson`, assigning sequence numbers.
//!
//! A write that fails (a full disk) must not end the run: the first error
//! stops writing, and every record from then on is counted as unwritten, so
//! the reports say exactly what the log lacks.
use std::{
    fs::File,
    io::{self, Read, Write},
    os::unix::fs::FileExt,
};

use super::schema::{Header, Record, Stamp, Trailer};

/// Flush after this many bytes: a tracer killed mid-run leaves a valid prefix.
const FLUSH_BYTES: usize = 1 << 16;

/// The longest line written: a quarter of what the reader takes
/// ([`super::MAX_LINE_BYTES`]), so a log tracer wrote always reads back
/// whole, and one record never costs more memory than this to write. A
/// snapshot takes about 1 KB per process (the fixtures' hangs: 2.7-3.1 KB
/// for 2-3 processes), so this holds thousands. A longer record is cut to
/// fit ([`super::fit`]) or refused, and counted in the loss line
/// (`cut_to_fit`, `too_large`).
pub const MAX_RECORD_BYTES: usize = super::MAX_LINE_BYTES / 4;

pub struct LogWriter {
    file: File,
    /// Lines not yet written, and where each ends in `buf`.
    buf: Vec<u8>,
    ends: Vec<usize>,
    /// Bytes in the file.
    written: u64,
    boot_to_wall_ns: i64,
    next_seq: u64,
    /// `next_seq` when this file began: events since are in this file.
    first_seq: u64,
    /// The first write error; nothing is written after it.
    failed: Option<io::Error>,
    /// Records that never reached the file.
    unwritten: u64,
    /// Records too large for a line, even cut: refused.
    too_large: u64,
    /// Records cut to fit a line.
    cut_to_fit: u64,
}

impl LogWriter {
    /// A new log in `file` (empty, tracer's own), beginning with `header`.
    pub fn new(file: File, header: &Header) -> Self {
        Self::continuing(file, header, 1)
    }

    /// A new file of a rotated series: sequence numbers go on from `next_seq`.
    pub fn continuing(file: File, header: &Header, next_seq: u64) -> Self {
        let mut w = Self {
            file,
            buf: Vec::with_capacity(FLUSH_BYTES * 2),
            ends: Vec::new(),
            written: 0,
            boot_to_wall_ns: header.boot_to_wall_ns,
            next_seq,
            first_seq: next_seq,
            failed: None,
            unwritten: 0,
            too_large: 0,
            cut_to_fit: 0,
        };
        w.line(&Record::Header(Box::new(header.clone())));
        w.flush();
        w
    }

    /// The stamp for the next event at kernel time `t`.
    pub fn stamp(&mut self, t: u64) -> Stamp {
        let seq = self.next_seq;
        self.next_seq += 1;
        Stamp {
            seq,
            t,
            time: super::wall_time(t, self.boot_to_wall_ns),
        }
    }

    pub fn events_written(&self) -> u64 {
        self.next_seq - 1
    }

    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Events stamped into this file (its header and trailer are not).
    /// Saturating: a refused record gives its number back (`refuse`).
    pub fn events_in_file(&self) -> u64 {
        self.next_seq.saturating_sub(self.first_seq)
    }

    /// Bytes written to the file so far (including buffered ones).
    pub fn bytes(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    /// Records that could not be written (after a write error).
    pub fn unwritten(&self) -> u64 {
        self.unwritten
    }

    /// Records refused as too large for a log line, even cut.
    pub fn too_large(&self) -> u64 {
        self.too_large
    }

    /// Records cut to fit a log line.
    pub fn cut_to_fit(&self) -> u64 {
        self.cut_to_fit
    }

    /// The write error that stopped the log, if any.
    pub fn error(&self) -> Option<&io::Error> {
        self.failed.as_ref()
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    pub fn write(&mut self, rec: &Record) {
        self.line(rec);
        if self.buf.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    pub fn finish(&mut self, trailer: Trailer) {
        self.line(&Record::Trailer(trailer));
        self.flush();
    }

    /// Write what is buffered. On an error, the complete lines that reached
    /// the file stay; the rest are counted as unwritten.
    pub fn flush(&mut self) {
        if self.failed.is_some() || self.buf.is_empty() {
            return;
        }
        let mut done = 0;
        while done < self.buf.len() {
            match self.file.write(&self.buf[done..]) {
                Ok(0) => {
                    self.fail(io::ErrorKind::WriteZero.into(), done);
                    return;
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail(e, done);
                    return;
                }
            }
        }
        self.written += done as u64;
        self.buf.clear();
        self.ends.clear();
    }

    fn fail(&mut self, e: io::Error, done: usize) {
        let complete = self.ends.iter().filter(|&&end| end <= done).count();
        self.unwritten += (self.ends.len() - complete) as u64;
        self.written += done as u64;
        log::warn!("event log write failed: {e}");
        self.failed = Some(e);
        self.buf = Vec::new();
        self.ends.clear();
    }

    /// The log as written so far, read through tracer's own file (never
    /// reopened by a path the command could swap).
    pub fn reader(&self) -> impl Read + '_ {
        ReadAt {
            file: &self.file,
            pos: 0,
        }
    }

    fn line(&mut self, rec: &Record) {
        if self.failed.is_some() {
            self.unwritten += 1;
            return;
        }
        if !self.bounded(rec) {
            match super::fit::cut_to_fit(rec, MAX_RECORD_BYTES) {
                Some(cut) if self.bounded(&cut) => self.cut_to_fit += 1,
                _ => {
                    self.refuse(rec);
                    return;
                }
            }
        }
        self.buf.push(b'\n');
        self.ends.push(self.buf.len());
    }

    /// `rec` appended to the buffer if it is at most [`MAX_RECORD_BYTES`]
    /// of JSON; otherwise the buffer is left as it was. Serialized into a
    /// bounded sink: an oversized record is never held whole.
    fn bounded(&mut self, rec: &Record) -> bool {
        let start = self.buf.len();
        let mut sink = Bounded {
            buf: &mut self.buf,
            left: MAX_RECORD_BYTES,
        };
        if serde_json::to_writer(&mut sink, rec).is_ok() {
            return true;
        }
        self.buf.truncate(start);
        false
    }

    /// A record not written: counted, and its sequence number given back
    /// (records are stamped just before they are written), so the log's
    /// numbers stay gap-free and the trailer's count true.
    fn refuse(&mut self, rec: &Record) {
        self.too_large += 1;
        log::warn!(
            "a {} record was larger than {} MiB even cut; not written",
            super::type_name(rec),
            MAX_RECORD_BYTES >> 20
        );
        if rec.stamp().is_some_and(|s| s.seq + 1 == self.next_seq) {
            self.next_seq -= 1;
        }
    }
}

/// A buffer that refuses to grow past `left` more bytes.
struct Bounded<'a> {
    buf: &'a mut Vec<u8>,
    left: usize,
}

impl Write for Bounded<'_> {
    #[inline]
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.write_all(b).map(|()| b.len())
    }
    /// serde_json writes a record as many small pieces, each by
    /// `write_all`: its default, a loop around `write`, was not inlined,
    /// and the two cost a fork storm's drain ~13 % of tracer's CPU, more
    /// than the formatting itself (~6 %); ~7 % with this (`perf`).
    #[inline]
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        if b.len() > self.left {
            return Err(io::Error::other("record too large for a log line"));
        }
        self.left -= b.len();
        self.buf.extend_from_slice(b);
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Reads a file from the start with positioned reads: the writer's own
/// offset is left alone, so the log can be read while it is being written.
struct ReadAt<'a> {
    file: &'a File,
    pos: u64,
}

impl Read for ReadAt<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(out, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventlog::{read_from, Leak, SnapshotTaken, Task};
    use crate::snapshot::{FdEntry, FdKind, ProcSnapshot, Snapshot};

    fn header() -> Header {
        let path =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/crashes.ndjson");
        crate::eventlog::read_log(&path).unwrap().header
    }

    fn task() -> Task {
        Task {
            pid: 7,
            tid: 7,
            start: 1,
            comm: None,
        }
    }

    /// A process with `fds` fds of `path`: one escaped control byte is six
    /// bytes of JSON.
    fn process(pid: u32, fds: usize, path: &str) -> ProcSnapshot {
        ProcSnapshot {
            pid,
            start_ns: 1,
            ppid: 1,
            pgid: pid,
            sid: pid,
            comm: "leak".into(),
            argv: vec!["leak".into()],
            argv_truncated: false,
            exe: None,
            state: 'S',
            threads: Vec::new(),
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

    /// Every line written fits the writer's limit, so the reader takes the
    /// whole log: a snapshot of 4 processes with 1024 fds of 4 KiB control
    /// bytes each (about 100 MB of JSON) is cut, a leak's fds are dropped, a
    /// record with nothing to cut is refused without a gap in the seqs.
    #[test]
    fn no_line_is_longer_than_the_limit() {
        let tmp = tempfile::tempfile().unwrap();
        let mut w = LogWriter::new(tmp, &header());
        let path = "\u{1}".repeat(4096);
        let at = w.stamp(10);
        w.write(&Record::Snapshot(SnapshotTaken {
            at,
            reason: "timeout".into(),
            snapshot: Snapshot {
                processes: (0..4).map(|p| process(p, 1024, &path)).collect(),
                findings: Vec::new(),
                notes: Vec::new(),
            },
        }));
        let at = w.stamp(11);
        w.write(&Record::Leak(Leak {
            at,
            task: task(),
            ppid: 1,
            pgid: 7,
            sid: 7,
            argv: vec!["leak".into()],
            argv_truncated: false,
            exe: None,
            reparented: true,
            detached: false,
            fds: (0..1024).map(|fd| format!("{fd}: {path}")).collect(),
            fds_left_out: 5,
            withheld: None,
        }));
        // Nothing in an exit to cut: refused, its seq given back.
        let at = w.stamp(12);
        w.write(&Record::Exit(crate::eventlog::Exit {
            at,
            task: Task {
                comm: Some("\u{1}".repeat(MAX_RECORD_BYTES)),
                ..task()
            },
            exit_code: 0,
            status: crate::eventlog::ExitStatus::Exited { code: 0 },
            group_dead: true,
        }));
        let at = w.stamp(13);
        assert_eq!(at.seq, 3, "the refused record's seq was given back");
        w.flush();
        assert_eq!((w.cut_to_fit(), w.too_large()), (2, 1));
        let mut text = Vec::new();
        w.reader().read_to_end(&mut text).unwrap();
        let longest = text.split(|&b| b == b'\n').map(<[u8]>::len).max().unwrap();
        assert!(longest <= MAX_RECORD_BYTES, "{longest}");
        let log = read_from(&text[..], std::path::Path::new("log")).unwrap();
        assert_eq!(log.lines_skipped, 0);
        let [Record::Snapshot(s), Record::Leak(l)] = &log.events[..] else {
            panic!("{} events", log.events.len());
        };
        let p = &s.snapshot.processes;
        assert!(p.iter().any(|p| p.fds.is_empty() && p.fds_left_out == 1024));
        assert!(s.snapshot.notes[0].contains("cut to fit a log line of 16 MiB"));
        assert_eq!((l.fds.len(), l.fds_left_out), (0, 1029));
    }
}
