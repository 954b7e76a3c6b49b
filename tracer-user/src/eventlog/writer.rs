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

pub struct LogWriter {
    file: File,
    /// Lines not yet written, and where each ends in `buf`.
    buf: Vec<u8>,
    ends: Vec<usize>,
    /// Bytes in the file.
    written: u64,
    boot_to_wall_ns: i64,
    next_seq: u64,
    /// The first write error; nothing is written after it.
    failed: Option<io::Error>,
    /// Records that never reached the file.
    unwritten: u64,
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
            failed: None,
            unwritten: 0,
        };
        w.line(&Record::Header(header.clone()));
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

    /// Bytes written to the file so far (including buffered ones).
    pub fn bytes(&self) -> u64 {
        self.written + self.buf.len() as u64
    }

    /// Records that could not be written (after a write error).
    pub fn unwritten(&self) -> u64 {
        self.unwritten
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
        serde_json::to_writer(&mut self.buf, rec).expect("log records always serialize");
        self.buf.push(b'\n');
        self.ends.push(self.buf.len());
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
