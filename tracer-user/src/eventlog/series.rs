//! A daemon's rotated series (`events-0001.ndjson`, …, then the live
//! `events.ndjson`) read as one log — but only the files tracer knows are its
//! own. The output directory may be the job's (a CI workspace, a handed-over
//! directory reused by a rerun): any name in it can be planted by the job,
//! so a directory listing never decides what feeds a report. A live tracer
//! reads the segments it rotated itself (name and (dev, ino) remembered at
//! rotation); an earlier run's segments, and `tracer report DIR`, only files
//! that pass [`Series::adopt`]'s test of authorship. See docs/security.md.
use std::{fs::File, io::Read, os::unix::fs::MetadataExt, path::Path};

use super::{
    authored::{authored, authored_id, first_header, id_of, owned_by_us},
    reader::{stream_from, EventLog, Frame, LogError, Sink},
    schema::{Header, Trailer},
};
use crate::outdir::{
    names::{segment_name, segment_number, segment_shaped, EVENTS as LIVE},
    OutDir,
};

/// A rotated file of the series: its number, and the file it was when
/// tracer accepted it (a file renamed into its place is not it).
#[derive(Debug, Clone)]
struct Part {
    number: u32,
    dev_ino: (u64, u64),
}

/// The segments of a series that tracer accepted as its own, oldest first.
#[derive(Debug, Default, Clone)]
pub struct Series {
    parts: Vec<Part>,
    /// The highest segment number found under a name tracer did not accept:
    /// numbering goes on after it, so tracer never renames its own segment
    /// over a file it listed as ignored (unless no number is left).
    taken: Option<u32>,
    /// Files with a segment's name that were not read, and why: every report
    /// says so (a planted file is not silently dropped either).
    ignored: Vec<String>,
}

impl Series {
    /// The segments in `dir` written by a tracer daemon: a regular file with
    /// one link, owned by root or by this tracer's own user (a job running
    /// as another user cannot create such a file, nor hard-link one in:
    /// `fs.protected_hardlinks`), whose header says `daemon` and names the
    /// file's own number. Everything else with a segment's name is ignored,
    /// and said so. Numeric order (`events-9999` before `events-10000`).
    pub fn adopt(dir: &OutDir) -> Self {
        let mut series = Series::default();
        let mut found: Vec<(u32, String)> = Vec::new();
        for name in dir.names().unwrap_or_default() {
            match segment_number(&name) {
                Some(n) => found.push((n, name)),
                None if segment_shaped(&name) => series
                    .ignored
                    .push(format!("{name}: not a segment name tracer writes")),
                None => {}
            }
        }
        found.sort_unstable();
        for (number, name) in found {
            match authored(dir, &name, Some(number)) {
                Ok((dev_ino, _)) => series.parts.push(Part { number, dev_ino }),
                Err(why) => {
                    series.taken = series.taken.max(Some(number));
                    series.ignored.push(format!("{name}: {why}"));
                }
            }
        }
        series
    }

    /// A daemon's restart: the live log an earlier daemon left in `dir`
    /// becomes the next segment (the number its header gave it) if it passes
    /// [`Series::adopt`]'s test and comes after the adopted segments;
    /// otherwise it is left to be replaced, and said so.
    pub fn adopt_live(&mut self, dir: &OutDir) -> Result<(), LogError> {
        if !dir.exists(LIVE) {
            return Ok(());
        }
        let number = match authored(dir, LIVE, None) {
            // Its own number, after the adopted ones (an ignored file under
            // that name is the job's, and is replaced).
            Ok((_, number)) if number >= self.after_own()? => number,
            Ok((_, number)) => {
                self.ignored.push(format!(
                    "{LIVE} of an earlier run: its segment number {number} is behind the series; replaced"
                ));
                return Ok(());
            }
            Err(why) => {
                self.ignored
                    .push(format!("{LIVE} of an earlier run: {why}; replaced"));
                return Ok(());
            }
        };
        let name = segment_name(number);
        let io = |source| LogError::Io {
            path: dir.display(&name),
            source,
        };
        dir.rename(LIVE, &name).map_err(io)?;
        let file = dir.open_read(&name).map_err(io)?;
        self.push(number, &file).map_err(io)
    }

