//! Whether a file in a daemon's output directory is tracer's own: the
//! test of authorship [`super::Series`] puts every segment through (owner,
//! link count, the header's mode and segment number), and the (dev, ino)
//! that tells a segment from a file later renamed into its place. See
//! docs/security.md.
use std::{
    fs::File,
    io::{BufRead, BufReader, Read},
    os::unix::fs::MetadataExt,
};

use super::{
    parse::parse_record,
    reader::MAX_LINE_BYTES,
    schema::{Header, Record},
};
use crate::outdir::OutDir;

/// `Ok(((dev, ino), segment))` when `name` in `dir` was written by a tracer
/// daemon (see [`super::Series::adopt`]); `segment`: the number its header must name.
pub(super) fn authored(
    dir: &OutDir,
    name: &str,
    segment: Option<u32>,
) -> Result<((u64, u64), u32), String> {
    let file = dir.open_read(name).map_err(|e| e.to_string())?;
    let m = owned_by_us(&file)
        .map_err(|why| format!("{why}: not written by a tracer daemon, ignored"))?;
    let header = first_header(&file)?;
    if header.mode != "daemon" {
        return Err("not a daemon's log: ignored".into());
    }
    if let Some(n) = segment.filter(|&n| header.segment != n) {
        return Err(format!(
            "its header says segment {}, its name {n}: ignored",
            header.segment
        ));
    }
    Ok(((m.dev(), m.ino()), header.segment))
}

/// A regular file with one link, owned by root or by this tracer's user: a
/// job running as another user can create neither, nor hard-link one in
/// (`fs.protected_hardlinks`).
pub(super) fn owned_by_us(file: &File) -> Result<std::fs::Metadata, String> {
    let m = file.metadata().map_err(|e| e.to_string())?;
    let me = nix::unistd::Uid::effective().as_raw();
    if m.uid() != 0 && m.uid() != me {
        return Err(format!(
            "owned by uid {}, neither root nor this user",
            m.uid()
        ));
    }
    if m.nlink() != 1 {
        return Err(format!("{} hard links to it", m.nlink()));
    }
    Ok(m)
}

/// The header on a log's first line, read through a duplicate of `file`'s
/// descriptor at offset 0 (pread), so `file` is still read from its start.
pub(super) fn first_header(file: &File) -> Result<Header, String> {
    let mut line = Vec::new();
    BufReader::new(from_start(file).take(MAX_LINE_BYTES as u64))
        .read_until(b'\n', &mut line)
        .map_err(|e| e.to_string())?;
    match parse_record(&line) {
        Ok(Record::Header(h)) => Ok(*h),
        _ => Err("its first line is not an event log header: ignored".into()),
    }
}

/// A reader of `file` from offset 0 that leaves `file`'s own offset alone.
fn from_start(file: &File) -> impl Read + '_ {
    struct At<'f> {
        file: &'f File,
        pos: u64,
    }
    impl Read for At<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = std::os::unix::fs::FileExt::read_at(self.file, buf, self.pos)?;
            self.pos += n as u64;
            Ok(n)
        }
    }
    At { file, pos: 0 }
}

pub(super) fn id_of(file: &File) -> Option<(u64, u64)> {
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// The (dev, ino) now under `name`, not following a link.
pub(super) fn authored_id(dir: &OutDir, name: &str) -> Option<(u64, u64)> {
    dir.open_read(name).ok().as_ref().and_then(id_of)
}
