//! What `record`, `report` and `daemon` share downstream of a log: the
//! report flags, writing the reports (and the OTLP export) from one
//! analysis, and `--fail-on` judging that same analysis.
use std::{io::IsTerminal, path::PathBuf, sync::Arc};

use crate::{
    analysis::{Analysis, AnalysisOptions},
    commands::fail_on,
    error::{TracerError, WriteContext},
    eventlog::LogSummary,
    model::Model,
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
        }
    }
}

/// Write report.json, report.md and report.html into the held directory,
/// with a short summary on stderr; the log's findings go to the OTLP
/// endpoint first, if one is configured. Returns the analysis the reports
/// were written from, written or not. The log comes streamed ([`report::load`]):
/// a long run's records are never all in memory.
pub fn write_reports(
    log: Loaded,
    out: &OutDir,
    flags: &ReportFlags,
    junit: Option<&Arc<OutFile>>,
) -> (LogSummary, Analysis, Result<(), TracerError>) {
    let endpoint = Endpoint::resolve(flags.otlp_endpoint.as_deref());
    let Loaded { log, model } = log;
    let header = log.header.clone();
    let (analysis, written) = write_with(&log, model, out, flags, junit, None, |a| {
        endpoint.map(|e| otlp::export_analysis(e, &header, a))
    });
    (log, analysis, written)
}

/// The reports, with what became of an OTLP export already made (a
/// daemon's live export), or none; and the analysis they were written from.
/// The log comes streamed, as for [`write_reports`].
pub fn write_reports_exported(
    log: Loaded,
    out: &OutDir,
    flags: &ReportFlags,
    junit: Option<&Arc<OutFile>>,
    export: Option<ExportFacts>,
) -> Result<(LogSummary, Analysis), TracerError> {
    let Loaded { log, model } = log;
    let (analysis, written) = write_with(&log, model, out, flags, junit, export, |_| None);
    written.map(|()| (log, analysis))
}

fn write_with(
    log: &LogSummary,
    model: Model,
    out: &OutDir,
    flags: &ReportFlags,
    junit: Option<&Arc<OutFile>>,
    export: Option<ExportFacts>,
    export_now: impl FnOnce(&Analysis) -> Option<ExportFacts>,
) -> (Analysis, Result<(), TracerError>) {
    let opts = ReportOptions {
        export,
        junit: junit.cloned(),
        ..flags.options()
    };
    let (analysis, rendered) = report::write_loaded_exporting(log, model, out, &opts, export_now);
    let result = rendered
        .map(|rendered| {
            let color = report::use_color(std::io::stderr().is_terminal());
            let _ = report::print_summary(&rendered, &mut std::io::stderr(), color);
        })
        .writing(out.path());
    (analysis, result)
}

/// The `--fail-on` conditions met in the analysis the reports came from,
/// announced on stderr.
pub fn judge(
    conditions: &[fail_on::Condition],
    log: &LogSummary,
    analysis: &Analysis,
) -> Vec<(fail_on::Condition, usize)> {
    let met = fail_on::met(conditions, log, analysis);
    for (c, n) in &met {
        crate::say!("tracer: --fail-on {}: {n} found", c.name());
    }
    met
}
