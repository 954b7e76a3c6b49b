//! Appends records to `events.ndjson`, assigning sequence numbers.
use std::{
    fs::File,
    io::{BufWriter, Write},
    path::Path,
};

use super::schema::{Header, Record, Stamp, Trailer};

pub struct LogWriter {
    out: BufWriter<File>,
    boot_to_wall_ns: i64,
    next_seq: u64,
    unflushed: usize,
}

impl LogWriter {
    pub fn create(path: &Path, header: &Header) -> std::io::Result<Self> {
        Self::create_continuing(path, header, 1)
    }

    /// A new file of a rotated series: sequence numbers go on from `next_seq`.
    pub fn create_continuing(path: &Path, header: &Header, next_seq: u64) -> std::io::Result<Self> {
        let mut w = Self {
            out: BufWriter::with_capacity(1 << 16, File::create(path)?),
            boot_to_wall_ns: header.boot_to_wall_ns,
            next_seq,
            unflushed: 0,
        };
        w.line(&Record::Header(header.clone()))?;
        w.flush()?;
        Ok(w)
    }

    /// The stamp for the next event at kernel time `t`.
    pub fn stamp(&mut self, t: u64) -> Stamp {
        let seq = self.next_seq;
        self.next_seq += 1;
        Stamp {
            seq,
            t,
            time: wall_time(t, self.boot_to_wall_ns),
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
        self.out.get_ref().metadata().map(|m| m.len()).unwrap_or(0) + self.out.buffer().len() as u64
    }

    pub fn write(&mut self, rec: &Record) -> std::io::Result<()> {
        self.line(rec)?;
        self.unflushed += 1;
        // Bounded unflushed data: a tracer killed mid-run leaves a valid prefix.
        if self.unflushed >= 4096 {
            self.flush()?;
        }
        Ok(())
    }

    pub fn finish(&mut self, trailer: Trailer) -> std::io::Result<()> {
        self.line(&Record::Trailer(trailer))?;
        self.flush()
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.unflushed = 0;
        self.out.flush()
    }

    fn line(&mut self, rec: &Record) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, rec)?;
        self.out.write_all(b"\n")
    }
}

/// RFC 3339 UTC with nanoseconds for a CLOCK_BOOTTIME instant.
pub fn wall_time(t: u64, boot_to_wall_ns: i64) -> String {
    let ns = t as i128 + boot_to_wall_ns as i128;
    time::OffsetDateTime::from_unix_timestamp_nanos(ns)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_default()
}
