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

/// The conditions met, with counts, in the order asked.
pub fn met(conditions: &[Condition], log: &LogSummary, a: &Analysis) -> Vec<(Condition, usize)> {
    conditions
        .iter()
        .map(|&c| (c, c.count(log, a)))
        .filter(|&(_, n)| n > 0)
        .collect()
}
