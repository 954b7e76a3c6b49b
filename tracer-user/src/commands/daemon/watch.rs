//! The daemon's side of live findings: look at the log so far every
//! `--metrics-interval`, hand what is new to the metrics and the OTLP
//! export; at the end, export what the final log adds.
use std::time::Duration;

use crate::{
    analysis::AnalysisOptions,
    error::TracerError,
    eventlog::{EventLog, Header},
    metrics::{server, Metrics},
    otlp::{self, Endpoint, ExportFacts, Exporter},
    run::session::Session,
};

use crate::live::{fresh_in, Seen};

/// What asks for live findings (the daemon's flags).
pub struct LiveOptions<'a> {
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

pub struct Watch {
    seen: Seen,
    period: Duration,
    opts: AnalysisOptions,
    metrics: Option<Metrics>,
    otlp: Option<Exporter>,
    boot_to_wall_ns: i64,
    /// Records handed to the log at the last look: nothing new, no analysis.
    events_then: u64,
}

impl Watch {
    /// `None` when nothing asks for live findings.
    pub fn start(
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
                eprintln!("tracer: metrics on http://{bound}/metrics");
                Some(metrics)
            }
            None => None,
        };
        let mut w = Self {
            seen: Seen::default(),
            period: args.interval,
            opts: args.analysis,
            metrics,
            otlp: endpoint.map(|e| Exporter::start(e, otlp::Context::from_env(header))),
            boot_to_wall_ns: header.boot_to_wall_ns,
            events_then: 0,
        };
        // What an earlier run of the daemon logged (its segments are read
        // as part of the series) was counted by that run, not this one.
        if let Ok(log) = session.log_so_far() {
            fresh_in(&log, &w.opts, &mut w.seen);
        }
        w.totals(session);
        Ok(Some(w))
    }

    /// How often the loop should call `look`.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Hand on what is new in the log so far.
    pub fn look(&mut self, session: &mut Session) {
        self.totals(session);
        let now: u64 = session.event_counts().values().sum();
        if now == self.events_then {
            return;
        }
        let log = match session.log_so_far() {
            Ok(log) => log,
            Err(e) => {
                log::warn!("live findings: cannot read the log back: {e}");
                return;
            }
        };
        self.events_then = now;
        let found = fresh_in(&log, &self.opts, &mut self.seen);
        if let Some(m) = &self.metrics {
            m.observe(&found);
        }
        if let Some(x) = &mut self.otlp {
            x.send(&found, self.boot_to_wall_ns);
        }
    }

    /// The daemon stops: export what the final log adds, wait (bounded) for
    /// delivery, and say how the export went.
    pub fn finish(mut self, log: &EventLog) -> Option<ExportFacts> {
        let mut x = self.otlp.take()?;
        x.send(
            &fresh_in(log, &self.opts, &mut self.seen),
            self.boot_to_wall_ns,
        );
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
