//! `--fail-on`: turn what the tracer saw into a failing CI step, so a suite
//! can enforce hermeticity (no signals across the run's boundary, no leaked
//! processes, no OOM kills, no unexpected deaths) in any language.
use crate::{
    analysis::{Analysis, CauseKind},
    error::TracerError,
    eventlog::LogSummary,
};

/// The run's exit status when a `--fail-on` condition is met and the command
/// itself succeeded (a failing command keeps its own status).
pub const EXIT_FAIL_ON: u8 = 86;
/// The run's exit status when no condition was found but events were lost,
/// so one may be missing: `--fail-on` cannot certify the run (a job that
/// floods the ring must not pass over a death it hid). Next to 86 and apart
/// from it: CI can tell "a death was found" from "nothing can be certified".
/// `--allow-loss` judges what was recorded instead (the old behaviour).
pub const EXIT_CANNOT_CERTIFY: u8 = 87;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    /// A signal crossed the run's boundary, in either direction.
    ForeignSignal,
    /// A process of the run outlived the command.
    Leak,
    /// The kernel OOM killer killed a process of the run.
    Oom,
    /// A process of the run died unexpectedly (see the report's ranking rule).
    UnexpectedDeath,
}

impl Condition {
    pub fn name(self) -> &'static str {
        match self {
            Self::ForeignSignal => "foreign-signal",
            Self::Leak => "leak",
            Self::Oom => "oom",
            Self::UnexpectedDeath => "unexpected-death",
        }
    }

    /// How many times it happened in this run; `log`: the log's header
    /// (its mode) and its count of `leak` records.
    pub fn count(self, log: &LogSummary, a: &Analysis) -> usize {
        match self {
            // The tracer's own signals (forwarding, --timeout, --leaks kill)
            // are not the suite breaking its boundary, nor is a daemon's stop.
            Self::ForeignSignal => {
                let daemon = log.header.mode == "daemon";
                a.foreign_signals
                    .iter()
                    .filter(|f| f.counted(daemon))
                    .count()
            }
            // Outlived the command, even if `--leaks kill` ended it later.
            Self::Leak => log.leaks.max(a.leftovers.len()),
            Self::Oom => {
                let folded = a.death_groups.iter().map(|g| (&g.example, g.count));
                a.certificates
                    .iter()
                    .map(|c| (c, 1))
                    .chain(folded)
                    .filter(|(c, _)| c.cause.kind == CauseKind::Oom)
                    .map(|(_, n)| n)
                    .sum()
            }
            Self::UnexpectedDeath => a.counts.unexpected,
        }
    }
}

/// A daemon's log has no leak records: every process still running when
/// it stopped would count. A foreign signal it can judge: one the watched
/// processes sent outside the scope (or received from outside), the signal
/// that stops the daemon itself excepted.
pub fn daemon_supports(conditions: &[Condition]) -> Result<(), TracerError> {
    match conditions.iter().find(|c| matches!(c, Condition::Leak)) {
        Some(c) => Err(TracerError::FailOnDaemon(c.name())),
        None => Ok(()),
    }
}

/// What `--fail-on` decided about a run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The conditions met, with counts, in the order asked.
    pub met: Vec<(Condition, usize)>,
    /// Events lost that leave the run uncertified (0 when nothing was lost,
    /// none was asked, or `--allow-loss`).
    pub uncertified: u64,
}

impl Verdict {
    /// The exit status it asks for, if any: a condition met outranks loss
    /// (what was found stands whatever is missing).
    pub fn exit_code(&self) -> Option<u8> {
        if !self.met.is_empty() {
            Some(EXIT_FAIL_ON)
        } else if self.uncertified > 0 {
            Some(EXIT_CANNOT_CERTIFY)
        } else {
            None
        }
    }
}

/// Events the log says were lost: every loss counter that costs events
/// (`Loss::total`: the ring, the tracked map, ...) and the lines too long
/// to read, the same sum as the reports' "N events were lost".
pub fn lost(log: &LogSummary) -> u64 {
    let counted = log.trailer.as_ref().map_or(0, |t| t.lost.total());
    counted.saturating_add(log.lines_skipped)
}

/// The verdict on a run: `conditions` as asked (none: no verdict), and
/// whether loss is allowed.
pub fn judge(
    conditions: &[Condition],
    allow_loss: bool,
    log: &LogSummary,
    a: &Analysis,
) -> Verdict {
    if conditions.is_empty() {
        return Verdict::default();
    }
    Verdict {
        met: met(conditions, log, a),
        uncertified: if allow_loss { 0 } else { lost(log) },
    }
}

/// The conditions met, with counts, in the order asked.
pub fn met(conditions: &[Condition], log: &LogSummary, a: &Analysis) -> Vec<(Condition, usize)> {
    conditions
        .iter()
        .map(|&c| (c, c.count(log, a)))
        .filter(|&(_, n)| n > 0)
        .collect()
}
