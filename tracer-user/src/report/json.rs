//! report.json: the machine-readable report. Schema: docs/report.schema.json,
//! derived from these types (report/schema_tests.rs); prose: docs/report.md. Deterministic: every collection is ordered by log
//! position or a BTreeMap, and no clock is read.

use serde::Serialize;

use super::{
    facts::{LogFacts, RunFacts},
    verdict::skipped_lines,
    ReportOptions,
};
use crate::{
    analysis::{self, wording as w, Analysis, AnalysisOptions},
    eventlog::{EventLog, LogSummary, Loss},
    model::Model,
};

/// Bumped on any incompatible change to report.json.
/// 2: ancestry chains by id (`ancestry_id`, the top-level `ancestors`).
/// 3: near misses folded (`count`, `last_seq`, `last_time`), their sender by
/// entry (`sender_id`), the list capped (`near_misses_left_out`).
/// 4: cascades: the rank `consequence` (not counted under the others),
/// `counts.consequence`, certificates linked by id (`consequence_of`,
/// `consequences`).
/// 5: deaths of one signature folded (`death_groups`; report/groups.rs):
/// `certificates` no longer holds every death, and its ids have gaps.
pub const REPORT_SCHEMA_VERSION: u32 = 5;

pub const RANKING_RULE: &str = "Unexpected deaths come first, then workers that exited non-zero \
on their own, then the deaths that followed from those (consequences), then expected stops. A death is expected when the tracer stopped it (a cancellation \
it forwarded, its timeout, `--leaks kill`), when it was a parent-death signal, or when its own \
parent or ancestor sent SIGINT, SIGHUP, SIGTERM or SIGKILL (an orderly shutdown), or when the job's \
CI runner cancelled it (the `cancellation` that leads the verdict); a non-zero exit after the run \
was cancelled is expected too. Every other signal death is unexpected: killed by a \
sibling, a descendant, an unrelated or outside process, the OOM killer, a fault, itself, or an \
unobserved signal. A process that caught a signal from another process (it ran on after the \
delivery) and then raised the same signal on itself, exited 128+N, or exited non-zero within 5 s \
of a caught SIGINT, SIGHUP, SIGQUIT or SIGTERM (any time after, for the tracer's own) died of the \
caught signal: it is ranked by that signal's sender. \
Kernel causes: a SIGPIPE whose pipe's reader exited 0 (`producer | head`; so is a writer that \
re-raised SIGPIPE on itself or exited non-zero on the failed write, as Go, Python and Node do), a terminal hang-up \
caused by its own parent or ancestor, ^C at its terminal, a shell's kill of its own process group \
(its cleanup) and a kill at the end of its pid namespace after the init exited normally are \
expected; a timeout(1) that fired, or a timer of its own, ranks with the non-zero exits; a \
parent-death signal fired by the exit of a parent thread while the parent lived on, and a kill the \
tracer forwarded for a process of the run, are unexpected. A consequence follows from an unexpected death or a non-zero exit of a process it was \
waiting on (its child exited 128+N after that child died of N, its last words name that death, or \
it exited within 5 s of it; a wrapper that raised on itself the signal its child died of; a \
SIGPIPE after its reader died; a kill by its pid namespace's end): \
it is ranked after the non-zero exits and not counted again.";

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Report {
    /// Version of this schema; bumped on any incompatible change.
    pub report_schema: u32,
    /// Version of the tracer that rendered this report.
    pub rendered_by: String,
    /// One line a reviewer reads first.
    pub verdict: String,
    /// What to do next, for a class of death tracer recognises with
    /// certainty (report/next_step.rs); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_step: Option<super::next_step::NextStep>,
    /// The rule ordering certificates, in words.
    pub ranking_rule: String,
    /// Facts about the run.
    pub run: RunFacts,
    /// Facts about the event log, including loss.
    pub log: LogFacts,
    #[serde(flatten)]
    pub analysis: Analysis,
    /// Hang / cancellation snapshots, in log order.
    pub snapshots: Vec<super::snapshots::SnapshotReport>,
    /// The run's memory, CPU and pressure over time, when the log has
    /// samples of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<super::resources::ResourcesReport>,
}

pub fn build_report(log: &EventLog, opts: &ReportOptions) -> Report {
    let (model, analysis) = analyze(log, opts);
    let mut report = report_of(&LogSummary::of(log), &model, analysis);
    report.log.export = opts.export.clone();
    report
}

pub(super) fn analyze(log: &EventLog, opts: &ReportOptions) -> (Model, Analysis) {
    let model = Model::build(log);
    let analysis = analyze_model(&model, opts);
    (model, analysis)
}

pub(super) fn analyze_model(model: &Model, opts: &ReportOptions) -> Analysis {
    let aopts = AnalysisOptions {
        watch: opts.watch.clone(),
        fold: !opts.every_certificate,
        raw: false,
    };
    analysis::analyze_model(model, model.boot_to_wall_ns, &aopts)
}

