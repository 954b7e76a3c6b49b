//! A capture session: ring buffer -> decoded records -> event log, with loss
//! accounting. Shared by every mode that captures.
mod crashes;
mod enrich;
mod pump;

use aya::maps::{MapData, RingBuf};
use tokio::io::unix::AsyncFd;
use tracer_common::{DropReason, FailReason};

use crate::{
    capture::{readable::watch_readable, Capture},
    error::TracerError,
    eventlog::{
        segment_name, wall_time, ExitStatus, Header, LogWriter, Loss, Record, Series, SeriesEnd,
        Task, Trailer, LIVE,
    },
    outdir::OutDir,
    redact::Redactor,
    run::{
        clock::{boot_ns, boot_to_wall_ns},
        header::create_log,
        last_words::LastWordsStore,
        options::CaptureOptions,
    },
};

/// A crash record, its ring bytes (for the parse child), its process's
/// modules, and its credentials read while it may still live (see
/// `pump::withheld_from`).
type PendingCrash = (
    Box<tracer_common::CrashRecord>,
    Vec<u8>,
    crate::symbolize::Modules,
    Option<crate::snapshot::Creds>,
);

pub struct Session {
    capture: Capture,
    /// Registered with the reactor: the loop wakes when the kernel side
    /// wakes it (batched, see `pump::ready`).
    ring: AsyncFd<RingBuf<MapData>>,
    /// The crash ring (`CRASHES`): read first in every drain, and woken
    /// for at once, so a crashed process's maps are read while it exists.
    crashes: AsyncFd<RingBuf<MapData>>,
    /// Crash records whose maps were read, waiting for the rest of the
    /// drain (their exec records) before they are unwound.
    /// (The ring's bytes of each, for the parse child.)
    pending_crashes: Vec<PendingCrash>,
    /// Crashes whose modules are found, waiting for the parse child.
    waiting: Vec<crashes::Waiting>,
    /// The parse child at work (`crashes.rs`): never waited for by a drain.
    symbolizing: Option<crashes::Symbolizing>,
    /// The paths the latest processes were exec'd by: a crashed process's
    /// executable is found by it when its maps were lost.
    exes: std::collections::VecDeque<(crate::eventlog::ProcKey, String)>,
    /// Library build ids, read on the first crash that needs them.
    libs: crate::symbolize::LibIndex,
    /// Module copies kept across crashes.
    images: crate::symbolize::ImageCache,
    /// Where stripped modules' debug files are looked for (`--debug-dir`).
    debug_dirs: Vec<std::path::PathBuf>,
    writer: LogWriter,
    /// Where the log and the reports go, held open (see `outdir`).
    out: OutDir,
    /// The rotated files of this log that tracer knows are its own (a
    /// daemon's; `record` never rotates): the only ones ever read back.
    series: Series,
    /// The segment number the live file's header gives it.
    live_segment: u32,
    /// Records of earlier (rotated) files that could not be written, that
    /// were too large for a line, that were cut to fit one.
    unwritten_before: u64,
    too_large_before: u64,
    cut_before: u64,
    undecodable: u64,
    last_words: LastWordsStore,
    existing: Vec<tracer_common::ExistingRecord>,
    /// What is added to a decoded record from live state before it is
    /// written (`enrich.rs`): the stage between decode and the log.
    enricher: enrich::Enricher,
    /// `--redact`: applied to every record on its way into the log.
    redactor: crate::redact::Redactor,
    /// Who reads the snapshots, when not root (`--user`, sudo).
    viewer: Option<crate::snapshot::Viewer>,
    /// Why the command could not be run, for the trailer.
    command_error: Option<String>,
    /// Records handed to the log, by type (`tracer_events_total`).
    counts: std::collections::BTreeMap<&'static str, u64>,
    /// When to drain again though no wake-up came (see `pump::ready`).
    catch_up: Option<tokio::time::Instant>,
    /// The last `ready` returned at the catch-up time, not at a readiness.
    caught_up: std::sync::atomic::AtomicBool,
    /// The records written since the daemon's last live look (`tap`), as
    /// written (redacted): the look analyses them, never the log read back.
    tapped: Option<Vec<Record>>,
    /// Processes with a kill-family call that opened a fold in the kernel:
    /// it may be counting more of them (`write_kill_folds` at their exit).
    kill_folds: Senders,
}

