//! report.json's facts about the run and about the log it was read from.
use std::collections::BTreeMap;

use serde::Serialize;

use crate::{
    analysis::ProcRef,
    eventlog::{ExitStatus, HookStatus, Loss},
};

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct RunFacts {
    /// record (one wrapped command) or daemon.
    pub mode: String,
    /// The wrapped command as given (record mode), with --redact matches masked.
    pub command: Vec<String>,
    /// The user the wrapped command ran as (record mode), e.g. `alice (uid 1000)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_user: Option<String>,
    /// How many `--redact` patterns masked command lines and stderr text.
    #[serde(skip_serializing_if = "is_zero")]
    pub redactions: u32,
    /// Host of the capture.
    pub hostname: String,
    /// uname -r of the traced machine.
    pub kernel: String,
    /// The tracer's own pid.
    pub tracer_pid: u32,
    /// Version of the tracer that captured the log.
    pub captured_by: String,
    /// Capture start, RFC 3339.
    pub started_at: String,
    /// Capture end (absent when truncated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
    /// The root process's lifetime, else the span of the log's events.
    pub duration_ns: u64,
    /// The wrapped command's process.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<ProcRef>,
    /// How the wrapped command ended (trailer), else the root's own exit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_status: Option<ExitStatus>,
    /// Processes in the run (root and descendants).
    pub processes: usize,
    /// Daemon mode: what it watched (`all`, `cgroup PATH`, `root-pid PID`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Daemon mode: the commands it saw start, each a process forked by
    /// one that was already running when it began watching (a CI job's
    /// steps under its runner's worker, what a watched shell ran; under
    /// `--all`, whatever the machine's running processes started).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<usize>,
    /// Every hook and whether it attached.
    pub hooks: Vec<HookStatus>,
    /// Names of hooks that did not attach.
    pub hooks_missing: Vec<String>,
    /// The pid namespace every pid is in, when not the host's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid_namespace: Option<crate::eventlog::PidNamespace>,
    /// The CI run the capture belongs to (run URL, commit, branch, job,
    /// attempt), as the CI system's environment said when it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<crate::eventlog::CiContext>,
    /// Record mode with `--tests`: every variable tracer changed in the
    /// command's environment (absent: none; docs/report.md, "Which test").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env_changes: Vec<crate::eventlog::EnvChange>,
    /// What each test integration said of itself (the way it took into
    /// the runner, or why it names no test there), and under `--tests`
    /// each runner that ran without one (absent: none; docs/report.md,
    /// "Which test").
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub test_integrations: Vec<crate::labels::status::TestIntegration>,
}

impl RunFacts {
    /// What a daemon's run was, where a record's names its command:
    /// "daemon run, 3 commands seen (watching root-pid 4242)"; `value`
    /// is the format's escaper for the scope.
    pub(super) fn daemon_phrase(&self, value: impl Fn(&str) -> String) -> Option<String> {
        let n = self.commands?;
        let scope = self
            .scope
            .as_deref()
            .map(|s| format!(" (watching {})", value(s)))
            .unwrap_or_default();
        Some(format!(
            "daemon run, {}{scope}",
            crate::analysis::wording::plural(n, "command seen", "commands seen")
        ))
    }
}

/// One `--tests` change in words, as report.md and report.html list them:
/// `PYTHONPATH` `/src` → `/tmp/tracer-tests-…:/src` (prepended); `value`
/// is the format's escaper for the variable and its values.
pub(super) fn env_change_phrase(
    c: &crate::eventlog::EnvChange,
    value: impl Fn(&str) -> String,
) -> String {
    let old = c.old.as_deref().map_or_else(|| "unset".to_string(), &value);
    format!("{} {old} → {} ({})", value(&c.var), value(&c.new), c.how)
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct LogFacts {
    /// Event lines in the log (header and trailer excluded).
    pub events: usize,
    /// Event count per record type.
    pub by_type: BTreeMap<String, usize>,
    /// Events the trailer says were written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trailer_events: Option<u64>,
    /// No trailer: capture was interrupted; loss counters are unknown.
    pub truncated: bool,
    /// Loss counters from the trailer (zero when truncated).
    pub lost: Loss,
    /// Sum of the loss counters, and of `lines_skipped`.
    pub lost_total: u64,
    /// Event lines longer than the reader's limit (64 MiB), skipped unread:
    /// whatever they held is missing from the report.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub lines_skipped: u64,
    /// Not truncated, nothing lost, every hook attached.
    pub complete: bool,
    /// Why this report may be incomplete, one sentence each.
    pub warnings: Vec<String>,
    /// The OTLP export this rendering made (`--otlp-endpoint`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub export: Option<crate::otlp::ExportFacts>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}
