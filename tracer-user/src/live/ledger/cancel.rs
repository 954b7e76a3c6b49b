//! The job's cancellation by its CI runner (analysis/cancel.rs) across a
//! daemon's looks. Each look finds it in its window, which holds the
//! signals of what is live and of the last two intervals: GitHub's runner's
//! SIGINT may be a look older than its SIGTERM and the SIGKILLs of the
//! tree. The ledger keeps the first cancellation a look found, adds the
//! signals later looks see of the same sender (each once, in log order, at
//! most [`MAX_CANCEL_SIGNALS`] listed and the rest counted), and counts the
//! deaths ranked as its doing (`cause.cancelled`) as they are counted. At
//! the stop its summary is worded from every signal kept, as the whole
//! log's analysis words it.
use std::collections::HashSet;

use tracer_common::signals::SIGCHLD;

use super::held::pkey;
use crate::{
    analysis::{
        cancel::{summary, Sent, Step},
        Analysis, Cancellation, CauseKind, Certificate, DeathCounts, ForeignSignal, Rank,
    },
    eventlog::ProcKey,
};

/// Signals of the cancellation listed at most (a gitlab-runner's group
/// kill of a large `make -j` reaches every process): the rest are counted
/// in the summary, not listed, as the ledger bounds the signals across
/// the boundary.
pub const MAX_CANCEL_SIGNALS: usize = super::MAX_FOREIGN;

/// A step's identity across looks: its time, sequence number and target
/// (a restarted daemon numbers its records from 1 again).
type StepKey = (u64, u64, ProcKey);

fn step_key(s: &Step) -> StepKey {
    (s.signal.t, s.signal.seq, s.target)
}

/// See the module's doc.
#[derive(Clone, Debug, Default)]
pub(super) struct Cancel {
    found: Option<Found>,
    /// Deaths counted with `cause.cancelled`, each once.
    deaths: usize,
}

/// The cancellation a look found first, and its signals so far.
#[derive(Clone, Debug)]
struct Found {
    /// The first look's finding: who sent it and how it is named.
    first: Cancellation,
    sender: ProcKey,
    lead: String,
    reason: String,
    /// Listed, in log order.
    steps: Vec<Step>,
    listed: HashSet<StepKey>,
    /// Signals past [`MAX_CANCEL_SIGNALS`], counted only.
    more: usize,
    /// The newest signal taken (time, sequence number): past the list, a
    /// signal is new when it is newer.
    newest: (u64, u64),
}

impl Cancel {
    /// Merges a look's cancellation: `sent` what its analysis kept for the
    /// ledger, `a` the analysis (its finding's names).
    pub(super) fn add(&mut self, sent: Option<Sent>, a: &Analysis) {
        let (Some(sent), Some(c)) = (sent, &a.cancellation) else {
            return;
        };
        let f = self.found.get_or_insert_with(|| Found {
            first: c.clone(),
            sender: sent.sender,
            lead: sent.lead.clone(),
            reason: sent.reason.clone(),
            steps: Vec::new(),
            listed: HashSet::new(),
            more: 0,
            newest: (0, 0),
        });
        // Another sender's signals are not this cancellation's: the whole
        // log's analysis names the first sender that fits, and so does
        // the first look that saw it.
        if f.sender != sent.sender {
            return;
        }
        let mut added = false;
        for s in sent.steps {
            let k = step_key(&s);
            let at = (s.signal.t, s.signal.seq);
            if f.listed.contains(&k) {
                continue;
            }
            if f.steps.len() >= MAX_CANCEL_SIGNALS {
                if at > f.newest {
                    f.more += 1;
                    f.newest = at;
                }
                continue;
            }
            f.newest = f.newest.max(at);
            f.listed.insert(k);
            f.steps.push(s);
            added = true;
        }
        if added {
            // A signal an earlier look did not count as the cancellation's
            // (that look's window did not show the signature yet) goes back
            // to its place: log order, the order of the kernel's clock.
            f.steps.sort_by_key(|s| (s.signal.t, s.signal.seq));
        }
    }

    /// A death counted for the first time by the ledger.
    pub(super) fn count(&mut self, c: &Certificate) {
        self.deaths += usize::from(c.cause.cancelled);
    }

    /// A death a look certified before its window showed the signature
    /// (a kill by the cancellation's sender read as a foreign kill) is the
    /// cancellation's, as the whole log's analysis ranks it: expected,
    /// `cause.cancelled`, its reason at the end of its cause and headline;
    /// `counts` follow it.
    pub(super) fn mend<'a>(
        &mut self,
        certs: impl Iterator<Item = &'a mut Certificate>,
        counts: &mut DeathCounts,
    ) {
        let Some(f) = &self.found else {
            return;
        };
        for c in certs {
            let killed = matches!(
                c.cause.kind,
                CauseKind::KilledInRun | CauseKind::KilledOutsideRun
            );
            let by_it = c
                .killer
                .as_ref()
                .is_some_and(|k| pkey(&k.process) == f.sender);
            if !killed || !by_it || c.cause.cancelled {
                continue;
            }
            match c.rank {
                Rank::Unexpected => counts.unexpected -= 1,
                Rank::NonzeroExit => counts.nonzero_exit -= 1,
                Rank::Consequence => counts.consequence -= 1,
                Rank::Expected => counts.expected -= 1,
            }
            counts.expected += 1;
            let was = c.cause.summary.clone();
            c.cause.summary = format!("{was}: {}", f.reason);
            c.headline = c.headline.replacen(&was, &c.cause.summary, 1);
            c.cause.cancelled = true;
            c.rank = Rank::Expected;
            c.rank_reason = f.reason.clone();
            self.deaths += 1;
        }
    }

    /// Every signal its sender sent into the run is the cancellation's (its
    /// signature holds them all): none is counted by `--fail-on
    /// foreign-signal`, whichever look listed it.
    pub(super) fn mark(&self, foreign: &mut [ForeignSignal]) {
        let Some(f) = &self.found else {
            return;
        };
        for s in foreign {
            if pkey(&s.sender) == f.sender && s.target.in_run && s.signal.sig != SIGCHLD {
                s.cancellation = true;
            }
        }
    }

    /// The finding as the run's report shows it, worded from every signal
    /// kept.
    pub(super) fn finish(self) -> Option<Cancellation> {
        let f = self.found?;
        Some(Cancellation {
            summary: summary(&f.lead, &f.steps, f.more),
            signals: f.steps.into_iter().map(|s| s.signal).collect(),
            deaths: self.deaths,
            ..f.first
        })
    }

    /// What it holds (for the tests: bounded).
    pub(super) fn held(&self) -> usize {
        self.found.as_ref().map_or(0, |f| f.steps.len())
    }
}

#[cfg(test)]
mod tests;