    /// The number the next rotated segment takes: after tracer's own, and
    /// after the ignored ones where a number is left (a job that plants
    /// `events-4294967295.ndjson` cannot stop the daemon).
    pub fn next_number(&self) -> Result<u32, LogError> {
        let past_ignored = self.taken.and_then(|n| n.checked_add(1)).unwrap_or(0);
        Ok(self.after_own()?.max(past_ignored))
    }

    /// The number after tracer's own segments.
    fn after_own(&self) -> Result<u32, LogError> {
        match self.parts.last() {
            None => Ok(0),
            Some(p) => p.number.checked_add(1).ok_or_else(|| LogError::Io {
                path: segment_name(p.number).into(),
                source: std::io::Error::other(
                    "the daemon's segment numbers are exhausted; move the old segments away",
                ),
            }),
        }
    }

    /// `file` was just renamed to segment `number` by tracer itself.
    pub fn push(&mut self, number: u32, file: &File) -> std::io::Result<()> {
        let m = file.metadata()?;
        self.parts.push(Part {
            number,
            dev_ino: (m.dev(), m.ino()),
        });
        Ok(())
    }

    /// The numbers of tracer's own segments, oldest first.
    pub fn numbers(&self) -> Vec<u32> {
        self.parts.iter().map(|p| p.number).collect()
    }

    /// No segment of tracer's own (a first run).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// `--keep-segments`: the oldest segments beyond `keep` (0: all kept)
    /// are removed, only those tracer knows as its own. Returns how many
    /// left the series.
    pub fn prune(&mut self, dir: &OutDir, keep: usize) -> usize {
        if keep == 0 || self.parts.len() <= keep {
            return 0;
        }
        let gone = self.parts.len() - keep;
        for p in self.parts.drain(..gone) {
            let name = segment_name(p.number);
            // Only the file tracer rotated: one renamed into its place stays.
            if authored_id(dir, &name) != Some(p.dev_ino) {
                log::warn!("{name} is no longer the file tracer rotated; left in place");
                continue;
            }
            match dir.remove(&name) {
                Ok(()) => log::info!("removed {name} (--keep-segments {keep})"),
                Err(e) => log::warn!("cannot remove {name}: {e}"),
            }
        }
        gone
    }

    /// What was not read, one sentence each.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// Stream the segments, then the live log `live` (tracer's own held
    /// file, or whatever is under the live name for an offline reader):
    /// the first header, every event, the last trailer (its counters are
    /// cumulative). A segment that is no longer the file tracer accepted
    /// (renamed over, removed) is skipped and said so.
    pub fn stream(
        &self,
        dir: &OutDir,
        live: Option<impl Read>,
        sink: &mut impl Sink,
    ) -> Result<Frame, LogError> {
        self.stream_parts(dir, live, sink).map(|(frame, _)| frame)
    }

    /// [`Series::stream`], and the segment number each file read names in
    /// its header, in the order read.
    fn stream_parts(
        &self,
        dir: &OutDir,
        live: Option<impl Read>,
        sink: &mut impl Sink,
    ) -> Result<(Frame, Vec<u32>), LogError> {
        let mut read = Vec::new();
        let mut ignored = self.ignored.clone();
        let mut frame: Option<Frame> = None;
        for p in &self.parts {
            let name = segment_name(p.number);
            let file = match dir.open_read(&name) {
                Ok(f) => f,
                Err(e) => {
                    ignored.push(format!("{name}: {e} (removed during the run?)"));
                    continue;
                }
            };
            if id_of(&file) != Some(p.dev_ino) {
                ignored.push(format!(
                    "{name}: replaced after tracer wrote it; the replacement was not read"
                ));
                continue;
            }
            let part = stream_from(file, &dir.display(&name), sink)?;
            read.push(part.header.segment);
            frame = Some(join(frame, part));
        }
        if let Some(live) = live {
            let part = stream_from(live, &dir.display(LIVE), sink)?;
            read.push(part.header.segment);
            frame = Some(join(frame, part));
        }
        let mut frame = frame.ok_or_else(|| LogError::Empty {
            path: dir.path().to_owned(),
        })?;
        frame.ignored = ignored;
        Ok((frame, read))
    }
}