/// A bounded set of processes (16 B each); when full, forgetting one is
/// left to the stop, which takes every count the kernel still holds.
#[derive(Default)]
struct Senders(std::collections::HashSet<crate::eventlog::ProcKey>);

impl Senders {
    const MAX: usize = 1 << 16;

    fn remember(&mut self, key: crate::eventlog::ProcKey) {
        if self.0.len() < Self::MAX {
            self.0.insert(key);
        }
    }

    fn forget(&mut self, key: &crate::eventlog::ProcKey) -> bool {
        self.0.remove(key)
    }
}

impl Session {
    /// Start capturing into a fresh live log in `out`, opened with `header`;
    /// every record is masked by `redactor` on its way in. In the runtime
    /// (the ring buffer is registered with its reactor).
    pub fn start(
        capture: Capture,
        out: OutDir,
        header: &Header,
        opts: &CaptureOptions,
        redactor: Redactor,
    ) -> Result<Self, TracerError> {
        let writer = create_log(&out, header)?;
        let mut session = Self::new(capture, writer, out, opts.last_words_bytes)?;
        session.live_segment = header.segment;
        session.debug_dirs = opts.debug_dirs.clone();
        session.redact_with(redactor);
        Ok(session)
    }

    fn new(
        mut capture: Capture,
        writer: LogWriter,
        out: OutDir,
        last_words_bytes: usize,
    ) -> Result<Self, TracerError> {
        let ring = watch_readable(capture.ring()?).map_err(TracerError::PollRing)?;
        let crashes = watch_readable(capture.crash_ring()?).map_err(TracerError::PollRing)?;
        Ok(Self {
            capture,
            ring,
            crashes,
            pending_crashes: Vec::new(),
            waiting: Vec::new(),
            symbolizing: None,
            exes: Default::default(),
            libs: Default::default(),
            images: Default::default(),
            debug_dirs: Vec::new(),
            writer,
            out,
            series: Series::default(),
            live_segment: 0,
            unwritten_before: 0,
            too_large_before: 0,
            cut_before: 0,
            undecodable: 0,
            last_words: LastWordsStore::new(last_words_bytes),
            existing: Vec::new(),
            enricher: enrich::Enricher::new(),
            redactor: Default::default(),
            viewer: None,
            command_error: None,
            counts: Default::default(),
            catch_up: None,
            caught_up: std::sync::atomic::AtomicBool::new(false),
            tapped: None,
            kill_folds: Senders::default(),
        })
    }

    /// Go on from an earlier daemon's segments, adopted (see
    /// [`Series::adopt`]): read back before this run's own.
    pub fn continue_series(&mut self, series: Series) {
        self.series = series;
    }

    /// Files of the output directory with a segment's name that tracer did
    /// not accept as its own, and why.
    pub fn ignored(&self) -> Vec<String> {
        self.series.ignored().to_vec()
    }

    /// The loaded programs and maps (the watchdog and the spawn use them).
    pub fn capture(&self) -> &Capture {
        &self.capture
    }

    pub fn capture_mut(&mut self) -> &mut Capture {
        &mut self.capture
    }

    /// The command could not be run: the trailer says why, so the reports
    /// (and `tracer report`) can.
    pub fn set_command_error(&mut self, reason: String) {
        self.command_error = Some(reason);
    }

    /// `s` with `--redact` patterns masked, as the log would keep it.
    pub fn redact_text(&self, s: &str) -> String {
        self.redactor.text(s).into_owned()
    }

    /// Mask `--redact` patterns in every record written from now on.
    pub fn redact_with(&mut self, redactor: crate::redact::Redactor) {
        if redactor.is_active() {
            // Room for a secret that straddles the cut to be seen whole.
            self.last_words =
                LastWordsStore::with_slack(self.last_words.cap(), crate::redact::CUT_SLACK);
        }
        self.redactor = redactor;
    }

    /// Snapshots go to `viewer`: withhold from them what /proc would not
    /// show them of another user's processes.
    pub fn snapshots_for(&mut self, viewer: crate::snapshot::Viewer) {
        self.viewer = Some(viewer);
    }

