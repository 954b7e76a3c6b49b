//! The daemon's looks: every `--metrics-interval` (and every
//! [`LOOK_AT_RECORDS`] new records), what was written since the last look
//! is analysed in the live window (never the log read back:
//! `live::window`); what is new goes to the metrics and the OTLP export, and
//! every look is merged into the ledger the reports are written from
//! (`live::ledger`). At the stop, the last records make a last look, and
//! the reports come from the ledger: nothing is read back.
use std::time::Duration;

use crate::{
    analysis::AnalysisOptions,
    error::TracerError,
    eventlog::{Counter, Frame, Header, LogSummary, Record, Trailer},
    live::{Ledger, Ledgered, Live, LiveResources, MAX_FOREIGN, MAX_STORIES},
    metrics::{server, Metrics},
    otlp::{self, Endpoint, ExportFacts, Exporter},
    report::{Analysed, Loaded, RunShape},
    run::session::Session,
};

/// New records that make a look due before the timer: the window holds the
/// new records and the last look's, so this bounds the daemon's memory at
/// any event rate. At ~11,000 events a second (a 10-minute soak on this
/// machine, BENCHMARKS.md) looks on the 1 s timer alone held ~22,000
/// records each and the daemon's RSS settled at ~95 MB; 4,096 is a few
/// looks a second there and none extra on a quiet node.
pub(super) const LOOK_AT_RECORDS: usize = 4096;

/// What shapes the looks (the daemon's flags).
pub(super) struct LiveOptions<'a> {
    /// `--metrics-listen`.
    pub metrics_listen: Option<&'a str>,
    /// `--metrics-interval`.
    pub interval: Duration,
    /// `--metrics-memcg-depth`.
    pub memcg_depth: usize,
    /// `--otlp-endpoint`.
    pub otlp_endpoint: Option<&'a str>,
    pub analysis: AnalysisOptions,
}

pub(super) struct Watch {
    live: Live,
    header: Header,
    period: Duration,
    opts: AnalysisOptions,
    metrics: Option<Metrics>,
    otlp: Option<Exporter>,
    boot_to_wall_ns: i64,
    /// This run's records, counted as the log's summary counts them.
    counter: Counter,
    /// Processes born (forked or found running), and the first and last
    /// kernel times: the run's shape.
    births: usize,
    /// The processes found running when the daemon began (their
    /// `existing` records: as many as there were then), and how many
    /// processes they forked since: the commands the run saw.
    existing: std::collections::HashSet<crate::eventlog::ProcKey>,
    commands: usize,
    first_t: Option<u64>,
    last_t: u64,
    /// What earlier runs of the daemon left in the directory (a restart):
    /// their summary and shape, their deaths already in the ledger.
    earlier: Option<(LogSummary, RunShape)>,
}

impl Watch {
    /// Starts the metrics server and the export when asked for, and the
    /// looks in any case. Every record written from here on is kept for
    /// the next look, so this comes before the scope is seeded (its
    /// `existing` records are births). `earlier`: the segments an earlier
    /// run left, streamed (a restart).
    pub(super) fn start(
        args: LiveOptions,
        session: &mut Session,
        header: &Header,
        earlier: Option<Loaded>,
    ) -> Result<Self, TracerError> {
        let metrics = match args.metrics_listen {
            Some(addr) => {
                let (metrics, registry, staged) = Metrics::new(header, args.memcg_depth);
                let bound = server::serve(addr, registry, staged)?;
                crate::say!("tracer: metrics on http://{bound}/metrics");
                Some(metrics)
            }
            None => None,
        };
        let endpoint = Endpoint::resolve(args.otlp_endpoint);
        session.tap();
        let mut live = Live::default();
        let earlier = earlier.map(|loaded| {
            let shape = RunShape::of(&loaded.model);
            live.ledger = Ledger::of_earlier(&loaded.model, &args.analysis);
            live.resources = LiveResources::of_earlier(&loaded.model);
            (loaded.log, shape)
        });
        let mut w = Self {
            live,
            header: header.clone(),
            period: args.interval,
            opts: args.analysis,
            metrics,
            otlp: endpoint.map(|e| Exporter::start(e, otlp::Context::from_env(header))),
            boot_to_wall_ns: header.boot_to_wall_ns,
            counter: Counter::default(),
            births: 0,
            existing: Default::default(),
            commands: 0,
            first_t: None,
            last_t: 0,
            earlier,
        };
        // What an earlier run of the daemon logged was counted by that run:
        // the metrics start with this run's records.
        w.totals(session);
        Ok(w)
    }

