//! report.json: the machine-readable report. Schema: docs/report.schema.json,
//! prose: docs/report.md. Deterministic: every collection is ordered by log
//! position or a BTreeMap, and no clock is read.
use std::collections::BTreeMap;

use serde::Serialize;

use super::ReportOptions;
use crate::{
    analysis::{
        self, wording as w, Analysis, AnalysisOptions, Certificate, Leftover, ProcRef, Rank,
    },
    eventlog::{EventLog, ExitStatus, HookStatus, LogSummary, Loss},
    model::Model,
};

/// Bumped on any incompatible change to report.json.
/// 2: ancestry chains by id (`ancestry_id`, the top-level `ancestors`).
pub const REPORT_SCHEMA_VERSION: u32 = 2;

pub const RANKING_RULE: &str = "Unexpected deaths come first, then workers that exited non-zero \
on their own, then expected stops. A death is expected when the tracer stopped it (a cancellation \
it forwarded, its timeout, `--leaks kill`), when it was a parent-death signal, or when its own \
parent or ancestor sent SIGINT, SIGHUP, SIGTERM or SIGKILL (an orderly shutdown); a non-zero exit \
after the run was cancelled is expected too. Every other signal death is unexpected: killed by a \
sibling, a descendant, an unrelated or outside process, the OOM killer, a fault, itself, or an \
unobserved signal. A process that caught a signal from another process (it ran on after the \
delivery) and then raised the same signal on itself, exited 128+N, or exited non-zero within 5 s \
of a caught SIGINT, SIGHUP, SIGQUIT or SIGTERM (any time after, for the tracer's own) died of the \
caught signal: it is ranked by that signal's sender. \
Kernel causes: a SIGPIPE whose pipe's reader exited 0 (`producer | head`) and a terminal hang-up \
caused by its own parent or ancestor are expected; a timeout(1) that fired ranks with the non-zero \
exits; a parent-death signal fired by the exit of a parent thread while the parent lived on is \
unexpected.";

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Report {
    pub report_schema: u32,
    /// Version of the tracer that rendered this report.
    pub rendered_by: String,
    /// One line a reviewer reads first.
    pub verdict: String,
    pub ranking_rule: String,
    pub run: RunFacts,
    pub log: LogFacts,
    #[serde(flatten)]
    pub analysis: Analysis,
    /// Hang / cancellation snapshots, in log order.
    pub snapshots: Vec<super::snapshots::SnapshotReport>,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct RunFacts {
    pub mode: String,
    pub command: Vec<String>,
    /// The user the wrapped command ran as (record mode), e.g. `alice (uid 1000)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_user: Option<String>,
    /// How many `--redact` patterns masked command lines and stderr text.
    #[serde(skip_serializing_if = "is_zero")]
    pub redactions: u32,
    pub hostname: String,
    pub kernel: String,
    pub tracer_pid: u32,
    /// Version of the tracer that captured the log.
    pub captured_by: String,
    pub started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The root process's lifetime, else the span of the log's events.
    pub duration_ns: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<ProcRef>,
    /// How the wrapped command ended (trailer), else the root's own exit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_status: Option<ExitStatus>,
    /// Processes in the run (root and descendants).
    pub processes: usize,
    pub hooks: Vec<HookStatus>,
    /// Names of hooks that did not attach.
    pub hooks_missing: Vec<String>,
    /// The pid namespace every pid is in, when not the host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid_namespace: Option<crate::eventlog::PidNamespace>,
}

#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct LogFacts {
    /// Event lines in the log (header and trailer excluded).
    pub events: usize,
    pub by_type: BTreeMap<String, usize>,
    /// Events the trailer says were written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trailer_events: Option<u64>,
    /// No trailer: capture was interrupted; loss counters are unknown.
    pub truncated: bool,
    pub lost: Loss,
    pub lost_total: u64,
    /// Not truncated, nothing lost, every hook attached.
    pub complete: bool,
    /// Why this report may be incomplete, one sentence each.
    pub warnings: Vec<String>,
    /// The OTLP export this rendering made (`--otlp-endpoint`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<crate::otlp::ExportFacts>,
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
    };
    analysis::analyze_model(model, model.boot_to_wall_ns, &aopts)
}