/// A log file, or a daemon's directory (see [`stream_dir`]), streamed.
pub fn stream_series(path: &Path, sink: &mut impl Sink) -> Result<Frame, LogError> {
    if !path.is_dir() {
        let file = crate::outdir::open_regular(nix::fcntl::AT_FDCWD, path).map_err(|source| {
            LogError::Io {
                path: path.to_owned(),
                source,
            }
        })?;
        return stream_from(file, path, sink);
    }
    let dir = OutDir::open_existing(path).map_err(|e| LogError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    stream_dir(&dir, sink)
}

/// A log file or a daemon's directory, read whole (see [`stream_series`]).
pub fn read_series(path: &Path) -> Result<EventLog, LogError> {
    let mut events = Vec::new();
    let frame = stream_series(path, &mut |_: &Header, rec| events.push(rec))?;
    Ok(EventLog::of(frame, events))
}

/// A report directory read offline (`tracer report DIR`): its live log if
/// it is root's or the reader's own (a file someone else put in the
/// directory is refused: pass its path to read it anyway); a `record` log
/// alone (a run never rotates, so a segment beside it is not its own); a
/// daemon's with the segments that pass [`Series::adopt`]. So root judging
/// a daemon's directory (`daemon-stop.sh --fail-on`) reads only what root
/// wrote, whatever the job put there.
pub fn stream_dir(dir: &OutDir, sink: &mut impl Sink) -> Result<Frame, LogError> {
    let live = if dir.exists(LIVE) {
        let io = |source| LogError::Io {
            path: dir.display(LIVE),
            source,
        };
        let file = dir.open_read(LIVE).map_err(io)?;
        owned_by_us(&file).map_err(|why| {
            io(std::io::Error::other(format!(
                "{why}: not read as part of the directory (pass the file's path to read it anyway)"
            )))
        })?;
        Some(file)
    } else {
        None
    };
    let record_log = match &live {
        Some(file) => first_header(file).is_ok_and(|h| h.mode != "daemon"),
        None => false,
    };
    if record_log {
        return Series::default().stream(dir, live, sink);
    }
    let (mut frame, read) = Series::adopt(dir).stream_parts(dir, live, sink)?;
    frame.not_whole = not_whole(frame.trailer.as_ref(), &read);
    Ok(frame)
}

/// Why a daemon's series read as `read` (each file's segment number, in
/// order) is not the one its stop closed: the last file must end with the
/// stop's trailer, and the files before it must be the segments that
/// trailer names. A file moved away, removed or swapped in by whoever can
/// write the directory shows here; `None`: whole.
fn not_whole(trailer: Option<&Trailer>, read: &[u32]) -> Option<String> {
    let Some(end) = trailer.and_then(|t| t.series_end.as_ref()) else {
        return Some(
            "the daemon's log does not end with the trailer its stop writes: its last file was moved away, removed or cut short (or the daemon is still running, or was killed)".into(),
        );
    };
    let (last, before) = read.split_last()?;
    let listed: Vec<String> = end.segments.iter().map(|&n| segment_name(n)).collect();
    let missing: Vec<&str> = end
        .segments
        .iter()
        .zip(&listed)
        .filter(|(n, _)| !before.contains(n))
        .map(|(_, name)| name.as_str())
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "segments the daemon's stop names are missing or were replaced: {}",
            missing.join(", ")
        ));
    }
    if before != end.segments.as_slice() || end.segments.contains(last) {
        return Some(format!(
            "the daemon's log holds segments its stop does not name (it names {})",
            if listed.is_empty() {
                "none".to_string()
            } else {
                listed.join(", ")
            }
        ));
    }
    None
}