/// What a report reads of the run's processes beyond the analysis: from
/// the model of the whole log, or from a daemon's ledger (live/ledger.rs),
/// which never holds that model.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunShape {
    /// The run's root as it was at its end (or the log's).
    pub root: Option<analysis::ProcRef>,
    /// How the root ended, if it did.
    pub root_status: Option<crate::eventlog::ExitStatus>,
    pub duration_ns: u64,
    /// Processes of the run.
    pub processes: usize,
    /// Processes forked by one already running when the capture began: a
    /// daemon's commands (facts.rs, `RunFacts::commands`).
    pub commands: usize,
}

impl RunShape {
    pub fn of(model: &Model) -> Self {
        let root = model.root.and_then(|k| model.proc(k));
        RunShape {
            duration_ns: root
                .and_then(|r| r.lifetime_ns())
                .unwrap_or(model.last_t.saturating_sub(model.first_t)),
            root: model.root.map(|k| {
                let t = root
                    .and_then(|r| r.end.as_ref())
                    .map_or(model.last_t, |e| e.t);
                analysis::proc_ref(model, model.boot_to_wall_ns, k, t)
            }),
            root_status: root.and_then(|r| r.end.as_ref()).map(|e| e.status.clone()),
            processes: model.procs.values().filter(|p| p.in_run).count(),
            commands: model
                .procs
                .values()
                .filter(|p| p.in_run && p.fork.is_some())
                .filter_map(|p| model.proc(p.parent?))
                .filter(|parent| parent.in_run && parent.fork.is_none())
                .count(),
        }
    }
}

/// The report of a log whose model is already built (the HTML timeline
/// reads the same model: built once, it is the report's largest cost).
pub(super) fn report_of(log: &LogSummary, model: &Model, mut analysis: Analysis) -> Report {
    let snapshots = super::snapshots::collect(model);
    let tests = std::mem::take(&mut analysis.test_memory);
    let mut r = report_from(log, RunShape::of(model), snapshots, analysis);
    r.resources = super::resources::collect(model, tests);
    // `--tests` wrote its integrations into a `tracer-tests-…` directory
    // and named it in what it changed (`--runtime-stacks` names none).
    let injected = r
        .run
        .env_changes
        .iter()
        .any(|c| c.new.contains("tracer-tests-"));
    r.run.test_integrations = crate::labels::status::collect(model, injected);
    r
}

/// The report from its parts: the log's summary, the run's shape, the
/// snapshots and the analysis.
pub(crate) fn report_from(
    log: &LogSummary,
    shape: RunShape,
    snapshots: Vec<super::snapshots::SnapshotReport>,
    analysis: Analysis,
) -> Report {
    let run = run_facts(log, shape);
    let log_facts = log_facts(log);
    let mut analysis = analysis;
    headlines_on_one_line(&mut analysis);
    let verdict = verdict_line(&analysis, &log_facts, &snapshots);
    // From the same findings the verdict named, before any folds away.
    let next_step = super::next_step::choose(&analysis, &snapshots).map(|mut n| {
        n.line = crate::text::one_line(&n.line);
        n
    });
    // Folded once the verdict has named what it names from every death.
    super::groups::fold(&mut analysis);
    Report {
        report_schema: REPORT_SCHEMA_VERSION,
        rendered_by: env!("CARGO_PKG_VERSION").to_string(),
        verdict,
        next_step,
        ranking_rule: RANKING_RULE.to_string(),
        run,
        log: log_facts,
        analysis,
        snapshots,
        resources: None,
    }
}

/// The run's facts: the log's header and trailer, and the run's shape.
fn run_facts(log: &LogSummary, shape: RunShape) -> RunFacts {
    let h = &log.header;
    let hooks_missing: Vec<String> = h
        .hooks
        .iter()
        .filter(|k| !k.attached)
        .map(|k| k.name.clone())
        .collect();
    let daemon = h.mode == "daemon";
    RunFacts {
        mode: h.mode.clone(),
        command: h.command.clone(),
        command_user: h.command_user.clone(),
        redactions: h.redactions,
        hostname: h.hostname.clone(),
        kernel: h.kernel.clone(),
        tracer_pid: h.tracer_pid,
        captured_by: h.tracer_version.clone(),
        started_at: h.started_at.clone(),
        ended_at: log.trailer.as_ref().map(|t| t.ended_at.clone()),
        duration_ns: shape.duration_ns,
        root: shape.root,
        command_status: log
            .trailer
            .as_ref()
            .and_then(|t| t.command_status.clone())
            .or(shape.root_status),
        processes: shape.processes,
        scope: daemon.then(|| h.scope.clone()).flatten(),
        commands: daemon.then_some(shape.commands),
        hooks: h.hooks.clone(),
        hooks_missing,
        pid_namespace: h.pid_namespace,
        ci: h.ci.clone(),
        env_changes: h.env_changes.clone(),
        test_integrations: Vec::new(),
    }
}