/// The report of a log whose model is already built (the HTML timeline
/// reads the same model: built once, it is the report's largest cost).
pub(super) fn report_of(log: &LogSummary, model: &Model, analysis: Analysis) -> Report {
    let h = &log.header;
    let root = model.root.and_then(|k| model.proc(k));
    let lost = log
        .trailer
        .as_ref()
        .map(|t| t.lost.clone())
        .unwrap_or_default();
    let hooks_missing: Vec<String> = h
        .hooks
        .iter()
        .filter(|k| !k.attached)
        .map(|k| k.name.clone())
        .collect();

    let by_type = log.by_type.clone();
    let mut warnings = Vec::new();
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
            loss_breakdown(&lost)
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
        if n != log.events as u64 + pruned {
            warnings.push(format!(
                "the trailer counts {n} events but the log holds {}",
                log.events
            ));
        }
    }
    let complete = warnings.is_empty();
    let lost_total = lost.total();

    let run = RunFacts {
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
        duration_ns: root
            .and_then(|r| r.lifetime_ns())
            .unwrap_or(model.last_t.saturating_sub(model.first_t)),
        root: model.root.map(|k| {
            let t = root
                .and_then(|r| r.end.as_ref())
                .map_or(model.last_t, |e| e.t);
            analysis::proc_ref(model, h.boot_to_wall_ns, k, t)
        }),
        command_status: log
            .trailer
            .as_ref()
            .and_then(|t| t.command_status.clone())
            .or_else(|| root.and_then(|r| r.end.as_ref()).map(|e| e.status.clone())),
        processes: model.procs.values().filter(|p| p.in_run).count(),
        hooks: h.hooks.clone(),
        hooks_missing,
        pid_namespace: h.pid_namespace,
    };
    let log_facts = LogFacts {
        events: log.events,
        by_type,
        trailer_events: log.trailer.as_ref().map(|t| t.events),
        truncated: log.truncated,
        lost,
        lost_total,
        complete,
        warnings,
        export: None,
    };
    let snapshots = super::snapshots::collect(model);
    // Headlines and the verdict are the sentences CI scripts quote (an
    // annotation per death): one line, no control byte, even when the log
    // itself was tampered with (a signal or si_code name is copied as read).
    let mut analysis = analysis;
    for c in &mut analysis.certificates {
        c.headline = crate::text::one_line(&c.headline);
        c.cause.summary = crate::text::one_line(&c.cause.summary);
    }
    let mut verdict = verdict(&analysis, &log_facts);
    if let Some(hang) = super::snapshots::verdict_clause(&snapshots) {
        verdict = format!("{hang}. {verdict}");
    }
    let verdict = crate::text::one_line(&verdict);
    Report {
        report_schema: REPORT_SCHEMA_VERSION,
        rendered_by: env!("CARGO_PKG_VERSION").to_string(),
        verdict,
        ranking_rule: RANKING_RULE.to_string(),
        run,
        log: log_facts,
        analysis,
        snapshots,
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

pub(crate) use crate::eventlog::type_name;

pub(crate) fn loss_breakdown(l: &Loss) -> String {
    let parts = [
        ("ring buffer full", l.ringbuf_full),
        ("tracked-process map full", l.tracked_map_full),
        ("in-flight kill map full", l.inflight_map_full),
        ("undecodable", l.undecodable),
        ("not written to the log", l.unwritten),
    ];
    let mut named: Vec<String> = parts
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(what, n)| format!("{what}: {n}"))
        .collect();
    if let Some(e) = &l.write_error {
        named.push(format!("the log file stopped being written: {e}"));
    }
    named.join(", ")
}