    /// How often the loop should call `look`.
    pub(super) fn period(&self) -> Duration {
        self.period
    }

    /// Hand on what the records since the last look make new.
    pub(super) fn look(&mut self, session: &mut Session) {
        self.totals(session);
        let new = session.take_tapped();
        if new.is_empty() && !self.live.window.waiting() {
            return;
        }
        self.hand_on(new, false);
    }

    /// `leftovers`: the ledger keeps this look's processes still running.
    fn hand_on(&mut self, new: Vec<Record>, leftovers: bool) {
        for rec in &new {
            self.counter.count(rec);
            if let Some(s) = rec.stamp() {
                self.first_t = Some(self.first_t.map_or(s.t, |f| f.min(s.t)));
                self.last_t = self.last_t.max(s.t);
            }
            match rec {
                Record::Existing(x) => {
                    self.births += 1;
                    self.existing.insert(x.task.key());
                }
                Record::Fork(f) if !f.thread => {
                    self.births += 1;
                    // A command: forked by a process already running when
                    // the daemon began (RunShape::of counts the same).
                    if self.existing.contains(&f.parent.key()) {
                        self.commands += 1;
                    }
                }
                _ => {}
            }
        }
        let records = new.len();
        let found = self.live.look(&self.header, new, &self.opts, leftovers);
        log::debug!(
            "look: {records} new records; held: window {} processes, seen {}, ledger {}",
            self.live.window.held(),
            self.live.seen.held(),
            self.live.ledger.held()
        );
        if let Some(m) = &self.metrics {
            m.observe(&found);
        }
        if let Some(x) = &mut self.otlp {
            x.send(&found, self.boot_to_wall_ns);
        }
        drop(found);
        // What the look built is freed: returned, not kept in glibc's holes
        // (a 30 s soak: steady RSS 58 MB, 29 MB of it heap, without).
        crate::capture::loader::release_heap();
    }

    /// A resource sample of the watched cgroup, for the metrics.
    pub(super) fn sampled(&self, r: &crate::eventlog::Resources) {
        if let Some(m) = &self.metrics {
            m.resources(r);
        }
    }

    /// An interim report (SIGUSR1): a look at what is written so far, then
    /// the ledger's report from a copy (the daemon goes on; its open deaths
    /// stay open).
    pub(super) fn interim(
        &mut self,
        session: &mut Session,
        frame: Frame,
        pruned: usize,
    ) -> Analysed {
        self.totals(session);
        let new = session.take_tapped();
        self.hand_on(new, true);
        let ledgered = self.live.ledger.clone().finish();
        self.stopped(frame, ledgered, pruned)
    }

    /// The daemon stops: hand on what its last records add (`last`: written
    /// since the last look), wait (bounded) for the export's delivery, and
    /// make the reports of the whole run from the ledger.
    pub(super) fn finish(
        mut self,
        last: Vec<Record>,
        frame: Frame,
        pruned: usize,
    ) -> (Option<ExportFacts>, Analysed) {
        // The last records, then a look with none: the deaths they hold
        // are no longer pending.
        self.hand_on(last, false);
        self.hand_on(Vec::new(), true);
        let export = self.otlp.take().map(|x| x.finish(otlp::FINISH_GRACE));
        let ledgered = std::mem::take(&mut self.live.ledger).finish();
        (export, self.stopped(frame, ledgered, pruned))
    }

