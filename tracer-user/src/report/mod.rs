//! Reports: report.json (machines), report.md (people), a few stderr lines.
//! All three are pure functions of the event log.
mod cells;
mod chains;
mod facts;
pub mod groups;
pub mod html;
pub(crate) mod json;
pub mod junit;
mod last_words;
mod leak;
mod load;
mod loss;
mod markdown;
pub mod next_step;
pub mod resources;
#[cfg(test)]
mod schema_tests;
mod sections;
mod snapshots;
#[cfg(test)]
mod tests;
mod verdict;

use std::{
    io::{self, Write},
    path::{Path, PathBuf},
};

pub use facts::{LogFacts, RunFacts};
pub use json::{build_report, Report, RunShape, RANKING_RULE, REPORT_SCHEMA_VERSION};
pub use verdict::verdict;

pub use load::{load, load_held, load_segments, Loaded};

use crate::{
    analysis::{Analysis, Rank},
    eventlog::LogSummary,
    outdir::OutDir,
};

#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// Commands (argv joined by spaces) or executables whose non-zero exit
    /// always gets a certificate.
    pub watch: Vec<regex::Regex>,
    /// What became of the `--otlp-endpoint` export, for the loss section.
    pub export: Option<crate::otlp::ExportFacts>,
    /// `--junit FILE`: where the JUnit file goes, its directory held from
    /// the start.
    pub junit: Option<std::sync::Arc<crate::outdir::OutFile>>,
    /// Keep every certificate until the reports fold them (the OTLP export
    /// at the end of a run sends each death); otherwise the analysis folds
    /// as it ranks and holds only the stories' certificates.
    pub every_certificate: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub json_path: PathBuf,
    pub md_path: PathBuf,
    /// Plain text, a few lines: the verdict, the unexpected deaths, the loss.
    pub summary: String,
    pub unexpected_deaths: usize,
    /// Killing signals the run sent to processes outside it (they lead the
    /// verdict, which is then never painted as clean).
    pub outbound_kills: usize,
}

/// report.json, pretty-printed, newline-terminated.
pub fn render_json(r: &Report) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("report types always serialize");
    s.push('\n');
    s
}

pub fn render_markdown(r: &Report) -> String {
    markdown::render(r)
}

/// The report files of a directory, in the order they are written.
pub use crate::outdir::names::{
    REPORT_HTML as HTML_FILE, REPORT_JSON as JSON_FILE, REPORT_MD as MD_FILE,
};

/// What the reports were written from, and how writing them went.
pub struct Written {
    pub log: LogSummary,
    /// The analysis, written or not (`--fail-on` judges it either way).
    pub analysis: Analysis,
    pub rendered: io::Result<Rendered>,
}

/// The one way reports are written (`analyze → export → write`): `loaded`
/// analysed once; `export` sees the analysis before the files are written
/// (the OTLP export, whose outcome the loss section reports; `None` keeps
/// `opts.export`); then report.json, report.md, report.html and the JUnit
/// file, each atomically (a reader sees the old file or the new one) and
/// never through a link.
pub fn write(
    loaded: Loaded,
    out: &OutDir,
    opts: &ReportOptions,
    export: impl FnOnce(&Analysis) -> Option<crate::otlp::ExportFacts>,
) -> Written {
    let Loaded { log, model } = loaded;
    let analysis = json::analyze_model(&model, opts);
    let exported = export(&analysis);
    let mut report = json::report_of(&log, &model, analysis);
    report.log.export = exported.or_else(|| opts.export.clone());
    let timeline = html::Context::from_model(&model, &report);
    drop(model);
    let rendered = write_files(&report, &timeline, out, opts.junit.as_deref());
    Written {
        log,
        analysis: report.analysis,
        rendered,
    }
}

/// A run's report parts when its analysis is already made (a daemon's,
/// from its ledger: live/ledger.rs).
pub struct Analysed {
    pub log: LogSummary,
    pub shape: RunShape,
    pub analysis: Analysis,
    pub timeline: html::Context,
    /// Sentences for the log's warnings (what the ledger's bounds folded).
    pub notes: Vec<String>,
    /// The run's resources (`resources::collect_parts`).
    pub resources: Option<resources::ResourcesReport>,
    /// What the test integrations said of themselves (`run.test_integrations`).
    pub test_integrations: Vec<crate::labels::status::TestIntegration>,
}

/// The reports of [`Analysed`] parts: the same files as [`write`].
pub fn write_analysed(a: Analysed, out: &OutDir, opts: &ReportOptions) -> Written {
    let mut report = json::report_from(&a.log, a.shape, Vec::new(), a.analysis);
    report.log.export = opts.export.clone();
    report.log.warnings.extend(a.notes);
    report.resources = a.resources;
    report.run.test_integrations = a.test_integrations;
    let rendered = write_files(&report, &a.timeline, out, opts.junit.as_deref());
    Written {
        log: a.log,
        analysis: report.analysis,
        rendered,
    }
}