/// The first line of every report. Names at most two causes: the rest is a
/// scroll away. Never claims "no unexpected deaths" on lossy data unqualified.
pub fn verdict(a: &Analysis, log: &LogFacts) -> String {
    let list = |rank: Rank| {
        let all = mentions(a.certificates.iter().filter(|c| c.rank == rank));
        let mut items: Vec<String> = all.iter().take(2).cloned().collect();
        if all.len() > 2 {
            items.push(format!("and {} more", all.len() - 2));
        }
        items.join("; ")
    };
    let mut v = if a.counts.unexpected > 0 {
        let n = a.counts.unexpected;
        format!(
            "{}: {}",
            w::plural(n, "unexpected death", "unexpected deaths"),
            list(Rank::Unexpected)
        )
    } else if a.counts.nonzero_exit > 0 {
        let n = a.counts.nonzero_exit;
        format!(
            "No unexpected deaths; {}: {}",
            w::plural(n, "non-zero exit", "non-zero exits"),
            list(Rank::NonzeroExit)
        )
    } else {
        "No unexpected deaths.".to_string()
    };
    if let Some(leaks) = leaked_phrase(&a.leftovers) {
        v = format!("{}. Leaked: {leaks}", v.trim_end_matches('.'));
    }
    if log.truncated || log.lost_total > 0 {
        let why = if log.truncated {
            "the log is truncated".to_string()
        } else {
            w::plural(
                log.lost_total as usize,
                "event was lost",
                "events were lost",
            )
        };
        v = format!(
            "{} (incomplete: {why}, so deaths may be missing)",
            v.trim_end_matches('.')
        );
    }
    v
}

/// The verdict's leak clause. `leak` records say exactly which processes
/// outlived the command; a log without them only shows orphans with no end.
fn leaked_phrase(leftovers: &[Leftover]) -> Option<String> {
    let recorded: Vec<&Leftover> = leftovers.iter().filter(|l| l.leak.is_some()).collect();
    let inferred: Vec<&Leftover> = leftovers.iter().filter(|l| l.orphaned).collect();
    let (list, recorded) = if recorded.is_empty() {
        (inferred, false)
    } else {
        (recorded, true)
    };
    let first = list.first()?;
    let more = match list.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    if !recorded {
        return Some(format!(
            "{}{more} outlived its parent and was still running when the log ended.",
            w::proc_phrase(&first.process)
        ));
    }
    let mut facts = String::new();
    if first.leak.as_ref().is_some_and(|l| l.detached) {
        facts.push_str(", detached via setsid");
    }
    if let Some(by) = &first.spawned_by {
        facts.push_str(&format!(", spawned by {}", w::proc_phrase(by)));
    }
    let verb = if list.len() == 1 { "was" } else { "were" };
    let sep = if facts.is_empty() { "" } else { "," };
    Some(format!(
        "{}{facts}{sep}{more} {verb} still running when the command exited.",
        w::proc_phrase(&first.process)
    ))
}

/// One mention per cause: the victims of one group kill (one call, several
/// deliveries) are named together, led by the process the call aimed at.
fn mentions<'a>(certs: impl Iterator<Item = &'a Certificate>) -> Vec<String> {
    let mut groups: Vec<(Option<u64>, Vec<&Certificate>)> = Vec::new();
    for c in certs {
        let call = c
            .killer
            .as_ref()
            .filter(|k| k.deliveries.unwrap_or(0) > 1)
            .and_then(|k| k.call_seq);
        match groups.iter_mut().find(|g| call.is_some() && g.0 == call) {
            Some(g) => g.1.push(c),
            None => groups.push((call, vec![c])),
        }
    }
    groups
        .into_iter()
        .map(|(_, cs)| {
            let aimed = |c: &&&Certificate| {
                let arg = c
                    .killer
                    .as_ref()
                    .and_then(|k| k.target_arg)
                    .map(i64::unsigned_abs);
                arg == Some(u64::from(c.victim.process.pid))
            };
            let rep = cs.iter().find(aimed).unwrap_or(&cs[0]);
            let others: Vec<String> = cs
                .iter()
                .filter(|c| c.id != rep.id)
                .map(|c| c.victim.process.pid.to_string())
                .collect();
            match others.len() {
                0 => rep.headline.clone(),
                1 => format!(
                    "{} (the same call also killed pid {})",
                    rep.headline, others[0]
                ),
                _ => format!(
                    "{} (the same call also killed pids {})",
                    rep.headline,
                    others.join(", ")
                ),
            }
        })
        .collect()
}