/// The first part's header; the last part's trailer (its counters are
/// cumulative) and truncation.
fn join(so_far: Option<Frame>, part: Frame) -> Frame {
    match so_far {
        None => part,
        Some(f) => Frame {
            header: f.header,
            trailer: part.trailer,
            truncated: part.truncated,
            ignored: f.ignored,
            lines_skipped: f.lines_skipped + part.lines_skipped,
            not_whole: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::{super::schema::Record, *};

    /// A log file whose header says `mode`, segment `segment`, holding one
    /// exit event with sequence number `seq`.
    fn log_text(mode: &str, segment: u32, seq: u64) -> String {
        let header = format!(
            r#"{{"type":"header","schema":1,"tracer_version":"0.1.0","kernel":"k","hostname":"h","mode":"{mode}","command":[],"tracer_pid":7,"started_at":"2026-08-18T17:27:00Z","boot_to_wall_ns":0,"hooks":[],"ring_buffer_bytes":1,"argv_capture_bytes":1,"segment":{segment}}}"#
        );
        let exit = format!(
            r#"{{"type":"exit","seq":{seq},"t":{seq},"time":"2026-08-18T17:27:01Z","task":{{"pid":{seq},"tid":{seq},"start":1,"comm":"x"}},"exit_code":0,"status":{{"exited":{{"code":0}}}},"group_dead":true}}"#
        );
        format!("{header}\n{exit}\n")
    }

    /// `text` closed by a trailer: the stop's, naming `segments`, or a
    /// rotation's (`None`).
    fn closed(text: String, seq: u64, segments: Option<&[u32]>) -> String {
        let end = segments.map_or(String::new(), |s| {
            format!(r#","series_end":{{"segments":{s:?}}}"#)
        });
        format!(
            r#"{text}{{"type":"trailer","ended_at":"2026-08-18T17:28:00Z","events":{seq},"lost":{{"ringbuf_full":0,"tracked_map_full":0,"inflight_map_full":0,"undecodable":0,"per_cpu":[]}}{end}}}
"#
        )
    }

    fn not_whole_of(dir: &OutDir) -> Option<String> {
        stream_dir(dir, &mut |_: &Header, _: Record| {})
            .unwrap()
            .not_whole
    }

    #[test]
    fn a_daemon_series_is_whole_only_as_its_stop_closed_it() {
        let seg = |n: u32| {
            (
                segment_name(n),
                closed(log_text("daemon", n, n as u64 + 1), n as u64 + 1, None),
            )
        };
        let stop = closed(log_text("daemon", 2, 3), 3, Some(&[0, 1]));
        let with = |files: Vec<(String, String)>| {
            let files: Vec<(&str, String)> =
                files.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
            dir_with(&files)
        };
        // Whole: the segments the stop names, then its own file.
        let (_t, dir) = with(vec![seg(0), seg(1), (LIVE.into(), stop.clone())]);
        assert_eq!(not_whole_of(&dir), None);
        // The stop's file renamed to its own segment's name: still whole.
        let (_t, dir) = with(vec![seg(0), seg(1), (segment_name(2), stop.clone())]);
        assert_eq!(not_whole_of(&dir), None);
        // The live file moved away: the series ends with a rotation's trailer.
        let (_t, dir) = with(vec![seg(0), seg(1)]);
        assert!(not_whole_of(&dir)
            .unwrap()
            .contains("does not end with the trailer its stop writes"));
        // A segment removed (not pruned: the stop names it).
        let (_t, dir) = with(vec![seg(1), (LIVE.into(), stop.clone())]);
        assert!(not_whole_of(&dir)
            .unwrap()
            .contains("missing or were replaced: events-0000.ndjson"));
        // A killed daemon's last file, cut short: no trailer at all.
        let (_t, dir) = with(vec![seg(0), (LIVE.into(), log_text("daemon", 1, 2))]);
        assert!(not_whole_of(&dir).is_some());
        // A file of the series the stop does not name (an older one moved in).
        let stop1 = closed(log_text("daemon", 2, 3), 3, Some(&[1]));
        let (_t, dir) = with(vec![seg(0), seg(1), (LIVE.into(), stop1)]);
        assert!(not_whole_of(&dir).unwrap().contains("does not name"));
    }

    fn dir_with(files: &[(&str, String)]) -> (tempfile::TempDir, OutDir) {
        let tmp = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let mut f = fs_create(tmp.path(), name);
            f.write_all(text.as_bytes()).unwrap();
        }
        let dir = OutDir::open_existing(tmp.path()).unwrap();
        (tmp, dir)
    }

    fn fs_create(dir: &Path, name: &str) -> File {
        File::create(dir.join(name)).unwrap()
    }

    fn pids(dir: &OutDir) -> (Vec<u32>, Vec<String>) {
        let mut pids = Vec::new();
        let frame = stream_dir(dir, &mut |_: &Header, rec: Record| {
            if let Record::Exit(e) = rec {
                pids.push(e.task.pid);
            }
        })
        .unwrap();
        (pids, frame.ignored)
    }

    #[test]
    fn segments_are_read_in_numeric_order() {
        let (_tmp, dir) = dir_with(&[
            ("events-10000.ndjson", log_text("daemon", 10000, 2)),
            ("events-9999.ndjson", log_text("daemon", 9999, 1)),
            (LIVE, log_text("daemon", 10001, 3)),
        ]);
        let (pids, ignored) = pids(&dir);
        assert_eq!(pids, [1, 2, 3]);
        assert!(ignored.is_empty(), "{ignored:?}");
        let series = Series::adopt(&dir);
        assert_eq!(series.next_number().unwrap(), 10001);
    }

    #[test]
    fn only_a_daemons_own_segments_are_read() {
        let (_tmp, dir) = dir_with(&[
            // A record log renamed to a segment's name, a segment whose
            // header names another number, garbage, a number beyond u32.
            ("events-0000.ndjson", log_text("record", 0, 1)),
            ("events-0001.ndjson", log_text("daemon", 5, 2)),
            ("events-0002.ndjson", "not a log line\n".into()),
            ("events-99999999999.ndjson", log_text("daemon", 0, 4)),
            ("events-0003.ndjson", log_text("daemon", 3, 5)),
            (LIVE, log_text("daemon", 4, 6)),
        ]);
        let (pids, ignored) = pids(&dir);
        assert_eq!(pids, [5, 6]);
        let said = ignored.join("\n");
        for want in [
            "events-0000.ndjson: not a daemon's log",
            "events-0001.ndjson: its header says segment 5, its name 1",
            "events-0002.ndjson: its first line is not an event log header",
            "events-99999999999.ndjson: not a segment name tracer writes",
        ] {
            assert!(said.contains(want), "{want}: {said}");
        }
    }

    #[test]
    fn a_record_log_is_read_alone() {
        let (_tmp, dir) = dir_with(&[
            ("events-0000.ndjson", log_text("daemon", 0, 1)),
            (LIVE, log_text("record", 0, 1)),
        ]);
        assert_eq!(pids(&dir).0, [1]);
    }

    #[test]
    fn numbering_goes_on_after_ignored_files_while_a_number_is_left() {
        let (_tmp, dir) = dir_with(&[
            ("events-0000.ndjson", log_text("daemon", 0, 1)),
            ("events-0007.ndjson", "planted\n".into()),
        ]);
        assert_eq!(Series::adopt(&dir).next_number().unwrap(), 8);
        let (_tmp, dir) = dir_with(&[
            ("events-0000.ndjson", log_text("daemon", 0, 1)),
            ("events-4294967295.ndjson", "planted\n".into()),
        ]);
        assert_eq!(Series::adopt(&dir).next_number().unwrap(), 1);
    }

    #[test]
    fn a_segment_replaced_after_rotation_is_not_read() {
        let (tmp, dir) = dir_with(&[("events-0000.ndjson", log_text("daemon", 0, 1))]);
        let series = Series::adopt(&dir);
        // Replaced by another file under the same name (a rename over it).
        let other = tmp.path().join("other");
        std::fs::write(&other, log_text("daemon", 0, 9)).unwrap();
        std::fs::rename(&other, tmp.path().join("events-0000.ndjson")).unwrap();
        let live = log_text("daemon", 1, 2);
        let mut seen = Vec::new();
        let frame = series
            .stream(
                &dir,
                Some(live.as_bytes()),
                &mut |_: &Header, rec: Record| {
                    if let Record::Exit(e) = rec {
                        seen.push(e.task.pid)
                    }
                },
            )
            .unwrap();
        assert_eq!(seen, [2]);
        assert!(frame.ignored[0].contains("replaced after tracer wrote it"));
    }
}