    /// Every process running now, with exact identities and parents.
    pub fn existing(&mut self) -> Result<Vec<tracer_common::ExistingRecord>, TracerError> {
        self.capture.list_existing()?;
        self.drain()?;
        Ok(std::mem::take(&mut self.existing))
    }

    pub fn track(&mut self, keys: &[crate::eventlog::ProcKey]) -> Result<(), TracerError> {
        self.capture.track(keys)
    }

    pub fn set_config(&mut self, cfg: tracer_common::RuntimeConfig) -> Result<(), TracerError> {
        self.capture.set_config(cfg)
    }

    pub fn tracked(&self) -> Result<Vec<crate::eventlog::ProcKey>, TracerError> {
        self.capture.tracked()
    }

    /// Snapshot every live process of the run into the log; returns it as
    /// logged (redacted).
    pub fn log_snapshot(&mut self, reason: &str) -> Result<crate::snapshot::Snapshot, TracerError> {
        let pids: Vec<u32> = self.tracked()?.iter().map(|k| k.pid).collect();
        let snapshot = crate::snapshot::take_for(&pids, self.viewer);
        let at = self.writer.stamp(boot_ns());
        self.write(&Record::Snapshot(crate::eventlog::SnapshotTaken {
            at,
            reason: reason.into(),
            snapshot: snapshot.clone(),
        }))?;
        self.writer.flush();
        Ok(self.redactor.snapshot_copy(&snapshot))
    }

    /// Log a leaked process, stamped now.
    pub fn log_leak(&mut self, mut leak: crate::eventlog::Leak) -> Result<(), TracerError> {
        leak.at = self.writer.stamp(boot_ns());
        self.write(&Record::Leak(leak))
    }

    /// Log a sample of the run's resources, stamped now.
    pub fn log_resources(&mut self, mut r: crate::eventlog::Resources) -> Result<(), TracerError> {
        r.at = self.writer.stamp(boot_ns());
        self.write(&Record::Resources(r))
    }

    /// Log a window from a runner's report (`--test-report`), stamped now.
    pub fn log_test_window(
        &mut self,
        mut w: crate::eventlog::TestWindow,
    ) -> Result<(), TracerError> {
        w.at = self.writer.stamp(boot_ns());
        self.write(&Record::TestWindow(w))
    }

    /// Keep a copy of every record written from now on, for
    /// [`Session::take_tapped`] (the daemon's live findings).
    pub fn tap(&mut self) {
        self.tapped.get_or_insert_with(Vec::new);
    }

    /// The records written since the last call (none unless [`Session::tap`]).
    pub fn take_tapped(&mut self) -> Vec<Record> {
        self.tapped.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// How many records wait for [`Session::take_tapped`].
    pub fn tapped_len(&self) -> usize {
        self.tapped.as_ref().map_or(0, Vec::len)
    }

    /// The one way records reach the log: redacted here. A write failure is
    /// not the run's end: the writer counts what it could not write.
    fn write(&mut self, rec: &Record) -> Result<(), TracerError> {
        let rec = self.redactor.apply(rec);
        if let Some(tapped) = &mut self.tapped {
            tapped.push(Record::clone(&rec));
        }
        self.writer.write(&rec);
        *self
            .counts
            .entry(crate::eventlog::type_name(&rec))
            .or_default() += 1;
        Ok(())
    }

    /// Records handed to the log so far, by type (written or counted lost).
    pub fn event_counts(&self) -> &std::collections::BTreeMap<&'static str, u64> {
        &self.counts
    }

    /// Drain what is left, read the loss counters, close the log, detach
    /// the hooks. The log is read back from the [`Closed`] run.
    pub fn finish(self, command_status: Option<ExitStatus>) -> Result<Closed, TracerError> {
        self.close(command_status, false)
    }

    /// A daemon's stop: [`Session::finish`], with the trailer that ends the
    /// series (naming the segments before it), and the live file put back
    /// under its name if the job moved it (said on stderr): `tracer report
    /// DIR` must read the whole series or refuse it.
    pub fn finish_series(self) -> Result<Closed, TracerError> {
        let closed = self.close(None, true)?;
        closed.put_back_live();
        Ok(closed)
    }

