//! What `record`, `report` and `daemon` share downstream of a log: the
//! report flags, writing the reports (and the OTLP export) from one
//! analysis, and `--fail-on` judging that same analysis.
use std::{io::IsTerminal, path::PathBuf, sync::Arc};

use crate::{
    analysis::{Analysis, AnalysisOptions},
    commands::fail_on,
    error::{TracerError, WriteContext},
    eventlog::LogSummary,
    otlp::{self, Endpoint, ExportFacts},
    outdir::{OutDir, OutFile, Policy},
    report::{self, Loaded, ReportOptions},
};

/// Options that shape the reports (shared by `record`, `report` and `daemon`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReportFlags {
    /// Also certify non-zero exits of processes whose command line matches
    /// this regex (repeatable), however short-lived.
    #[arg(long, value_name = "REGEX")]
    pub watch: Vec<regex::Regex>,
    /// Replace what matches REGEX (repeatable) by [REDACTED]: in command lines
    /// (each argv element on its own; only the matched part), executable
    /// paths, process names, open-file paths, and stderr last words.
    /// `record` and `daemon` mask before anything is written, so the log, the
    /// reports and the stderr summary never hold the secret; `report` masks
    /// the reports it writes (the log it reads is left as it is).
    #[arg(long, value_name = "REGEX")]
    pub redact: Vec<String>,
    /// Send every certificate, near miss, foreign signal and leak as an
    /// OpenTelemetry log record to this OTLP/HTTP endpoint (a collector's
    /// base URL, e.g. http://127.0.0.1:4318; `/v1/logs` is appended unless
    /// the URL has a path). Default: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT; headers from OTEL_EXPORTER_OTLP_HEADERS.
    /// A failing endpoint never fails the run: the report's loss section
    /// says what was not delivered.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Also write a JUnit XML file here: one failing test case per
    /// unexpected death and per signal across the run's boundary, each named
    /// by its signature (short command names, cause, killer relation: the
    /// same in every run, no pid or time), the details in its message
    /// (docs/report.md). Written as the reports are (0600, never through a
    /// link, handed to the run's user); a path outside the output directory
    /// gets the same care, its directory held from the start.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

impl ReportFlags {
    pub fn options(&self) -> ReportOptions {
        ReportOptions {
            watch: self.watch.clone(),
            export: None,
            junit: None,
            every_certificate: false,
        }
    }

    /// `--junit FILE`'s directory, opened and held now (before the command
    /// runs), under the output directory's policy.
    pub fn open_junit(&self, policy: Policy) -> Result<Option<Arc<OutFile>>, TracerError> {
        match &self.junit {
            Some(path) => Ok(Some(Arc::new(OutFile::open(path, policy)?))),
            None => Ok(None),
        }
    }

    pub fn analysis_options(&self) -> AnalysisOptions {
        AnalysisOptions {
            watch: self.watch.clone(),
            fold: false,
            raw: false,
        }
    }
}

/// Where the reports' OTLP facts come from.
pub enum Export {
    /// Export the analysis now to `--otlp-endpoint` (or the environment's
    /// endpoint), if one is configured: `record`, `report`.
    Now,
    /// Exported already, live (a daemon's): what became of it, if anything.
    /// Nothing is sent again.
    Done(Option<ExportFacts>),
}

/// Write report.json, report.md and report.html into the held directory
/// (and the JUnit file), with a short summary on stderr, through the one
/// path ([`report::write`]). Returns the summary of the log and the analysis
/// the reports were written from, written or not. The log comes streamed
/// ([`report::load`]): a long run's records are never all in memory.
pub fn write_reports(
    loaded: Loaded,
    out: &OutDir,
    flags: &ReportFlags,
    junit: Option<&Arc<OutFile>>,
    export: Export,
) -> (LogSummary, Analysis, Result<(), TracerError>) {
    let (endpoint, done) = match export {
        Export::Now => (Endpoint::resolve(flags.otlp_endpoint.as_deref()), None),
        Export::Done(facts) => (None, facts),
    };
    let opts = ReportOptions {
        export: done,
        junit: junit.cloned(),
        every_certificate: endpoint.is_some(),
        ..flags.options()
    };
    let header = loaded.log.header.clone();
    let written = report::write(loaded, out, &opts, |a| {
        endpoint.map(|e| otlp::export_analysis(e, &header, a))
    });
    announced(written, out)
}

/// As [`write_reports`], from an analysis already made (a daemon's ledger).
pub fn write_analysed_reports(
    analysed: report::Analysed,
    out: &OutDir,
    flags: &ReportFlags,
    junit: Option<&Arc<OutFile>>,
    export: Option<ExportFacts>,
) -> (LogSummary, Analysis, Result<(), TracerError>) {
    let opts = ReportOptions {
        export,
        junit: junit.cloned(),
        ..flags.options()
    };
    let written = report::write_analysed(analysed, out, &opts);
    announced(written, out)
}

/// The short summary of written reports on stderr; what they were written
/// from, and how writing them went.
fn announced(
    written: report::Written,
    out: &OutDir,
) -> (LogSummary, Analysis, Result<(), TracerError>) {
    let result = written
        .rendered
        .map(|rendered| {
            let color = report::use_color(std::io::stderr().is_terminal());
            let _ = report::print_summary(&rendered, &mut std::io::stderr(), color);
        })
        .writing(out.path());
    (written.log, written.analysis, result)
}

/// The `--fail-on` verdict on the analysis the reports came from,
/// announced on stderr: each condition met, and a run that cannot be
/// certified because events were lost (one line, with why).
pub fn judge(
    conditions: &[fail_on::Condition],
    allow_loss: bool,
    log: &LogSummary,
    analysis: &Analysis,
) -> fail_on::Verdict {
    let verdict = fail_on::judge(conditions, allow_loss, log, analysis);
    for (c, n) in &verdict.met {
        crate::say!("tracer: --fail-on {}: {n} found", c.name());
    }
    if verdict.uncertified > 0 {
        let why = log
            .trailer
            .as_ref()
            .map(|t| t.lost.breakdown())
            .filter(|b| !b.is_empty())
            .map(|b| format!(" ({b})"))
            .unwrap_or_default();
        crate::say!(
            "tracer: --fail-on cannot certify: {} events lost{why}, so a death may be missing (--allow-loss judges what was recorded)",
            verdict.uncertified
        );
    }
    verdict
}