fn write_files(
    report: &Report,
    timeline: &html::Context,
    out: &OutDir,
    junit: Option<&crate::outdir::OutFile>,
) -> io::Result<Rendered> {
    let json_path = out.display(JSON_FILE);
    let md_path = out.display(MD_FILE);
    let wrote = |name: &str, data: &[u8]| {
        out.write_atomic(name, data)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", out.display(name).display())))
    };
    wrote(JSON_FILE, render_json(report).as_bytes())?;
    wrote(MD_FILE, render_markdown(report).as_bytes())?;
    let html = html::render(report, timeline);
    wrote(HTML_FILE, html.as_bytes())?;
    if let Some(file) = junit {
        file.write(junit::render(report).as_bytes())
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", file.display().display())))?;
    }
    let summary = summary(report, &md_path, &json_path);
    Ok(Rendered {
        json_path,
        md_path,
        summary,
        unexpected_deaths: report.analysis.counts.unexpected,
        outbound_kills: report
            .analysis
            .foreign_signals
            .iter()
            .filter(|f| f.outbound_kill)
            .count(),
    })
}

/// Line prefixes `print_summary` colours by; part of the plain text too.
const ITEM: &str = "  * ";
const WARN: &str = "  ! ";
/// A root's chain of consequences, under its item.
const THEN: &str = "      ";
const MAX_ITEMS: usize = 5;

/// The stderr summary (public for the output-invariant tests).
pub fn summary(r: &Report, md: &Path, json: &Path) -> String {
    // Every line starts with tracer's own words; the data in it is escaped
    // for a terminal (a CI log is one), so no line of it is a workflow
    // command or an escape sequence, and the verdict stays one line.
    let t = crate::text::terminal::line;
    let mut lines = vec![format!("tracer: {}", t(&r.verdict))];
    if let Some(n) = &r.next_step {
        lines.push(format!("tracer: next: {}", t(&n.line)));
    }
    // A consequence is shown on its root's `then:` line, not as a death of
    // its own.
    let shown: Vec<_> = r
        .analysis
        .certificates
        .iter()
        .filter(|c| !matches!(c.rank, Rank::Expected | Rank::Consequence))
        .collect();
    for c in shown.iter().take(MAX_ITEMS) {
        lines.push(format!("{ITEM}#{} {}", c.id, t(&c.headline)));
        if let Some(then) = crate::analysis::cascade::then_line(&r.analysis.certificates, c) {
            lines.push(format!("{THEN}{}", t(&then)));
        }
    }
    if shown.len() > MAX_ITEMS {
        lines.push(format!(
            "{ITEM}… and {} more in the report",
            shown.len() - MAX_ITEMS
        ));
    }
    let loss = loss::loss_line(r).replace("**", "");
    let undelivered = r.log.export.as_ref().is_some_and(|x| x.undelivered > 0);
    let prefix = if r.log.truncated || r.log.lost_total > 0 || undelivered {
        WARN
    } else {
        "  "
    };
    lines.push(format!("{prefix}{}", t(&loss)));
    if !r.run.hooks_missing.is_empty() {
        lines.push(format!(
            "{WARN}hooks missing: {}",
            t(&r.run.hooks_missing.join(", "))
        ));
    }
    // Two spaces, no comma: terminals that link paths stop at whitespace.
    let html = md.with_file_name(HTML_FILE);
    lines.push(format!(
        "  reports: {}  {}  {}",
        t(&md.display().to_string()),
        t(&html.display().to_string()),
        t(&json.display().to_string())
    ));
    lines.join("\n") + "\n"
}

/// Whether to colour a stream: only a terminal, and never when NO_COLOR is
/// set to a non-empty value (https://no-color.org).
pub fn use_color(stream_is_tty: bool) -> bool {
    stream_is_tty && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

pub fn print_summary(r: &Rendered, to: &mut dyn Write, color: bool) -> io::Result<()> {
    if !color {
        return to.write_all(r.summary.as_bytes());
    }
    const RED: &str = "\x1b[1;31m";
    const GREEN: &str = "\x1b[1;32m";
    const YELLOW: &str = "\x1b[33m";
    const RESET: &str = "\x1b[0m";
    for (i, line) in r.summary.lines().enumerate() {
        let paint = if i == 0 {
            if r.unexpected_deaths > 0 || r.outbound_kills > 0 {
                RED
            } else if line.contains("non-zero") || line.contains("incomplete") {
                YELLOW
            } else {
                GREEN
            }
        } else if line.starts_with(WARN) {
            YELLOW
        } else if line.starts_with(ITEM) && r.unexpected_deaths > 0 {
            RED
        } else {
            ""
        };
        if paint.is_empty() {
            writeln!(to, "{line}")?;
        } else {
            writeln!(to, "{paint}{line}{RESET}")?;
        }
    }
    Ok(())
}