    fn close(
        mut self,
        command_status: Option<ExitStatus>,
        ends_series: bool,
    ) -> Result<Closed, TracerError> {
        self.drain()?;
        // The crash stacks still being parsed, waited for (bounded).
        self.finish_symbolizing()?;
        // Kill-family calls still counted (folded) for live processes.
        self.write_kill_folds(None)?;
        // Signal floods still being counted for live processes.
        for wire in self.capture.signal_counts() {
            let at = self.writer.stamp(wire.ktime());
            if let Some(rec) = wire.into_record(at) {
                self.write(&rec)?;
            }
        }
        // Still alive at the end (leaks): their words so far, from the
        // kernel's tails and from per-write records alike.
        for t in self.capture.stderr_tails() {
            self.last_words.push(t.key, &t.bytes, t.total, t.to_null);
        }
        let now = boot_ns();
        for key in self.last_words.remaining() {
            let task = Task {
                pid: key.pid,
                tid: key.pid,
                start: key.start,
                comm: None,
            };
            self.write_last_words(&task, now)?;
        }
        let mut trailer = self.trailer(command_status)?;
        if ends_series {
            trailer.series_end = Some(SeriesEnd {
                segments: self.series.numbers(),
            });
        }
        self.writer.finish(trailer.clone());
        self.capture.shutdown();
        Ok(Closed {
            trailer,
            tapped: self.tapped.unwrap_or_default(),
            writer: self.writer,
            out: self.out,
            series: self.series,
            live_segment: self.live_segment,
        })
    }

    pub fn out(&self) -> &OutDir {
        &self.out
    }

    /// The trailer as of now (loss counters are cumulative).
    pub fn trailer(&self, command_status: Option<ExitStatus>) -> Result<Trailer, TracerError> {
        let per_cpu = self.capture.drops()?;
        let fails = self.capture.fails()?;
        let sum = |r: DropReason| per_cpu.iter().map(|c| c[r as usize]).sum::<u64>();
        Ok(Trailer {
            ended_at: wall_time(boot_ns(), boot_to_wall_ns()),
            events: self.writer.events_written(),
            lost: Loss {
                ringbuf_full: sum(DropReason::RingBufFull),
                tracked_map_full: sum(DropReason::TrackedMapFull),
                inflight_map_full: sum(DropReason::InflightMapFull),
                undecodable: self.undecodable,
                user_read_failed: fails[FailReason::UserRead as usize],
                task_read_failed: fails[FailReason::TaskRead as usize],
                unwritten: self.unwritten_before + self.writer.unwritten(),
                write_error: self.writer.error().map(|e| e.to_string()),
                too_large: self.too_large_before + self.writer.too_large(),
                cut_to_fit: self.cut_before + self.writer.cut_to_fit(),
                crash_ring_full: fails[FailReason::CrashRingFull as usize],
                marks_dropped: fails[FailReason::MarkRate as usize],
                per_cpu,
            },
            command_status,
            command_error: self.command_error.clone(),
            series_end: None,
            program_stats: self.capture.program_stats(),
        })
    }

    /// Bytes in the current log file.
    pub fn log_bytes(&self) -> u64 {
        self.writer.bytes()
    }

    /// Events in the live file (its header not counted).
    pub fn live_events(&self) -> u64 {
        self.writer.events_in_file()
    }

