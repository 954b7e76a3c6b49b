//! `tracer summarize`: many runs' report.json folded into death signatures
//! (the folding itself is the `summarize` pipeline stage).
use std::{io::Write as _, path::PathBuf, process::ExitCode};

use crate::{error::TracerError, summarize};

#[derive(clap::Args, Debug, Clone)]
pub struct SummarizeArgs {
    /// report.json files, or directories to search for them (at any depth).
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// Output format, written to stdout.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Md)]
    pub format: SummaryFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryFormat {
    Md,
    Json,
}

/// The summary on stdout, skipped inputs on stderr.
pub fn run(args: &SummarizeArgs) -> Result<ExitCode, TracerError> {
    let loaded = summarize::load(&args.reports);
    for s in &loaded.skipped {
        let t = crate::text::terminal::line;
        crate::say!("tracer: skipped {}: {}", t(&s.path), t(&s.error));
    }
    if loaded.runs.is_empty() {
        return Err(TracerError::NothingToSummarize);
    }
    let summary = summarize::summarize(&loaded);
    let text = match args.format {
        SummaryFormat::Md => summarize::markdown(&summary),
        SummaryFormat::Json => summarize::json(&summary),
    };
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) is not an error worth a message.
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    Ok(ExitCode::SUCCESS)
}
