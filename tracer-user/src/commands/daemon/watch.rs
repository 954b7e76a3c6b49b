//! The daemon's side of live findings: every `--metrics-interval`, analyse
//! what was written since the last look in its live window (never the log
//! read back: `live::window`), hand what is new to the metrics and the OTLP
//! export; at the end, the same for what the last records add.
use std::time::Duration;

use crate::{
    analysis::AnalysisOptions,
    error::TracerError,
    eventlog::{Header, Record},
    metrics::{server, Metrics},
    otlp::{self, Endpoint, ExportFacts, Exporter},
    run::session::Session,
};

use crate::live::{fresh_in_window, Seen, Window};

/// New records that make a look due before the timer: the window holds the
/// new records and the last look's, so this bounds the daemon's memory at
/// any event rate. At ~11,000 events a second (a 10-minute soak on this
/// machine, BENCHMARKS.md) looks on the 1 s timer alone held ~22,000
/// records each and the daemon's RSS settled at ~95 MB; 4,096 is a few
/// looks a second there and none extra on a quiet node.
pub(super) const LOOK_AT_RECORDS: usize = 4096;

/// What asks for live findings (the daemon's flags).
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
    seen: Seen,
    window: Window,
    header: Header,
    period: Duration,
    opts: AnalysisOptions,
    metrics: Option<Metrics>,
    otlp: Option<Exporter>,
    boot_to_wall_ns: i64,
}

impl Watch {
    /// `None` when nothing asks for live findings.
    pub(super) fn start(
        args: LiveOptions,
        session: &mut Session,
        header: &Header,
    ) -> Result<Option<Self>, TracerError> {
        let endpoint = Endpoint::resolve(args.otlp_endpoint);
        if args.metrics_listen.is_none() && endpoint.is_none() {
            return Ok(None);
        }
        let metrics = match args.metrics_listen {
            Some(addr) => {
                let (metrics, registry, staged) = Metrics::new(header, args.memcg_depth);
                let bound = server::serve(addr, registry, staged)?;
                crate::say!("tracer: metrics on http://{bound}/metrics");
                Some(metrics)
            }
            None => None,
        };
        // Every record from here on is kept for the next look.
        session.tap();
        let mut w = Self {
            seen: Seen::default(),
            window: Window::default(),
            header: header.clone(),
            period: args.interval,
            opts: args.analysis,
            metrics,
            otlp: endpoint.map(|e| Exporter::start(e, otlp::Context::from_env(header))),
            boot_to_wall_ns: header.boot_to_wall_ns,
        };
        // What an earlier run of the daemon logged was counted by that run:
        // the window starts with this run's records.
        w.totals(session);
        Ok(Some(w))
    }

    /// How often the loop should call `look`.
    pub(super) fn period(&self) -> Duration {
        self.period
    }

    /// Hand on what the records since the last look make new.
    pub(super) fn look(&mut self, session: &mut Session) {
        self.totals(session);
        let new = session.take_tapped();
        if new.is_empty() && !self.window.waiting() {
            return;
        }
        self.hand_on(new);
    }

    fn hand_on(&mut self, new: Vec<Record>) {
        let found = fresh_in_window(
            &mut self.window,
            &self.header,
            new,
            &self.opts,
            &mut self.seen,
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

    /// The daemon stops: hand on what its last records add (`last`: written
    /// since the last look), wait (bounded) for the export's delivery, and
    /// say how it went.
    pub(super) fn finish(mut self, last: Vec<Record>) -> Option<ExportFacts> {
        // The last records, then a look with none: the deaths they hold
        // are no longer pending.
        self.hand_on(last);
        self.hand_on(Vec::new());
        let x = self.otlp.take()?;
        Some(x.finish(otlp::FINISH_GRACE))
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