    /// Close the current file with a trailer, rename it to segment `number`,
    /// and go on in a fresh file under the live name; sequence numbers
    /// continue. The segment is remembered as tracer's own (its (dev, ino)).
    pub fn rotate(&mut self, number: u32, header: &Header) -> Result<(), TracerError> {
        let trailer = self.trailer(None)?;
        let next = self.writer.next_seq();
        self.writer.finish(trailer);
        let live = LIVE;
        let rotated = segment_name(number);
        if self.out.holds(live, self.writer.file()) {
            self.out
                .rename(live, &rotated)
                .map_err(|source| self.output_error(&rotated, source))?;
        } else {
            // The job moved the live file away (tracer kept writing it by
            // its fd): the segment is a copy of tracer's own file, and
            // whatever the job put under the live name is not renamed in.
            self.out
                .copy_in(&rotated, self.writer.reader(), true)
                .map_err(|source| self.output_error(&rotated, source))?;
            log::warn!("{live} was moved away during the run; {rotated} is tracer's own copy");
        }
        let segment = self
            .out
            .open_read(&rotated)
            .map_err(|source| self.output_error(&rotated, source))?;
        self.series
            .push(number, &segment)
            .map_err(|source| self.output_error(&rotated, source))?;
        let file = self
            .out
            .create_replacing(live)
            .map_err(|source| self.output_error(live, source))?;
        self.unwritten_before += self.writer.unwritten();
        self.too_large_before += self.writer.too_large();
        self.cut_before += self.writer.cut_to_fit();
        self.writer = LogWriter::continuing(file, header, next);
        self.live_segment = header.segment;
        Ok(())
    }

    /// The number the next rotated segment takes.
    pub fn next_segment(&self) -> Result<u32, TracerError> {
        Ok(self.series.next_number()?)
    }

    /// `--keep-segments`: only segments tracer knows as its own go.
    /// Returns how many went.
    pub fn prune(&mut self, keep: usize) -> usize {
        self.series.prune(&self.out, keep)
    }

    /// Log a process that was running before capture began.
    pub fn log_existing(&mut self, mut x: crate::eventlog::Existing) -> Result<(), TracerError> {
        x.at = self.writer.stamp(boot_ns());
        self.write(&Record::Existing(x))
    }

    fn output_error(&self, name: &str, source: std::io::Error) -> TracerError {
        TracerError::output(self.out.display(name))(source)
    }
}

/// A finished capture: the log's file, its directory, and its trailer.
pub struct Closed {
    /// As written, or as it would have been where the disk refused it.
    pub trailer: Trailer,
    /// What was written since the last `take_tapped` (see [`Session::tap`]).
    pub tapped: Vec<Record>,
    pub writer: LogWriter,
    pub out: OutDir,
    series: Series,
    live_segment: u32,
}

impl Closed {
    /// The same log streamed into the reports' summary and model: never in
    /// memory as records (a long run's log is hundreds of MB of them).
    pub fn folded(&self) -> Result<crate::report::Loaded, TracerError> {
        let kept = self.writer.error().map(|_| self.trailer.clone());
        Ok(crate::report::load_held(
            &self.series,
            &self.out,
            self.writer.reader(),
            kept,
        )?)
    }

    /// A daemon's live file, closed, under its name again if the job moved
    /// or removed it: a copy of tracer's own file, root's, made only where
    /// the name is free (a file the job put there is left alone, and the
    /// copy is then the segment of the live file's own number), said on
    /// stderr.
    fn put_back_live(&self) {
        if self.out.holds(LIVE, self.writer.file()) {
            return;
        }
        let copy = |name: &str| self.out.copy_in(name, self.writer.reader(), false);
        let own = segment_name(self.live_segment);
        let said = match copy(LIVE) {
            Ok(Some(_)) => format!(
                "{LIVE} was moved away or removed during the run; the daemon wrote its own copy back under that name"
            ),
            Ok(None) => match copy(&own) {
                Ok(Some(_)) => format!(
                    "{LIVE} was replaced during the run by a file the daemon did not write (not read); the daemon's own is {own}"
                ),
                Ok(None) => format!(
                    "{LIVE} and {own} were both taken during the run by files the daemon did not write: its last file could not be written back"
                ),
                Err(e) => format!("{LIVE} was replaced during the run and the daemon's own copy cannot be written ({e})"),
            },
            Err(e) => format!(
                "{LIVE} was moved away or removed during the run and cannot be written back ({e})"
            ),
        };
        crate::say!("tracer: warning: in {}: {said}", self.out.path().display());
    }

    /// Say on stderr what the log file lacks when writing it failed (a full
    /// disk): the run went on, and the reports count the missing events.
    pub fn warn_if_log_failed(&self) {
        if let Some(e) = self.writer.error() {
            crate::say!(
                "tracer: error: {} stopped being written ({e}); {} events are missing from it, the reports count them as lost",
                self.out.display(LIVE).display(),
                self.writer.unwritten()
            );
        }
    }
}