    /// The summary and shape of the run so far (with an earlier run's), and
    /// what the ledger's bounds left out, in words.
    fn stopped(&self, frame: Frame, ledgered: Ledgered, pruned: usize) -> Analysed {
        let mut log = self.counter.clone().finish(frame);
        let mut shape = RunShape {
            root: None,
            root_status: None,
            duration_ns: self
                .last_t
                .saturating_sub(self.first_t.unwrap_or(self.last_t)),
            processes: self.births,
            commands: self.commands,
        };
        if let Some((before, before_shape)) = &self.earlier {
            log = joined(before, log);
            shape.processes += before_shape.processes;
            shape.commands += before_shape.commands;
            shape.duration_ns += before_shape.duration_ns;
        }
        let mut notes = Vec::new();
        if ledgered.stories_folded > 0 {
            notes.push(format!(
                "{} past the first {MAX_STORIES} certificates {} folded into {} signature's group (a daemon's report keeps at most {MAX_STORIES} certificates whole)",
                crate::analysis::wording::plural(ledgered.stories_folded, "death", "deaths"),
                if ledgered.stories_folded == 1 { "was" } else { "were" },
                if ledgered.stories_folded == 1 { "its" } else { "their" },
            ));
        }
        if ledgered.foreign_left_out > 0 {
            notes.push(format!(
                "{} across the run's boundary past the first {MAX_FOREIGN} {} not listed",
                crate::analysis::wording::plural(ledgered.foreign_left_out, "signal", "signals"),
                if ledgered.foreign_left_out == 1 {
                    "is"
                } else {
                    "are"
                },
            ));
        }
        if pruned > 0 {
            notes.push(format!(
                "{} deleted (--keep-segments): the certificates were made as their events came, but the events their evidence cites from {} are no longer on disk",
                crate::analysis::wording::plural(pruned, "segment was", "segments were"),
                if pruned == 1 { "it" } else { "them" },
            ));
        }
        Analysed {
            log,
            shape,
            analysis: ledgered.analysis,
            timeline: ledgered.timeline,
            notes,
            resources: self.resources(),
            test_integrations: ledgered.test_integrations,
        }
    }

    /// The run's resources section, its last minute ending at the last
    /// sample (a daemon watches no command whose end would close it).
    fn resources(&self) -> Option<crate::report::resources::ResourcesReport> {
        let r = &self.live.resources;
        let end = r.curve.recent.back()?.at.t;
        crate::report::resources::collect_parts(&r.curve, end, r.tests())
    }

    fn totals(&mut self, session: &Session) {
        if let Some(m) = &mut self.metrics {
            match session.trailer(None) {
                Ok(t) => m.totals(session.event_counts(), &t.lost),
                Err(e) => log::warn!("live findings: cannot read the loss counters: {e}"),
            }
        }
    }
}

/// The summary of an earlier run's segments and this run's, as one log:
/// the first header, every event, this run's trailer.
fn joined(before: &LogSummary, mut now: LogSummary) -> LogSummary {
    now.header = before.header.clone();
    now.events += before.events;
    for (k, n) in &before.by_type {
        *now.by_type.entry(k.clone()).or_default() += n;
    }
    now.first_seq = before.first_seq.or(now.first_seq);
    now.leaks += before.leaks;
    now.lines_skipped += before.lines_skipped;
    now
}

/// The frame of this run's log: its header, the trailer it ends with, and
/// what the directory held that was not read.
pub(super) fn frame(header: &Header, trailer: Trailer, ignored: Vec<String>) -> Frame {
    Frame {
        header: header.clone(),
        trailer: Some(trailer),
        truncated: false,
        ignored,
        lines_skipped: 0,
        not_whole: None,
    }
}
