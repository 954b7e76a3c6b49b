//! The death certificate, and the link of a cascade (one death following
//! from another), and what the verdict reads of a death (`DeathMention`).
use serde::Serialize;

use super::{Cause, CrashRef, HistoryEntry, Killer, LastWordsRef, OomInfo, Rank, Victim};

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Certificate {
    /// 1-based position in the ranked list.
    pub id: usize,
    /// See ranking_rule.
    pub rank: Rank,
    /// Why this rank, in words.
    pub rank_reason: String,
    /// A quiet helper's non-zero exit (docs/report.md, "Quiet helpers"):
    /// ranked after the other non-zero exits, counted by the verdict but
    /// not named there. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub quiet_helper: bool,
    /// The death in one sentence.
    pub headline: String,
    /// Who died.
    pub victim: Victim,
    /// Why.
    pub cause: Cause,
    /// Who sent the fatal signal (absent for OOM, faults, SIGPIPE, kernel signals, non-zero
    /// exits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killer: Option<Killer>,
    /// OOM facts, for cause oom.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oom: Option<OomInfo>,
    /// Every non-SIGCHLD signal the victim received, oldest first.
    pub history: Vec<HistoryEntry>,
    /// The end of what the victim wrote to stderr (`last_words` record).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_words: Option<LastWordsRef>,
    /// Where it was when a fatal crash-class signal reached it
    /// (`crash_stack` record): the frames, the machinery folded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crash: Option<CrashRef>,
    /// Sequence numbers of the events this certificate rests on.
    pub evidence: Vec<u64>,
    /// This death follows from the death of another certificate's victim,
    /// a process it was waiting on (docs/report.md, "Cascades").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consequence_of: Option<Consequence>,
    /// The certificates whose `consequence_of.root` is this one, in the
    /// order they died: the chain this death started.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub consequences: Vec<usize>,
}

/// How a death follows from another: the link of a cascade.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Consequence {
    /// `id` of the certificate of the death it follows from directly.
    pub of: usize,
    /// `id` of the chain's root: up the `of` links, the first certificate
    /// not ranked `consequence` (the death reported in its own right).
    pub root: usize,
    /// What the process that died first was to this victim.
    pub via: LinkVia,
    /// What ties the two deaths.
    pub evidence: LinkEvidence,
    /// The tie in one sentence.
    pub detail: String,
}

/// What the process whose death came first was to the victim.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LinkVia {
    /// Its child: the process it forked and waited on.
    Child,
    /// A deeper descendant, forked by a process still running when the
    /// victim exited (a fork server).
    Descendant,
    /// The reader of the pipe it wrote to (SIGPIPE).
    PipeReader,
    /// The init (pid 1) of its pid namespace.
    NamespaceInit,
}

/// The evidence that ties a consequence to its cause.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LinkEvidence {
    /// It exited 128+N after the other died of signal N (how a shell reports
    /// a child killed by N), or passed such a status on.
    ExitCode,
    /// Its last words name the death: the pid, the signal, the exit code, or
    /// a runtime's words for a lost worker.
    LastWords,
    /// It exited within the cascade window (5 s) of the death.
    Window,
    /// SIGPIPE: the pipe's reader had died first.
    PipeReader,
    /// The kernel killed it when the init of its pid namespace ended.
    PidNamespace,
}

/// What the verdict reads of a death of the rank it leads with (one
/// mention per cause, report/verdict.rs): built from every such
/// certificate, and kept for a folded one beside its group.
#[derive(Clone, Debug, PartialEq)]
pub struct DeathMention {
    pub id: usize,
    pub rank: Rank,
    pub pid: u32,
    pub headline: String,
    /// How the headline names the victim (its start: `cmd` (pid N)).
    pub victim: String,
    /// The call that killed several processes at once (several deliveries).
    pub kill_call: Option<u64>,
    /// The `memory.oom.group` kill it was one of.
    pub oom_group: Option<u64>,
    /// The call aimed at this very process (`kill(pid)`, not its group), or
    /// the OOM group kill was its own allocation's.
    pub aimed: bool,
    /// The end of `headline` that tells victim and killer apart by their
    /// tests or workers (", spawned by `cleanup` (vitest); the victim was
    /// running `sibling` (vitest)"): what the verdict keeps when it cuts
    /// the rest. Empty when the headline names none.
    pub identifies: String,
    /// A quiet helper's exit: counted by the verdict, not named.
    pub quiet: bool,
}

impl DeathMention {
    pub fn of(c: &Certificate) -> Self {
        let k = c.killer.as_ref();
        DeathMention {
            id: c.id,
            rank: c.rank,
            pid: c.victim.process.pid,
            headline: c.headline.clone(),
            victim: crate::analysis::wording::proc_phrase(&c.victim.process),
            kill_call: k
                .filter(|k| k.deliveries.unwrap_or(0) > 1)
                .and_then(|k| k.call_seq),
            oom_group: c.oom.as_ref().and_then(|o| o.group.as_ref()).map(|g| g.seq),
            aimed: k.and_then(|k| k.target_arg).map(i64::unsigned_abs)
                == Some(u64::from(c.victim.process.pid))
                || c.oom
                    .as_ref()
                    .is_some_and(|o| o.group.is_some() && o.trigger_is_victim),
            identifies: identifies(c),
            quiet: c.quiet_helper,
        }
    }
}

/// The tests (or, with none known, the workers) phrase that ends `c`'s
/// headline, as certificate.rs's `headline` wrote it.
fn identifies(c: &Certificate) -> String {
    use crate::analysis::wording::{tests_phrase, workers_phrase};
    let k = c.killer.as_ref();
    let tests = tests_phrase(c.victim.test.as_ref(), k);
    let phrase = if tests.is_empty() {
        workers_phrase(c.victim.worker.as_deref(), k)
    } else {
        tests
    };
    if c.headline.ends_with(&phrase) {
        phrase
    } else {
        String::new()
    }
}
