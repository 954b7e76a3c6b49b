//! `tracer report`: re-render the reports from an event log (or a daemon's
//! log directory), offline.
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use crate::{
    commands::{
        fail_on,
        output::{self, ReportFlags},
    },
    error::TracerError,
    outdir::{OutDir, Policy},
    redact::Redactor,
    report,
};

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// The event log to read, or a daemon's output directory (its rotated
    /// series is read as one log).
    pub events: PathBuf,
    /// Directory for the reports (default: the log's directory).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Exit 86 if any of these happened, as `record --fail-on` would:
    /// foreign-signal, leak, oom, unexpected-death (comma-separated). A
    /// daemon's log supports foreign-signal, oom and unexpected-death.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "CONDITION")]
    pub fail_on: Vec<fail_on::Condition>,
    /// Judge `--fail-on` on what was recorded even when events were lost.
    /// By default a log with lost events and no condition met cannot be
    /// certified: exit 87 ("cannot certify: N events lost").
    #[arg(long, requires = "fail_on")]
    pub allow_loss: bool,
    #[command(flatten)]
    pub report: ReportFlags,
    /// A test runner's own report, FORMAT:PATH (repeatable): `go-json`
    /// (`go test -json` output) or `junit` (JUnit XML). Its tests are added
    /// to the log's as approximate test windows when rendering (the log is
    /// not changed): for a log recorded without `record --test-report`.
    #[arg(long, value_name = "FORMAT:PATH")]
    pub test_report: Vec<crate::labels::report_file::Spec>,
}

pub fn run(args: &ReportArgs) -> Result<ExitCode, TracerError> {
    let out_dir: PathBuf = match &args.output {
        Some(dir) => dir.clone(),
        // A daemon's directory holds its own reports.
        None if args.events.is_dir() => args.events.clone(),
        None => args
            .events
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    let redactor = Redactor::new(&args.report.redact)?;
    // Streamed: a million-event log is never in memory as records.
    let mut loaded = report::load(&args.events, &redactor)?;
    for spec in &args.test_report {
        let header = &loaded.log.header;
        // Offline: read as whoever runs `tracer report`.
        let windows = crate::labels::report_file::load(
            spec,
            header.boot_to_wall_ns,
            &header.started_at,
            None,
        );
        for w in windows {
            // Masked as the log's own text is.
            let mut rec = crate::eventlog::Record::TestWindow(w);
            redactor.record(&mut rec);
            if let crate::eventlog::Record::TestWindow(w) = rec {
                loaded.model.add_test_window(w);
            }
        }
    }
    if loaded.log.truncated {
        crate::say!(
            "tracer: warning: {} ends without a trailer (capture was interrupted); the report covers what was written",
            args.events.display()
        );
    }
    if loaded.log.header.mode == "daemon" {
        fail_on::daemon_supports(&args.fail_on)?;
    }
    // A daemon's series cut or rewritten (its live file moved away, a
    // segment removed): rendered with a warning on every surface, never
    // judged (docs/security.md, "Whose log is read").
    let not_whole = loaded.log.not_whole.clone();
    if let Some(why) = &not_whole {
        crate::say!(
            "tracer: warning: {}: not the daemon's whole log: {why}",
            args.events.display()
        );
    }
    let out_dir = if out_dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out_dir
    };
    let policy = Policy {
        owner: None,
        any_owner: true,
    };
    let out = OutDir::open(&out_dir, policy)?;
    let junit = args.report.open_junit(policy)?;
    let (log, analysis, written) = output::write_reports(
        loaded,
        &out,
        &args.report,
        junit.as_ref(),
        output::Export::Now,
    );
    written?;
    if let Some(why) = not_whole.filter(|_| !args.fail_on.is_empty()) {
        return Err(TracerError::SeriesNotWhole {
            path: args.events.clone(),
            why,
        });
    }
    let verdict = output::judge(&args.fail_on, args.allow_loss, &log, &analysis);
    Ok(verdict
        .exit_code()
        .map_or(ExitCode::SUCCESS, ExitCode::from))
}