/// The log's facts: its counts, its loss, and what makes it incomplete.
fn log_facts(log: &LogSummary) -> LogFacts {
    let lost = log
        .trailer
        .as_ref()
        .map(|t| t.lost.clone())
        .unwrap_or_default();
    let mut warnings = incompleteness_warnings(log, &lost);
    let complete = warnings.is_empty();
    // A file the job could have planted is named, never read: it does not
    // make the log itself incomplete. Only segment-shaped names are listed
    // (digits), so nothing the job chose beyond that reaches the report.
    for why in &log.ignored {
        warnings.push(format!(
            "not part of this log (a file in the output directory tracer did not write): {why}"
        ));
    }
    let lost_total = lost.total() + log.lines_skipped;
    LogFacts {
        events: log.events,
        by_type: log.by_type.clone(),
        trailer_events: log.trailer.as_ref().map(|t| t.events),
        truncated: log.truncated,
        lost,
        lost_total,
        lines_skipped: log.lines_skipped,
        complete,
        warnings,
        export: None,
    }
}

/// Why the log may not hold the whole run, one warning each: none, and
/// the log is complete.
fn incompleteness_warnings(log: &LogSummary, lost: &Loss) -> Vec<String> {
    let h = &log.header;
    let mut warnings = Vec::new();
    if let Some(why) = &log.not_whole {
        warnings.push(format!("not the daemon's whole log: {why}"));
    }
    if log.truncated {
        warnings.push(
            "the log has no trailer: capture was interrupted, so events at the end and the loss \
             counters are unknown"
                .to_string(),
        );
    }
    if lost.total() > 0 {
        warnings.push(format!(
            "{} lost by the capture ({}): deaths, senders or causes may be missing",
            w::plural(lost.total() as usize, "event was", "events were"),
            lost.breakdown()
        ));
    }
    if log.lines_skipped > 0 {
        warnings.push(format!(
            "{}: what {} held is missing from this report",
            skipped_lines(log.lines_skipped),
            if log.lines_skipped == 1 { "it" } else { "they" }
        ));
    }
    for hook in h.hooks.iter().filter(|k| !k.attached) {
        let why = hook
            .detail
            .as_deref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        warnings.push(format!("hook {} was not attached{why}", hook.name));
    }
    // A daemon's oldest segments deleted by --keep-segments: the series
    // starts later than event 1, and the report says so.
    let pruned = log.first_seq.map_or(0, |s| s.saturating_sub(1));
    if pruned > 0 {
        warnings.push(format!(
            "the log begins at segment {}: the {} before it were deleted (--keep-segments), so deaths among them are not in this report",
            h.segment,
            w::plural(pruned as usize, "event", "events"),
        ));
    }
    if let Some(n) = log.trailer.as_ref().map(|t| t.events) {
        // A skipped line was an event the trailer counted.
        if n != log.events as u64 + pruned + log.lines_skipped {
            warnings.push(format!(
                "the trailer counts {n} events but the log holds {}",
                log.events
            ));
        }
    }
    warnings
}

/// Headlines and the verdict are the sentences CI scripts quote (an
/// annotation per death): one line, no control byte, even when the log
/// itself was tampered with (a signal or si_code name is copied as read).
fn headlines_on_one_line(analysis: &mut Analysis) {
    let examples = analysis.death_groups.iter_mut().map(|g| &mut g.example);
    for c in analysis.certificates.iter_mut().chain(examples) {
        c.headline = crate::text::one_line(&c.headline);
        c.cause.summary = crate::text::one_line(&c.cause.summary);
    }
    for m in &mut analysis.folded_mentions {
        m.headline = crate::text::one_line(&m.headline);
    }
}

/// The verdict, one line. Each clause is on one line before the verdict
/// is sized: the bound is on what report.md shows.
fn verdict_line(
    analysis: &Analysis,
    log_facts: &LogFacts,
    snapshots: &[super::snapshots::SnapshotReport],
) -> String {
    let mut parts = super::verdict::parts(analysis, log_facts);
    let outbound = super::verdict::outbound_clause(analysis);
    let stopped_itself = analysis
        .foreign_signals
        .iter()
        .any(|f| f.outbound_kill && f.target_is_tracer);
    // The job's cancellation by its runner leads: what ended the run
    // (analysis/cancel.rs).
    if let Some(c) = &analysis.cancellation {
        parts.lead.push(crate::text::one_line(&c.summary));
    }
    // A kill that left the run comes first after it: never "No unexpected
    // deaths." on its own while one happened.
    if let Some(out) = outbound {
        parts.lead.push(crate::text::one_line(&out));
        parts.inside = true;
    }
    if let Some(hang) = super::snapshots::verdict_clause(snapshots, stopped_itself) {
        parts.lead.push(crate::text::one_line(&hang));
    }
    crate::text::one_line(&parts.render())
}
