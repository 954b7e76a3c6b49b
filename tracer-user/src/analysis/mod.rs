//! Cause-of-death analysis: from the process model to death certificates,
//! plus the cheap side findings (other exits, near misses, foreign signals,
//! processes left running). Pure: same model, same output.
mod ancestors;
pub mod cancel;
pub mod cascade;
mod caught;
mod cause;
mod certificate;
mod crash;
mod deaths;
mod epipe;
mod extras;
pub mod fold;
pub mod hangs;
mod mechanism;
mod oom_group;
mod quiet;
pub mod quote;
mod rank;
mod raw;
mod side_findings;
mod sigfacts;
mod summary;
pub mod test_memory;
#[cfg(test)]
mod tests;
mod types;
pub mod wording;

use std::{cell::RefCell, collections::HashSet};

use regex::Regex;
use serde::Serialize;

pub use ancestors::{chain, Ancestor};
pub use cancel::Cancellation;
pub use crash::{completeness_words, frame_line};
pub use extras::{group_exits, sort_groups, SmallExit, MAX_NEAR_MISSES};
pub(crate) use mechanism::READER_EXIT_AFTER_NS;
pub use raw::Raw;
pub use side_findings::*;
pub use sigfacts::{terminal_key, timer_source};
pub use test_memory::{test_memory, TestMemory};
pub use types::*;

use crate::{
    eventlog::{EventLog, ProcKey},
    model::Model,
};

/// A process that lived this long is a worker: its non-zero exit gets a
/// certificate (`Ctx::is_worker`), and it is no quiet helper (quiet.rs).
pub(crate) const WORKER_LIFETIME_NS: u64 = 1_000_000_000;

#[derive(Debug, Clone, Default)]
pub struct AnalysisOptions {
    /// A process whose command line (argv joined by spaces) or exec'd
    /// filename matches any of these gets a certificate for a non-zero exit
    /// however briefly it lived.
    pub watch: Vec<Regex>,
    /// Fold deaths of one signature as they are ranked (analysis/fold.rs):
    /// a folded death's certificate is built again only as its group's
    /// example, so memory follows the stories, not the processes. Off for
    /// what must see every certificate (a daemon's looks, the OTLP export).
    pub fold: bool,
    /// Also keep what a daemon's ledger merges across looks ([`Raw`]).
    pub raw: bool,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Analysis {
    /// Deaths per rank (a group counts each of its members).
    pub counts: DeathCounts,
    /// Ranked: unexpected, then non-zero exits, then expected; within a rank
    /// by time of death.
    pub certificates: Vec<Certificate>,
    /// Deaths of one signature folded (report.json and report.md only: a
    /// daemon's live findings and the OTLP export see every certificate);
    /// in the ranked order of their examples. `counts` counts every death.
    pub death_groups: Vec<DeathGroup>,
    /// Folded as it was ranked (`AnalysisOptions::fold`): what the verdict
    /// reads of each folded non-zero exit (it names that rank's deaths one
    /// by one when there is no unexpected one). Not in report.json.
    #[serde(skip)]
    pub folded_mentions: Vec<DeathMention>,
    /// Other non-zero exits, grouped, most frequent first.
    pub other_exits: Vec<ExitGroup>,
    /// Failed kill-family calls (ESRCH, EPERM), identical ones folded, in
    /// order of their first call; at most `MAX_NEAR_MISSES` entries.
    pub near_misses: Vec<NearMiss>,
    /// Near misses past the cap: entries and calls not listed.
    #[serde(skip_serializing_if = "LeftOut::is_empty")]
    pub near_misses_left_out: LeftOut,
    /// The job's cancellation by its CI runner (or an outside process), as
    /// one finding: it leads the verdict (analysis/cancel.rs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancellation: Option<Cancellation>,
    /// Process-sent signals between the run and the outside, in log order.
    pub foreign_signals: Vec<ForeignSignal>,
    /// Run processes still running when the log ended.
    pub leftovers: Vec<Leftover>,
    /// Every ancestry chain cited above, each process once per chain tail:
    /// an `ancestry_id` is an index here (see [`chain`]).
    pub ancestors: Vec<Ancestor>,
    /// With `AnalysisOptions::raw` only. Not in report.json.
    #[serde(skip)]
    pub raw: Option<Box<Raw>>,
    /// Each test's growth of its worker's RSS, from the test windows this
    /// analysis named with (their labels built once: a daemon's look built
    /// them twice). report.json has them in `resources.tests`, not here.
    #[serde(skip)]
    pub test_memory: Vec<TestMemory>,
}

impl Analysis {
    /// The certificates a report shows whole: its own, then each group's
    /// example (the timeline draws both).
    pub fn shown_certificates(&self) -> impl Iterator<Item = &Certificate> + Clone {
        let examples = self.death_groups.iter().map(|g| &g.example);
        self.certificates.iter().chain(examples)
    }

    /// The process an `ancestors` entry names (a near miss's `sender_id`).
    pub fn entry(&self, id: usize) -> Option<&ProcRef> {
        self.ancestors.get(id).map(|a| &a.process)
    }
}

pub fn analyze(log: &EventLog, opts: &AnalysisOptions) -> (Model, Analysis) {
    let model = Model::build(log);
    let analysis = analyze_model(&model, log.header.boot_to_wall_ns, opts);
    (model, analysis)
}

pub fn analyze_model(model: &Model, boot_to_wall_ns: i64, opts: &AnalysisOptions) -> Analysis {
    let cx = Ctx::new(model, boot_to_wall_ns, opts);
    let deaths::Found {
        mut views,
        mut deaths,
        small_exits,
        cancelled,
    } = deaths::find(&cx);
    // Which deaths follow from others (cascade.rs): ranks first, as the
    // order depends on them; ids and sentences once the order is known.
    let links = cascade::link(&cx, &mut views);
    let linked = cascade::linked(&links);
    deaths::mark_quiet(&cx, &links, &views, &mut deaths);
    let (order, counts) = deaths::number(&views, &mut deaths);
    let deaths::Settled {
        mut certificates,
        death_groups,
        mut folded_mentions,
    } = deaths::settle(&cx, &order, deaths, &views, &linked);
    let unworded = opts.raw.then(|| certificates.clone());
    cascade::word(&mut certificates, &links);
    // The verdict names non-zero exits only when no death was unexpected.
    if counts.unexpected > 0 {
        folded_mentions.clear();
    }
    let small_exits = extras::small_exits(&cx, &small_exits);
    let other_exits = group_exits(&small_exits);
    let (cancellation, sent) = cx
        .cancel()
        .map(|f| cancel::finding(&cx, f, cancelled))
        .unzip();
    let raw = unworded.map(|certificates| {
        Box::new(Raw {
            certificates,
            links,
            small_exits,
            cancel: sent,
        })
    });
    let foreign_signals = extras::foreign_signals(&cx);
    let leftovers = extras::leftovers(&cx);
    // Last: the senders' entries go at the end of the ancestors table.
    let (near_misses, near_misses_left_out) = extras::near_misses(&cx);
    let test_memory = match test_memory::sampled(model) {
        true => test_memory::of(model, cx.labels()),
        false => Vec::new(),
    };
    Analysis {
        counts,
        certificates,
        death_groups,
        folded_mentions,
        other_exits,
        near_misses,
        near_misses_left_out,
        cancellation,
        foreign_signals,
        leftovers,
        ancestors: cx.ancestors.into_inner().into_entries(),
        raw,
        test_memory,
    }
}

/// How a report names process `key` as it was at time `t`.
pub fn proc_ref(model: &Model, boot_to_wall_ns: i64, key: ProcKey, t: u64) -> ProcRef {
    Ctx::new(model, boot_to_wall_ns, &AnalysisOptions::default()).proc_ref(key, t)
}

/// Shared context: the model plus what is needed to cite it.
pub(crate) struct Ctx<'a> {
    pub m: &'a Model,
    pub wall_offset: i64,
    pub opts: &'a AnalysisOptions,
    /// The ancestry chains cited so far (see [`ancestors`]).
    pub ancestors: RefCell<ancestors::Table>,
    /// Which test each process ran (`labels/`), built on first use: a log
    /// with no death never needs it.
    pub labels: std::cell::OnceCell<crate::labels::Labels>,
    /// The job's cancellation (`cancel.rs`), found on first use.
    cancel: std::cell::OnceCell<Option<cancel::Found>>,
}

impl<'a> Ctx<'a> {
    /// A context with no ancestry cited yet.
    pub(crate) fn new(m: &'a Model, wall_offset: i64, opts: &'a AnalysisOptions) -> Self {
        Ctx {
            m,
            wall_offset,
            opts,
            ancestors: RefCell::default(),
            labels: Default::default(),
            cancel: Default::default(),
        }
    }

    /// The job's cancellation by its runner, if the log shows one.
    pub(crate) fn cancel(&self) -> Option<&cancel::Found> {
        self.cancel.get_or_init(|| cancel::find(self.m)).as_ref()
    }

    /// The test windows of the run.
    pub(crate) fn labels(&self) -> &crate::labels::Labels {
        self.labels
            .get_or_init(|| crate::labels::Labels::build(self.m))
    }

    /// The worker `key` is or was spawned from: "vitest worker 3", or
    /// "spawned from vitest worker 3"'s name alone (see `wording`).
    pub(crate) fn worker_of(&self, key: ProcKey) -> Option<String> {
        let (w, own) = self.labels().worker_of(self.m, key)?;
        Some(if own {
            w.to_string()
        } else {
            format!("a child of {w}")
        })
    }

    /// The test `key` (its thread `tid`, when one acted) was running at `t`.
    pub(crate) fn test_at(
        &self,
        key: ProcKey,
        tid: Option<u32>,
        t: u64,
    ) -> Option<crate::labels::TestAt> {
        self.labels().at(self.m, key, tid, t)
    }

    /// The call of a signal as (syscall, target as given, tid as given),
    /// from the joined kill_call if any, else from the signal's own call
    /// reference.
    pub(crate) fn call_of(&self, s: &crate::model::SignalEv) -> Option<(String, i64, Option<i64>)> {
        let k = s.kill_call().map(|k| &self.m.kill_calls[k].ev);
        let call = s.ev.call.as_ref();
        let syscall = k
            .map(|k| k.syscall.to_string())
            .or_else(|| call.map(|c| c.syscall.to_string()))?;
        let target_arg = call.map(|c| c.target_arg).or(k.map(|k| k.target_arg))?;
        Some((syscall, target_arg, k.and_then(|k| k.tid_arg())))
    }

    /// RFC 3339 UTC for a CLOCK_BOOTTIME instant (same rule as the log's
    /// `time` fields, so a report's times match the log's).
    pub(crate) fn wall(&self, t: u64) -> String {
        wording::wall_time(t, self.wall_offset)
    }

    /// How a report names `key` as it was at time `t`.
    pub(crate) fn proc_ref(&self, key: ProcKey, t: u64) -> ProcRef {
        let p = self.m.proc(key);
        let comm = p.and_then(|p| p.comm.as_deref().map(str::to_owned));
        let (argv, inherited) = match self.m.argv_at(key, t) {
            Some((argv, inh)) => (argv.to_vec(), inh),
            None => (Vec::new(), false),
        };
        let command = if argv.is_empty() {
            format!("[{}]", comm.as_deref().unwrap_or("?"))
        } else {
            argv.join(" ")
        };
        ProcRef {
            pid: key.pid,
            start: key.start,
            command,
            argv,
            argv_inherited: inherited,
            filename: self.m.filename_at(key, t).map(str::to_owned),
            comm,
            in_run: self.m.in_run(key),
            ns_pid: p.and_then(|p| p.ns),
        }
    }

    /// A kill-family target named from inside a deeper pid namespace,
    /// resolved to the process it meant there. The namespace is the
    /// sender's own: kill(2) reads pids in the caller's namespace.
    pub(crate) fn target_ns(
        &self,
        sender: ProcKey,
        syscall: &str,
        target_arg: i64,
        t: u64,
    ) -> Option<types::TargetNs> {
        let ns = self.m.proc(sender)?.ns?;
        let n = u32::try_from(target_arg.unsigned_abs()).ok()?;
        // 0 and -1 are the caller's group and everyone; a pidfd is no pid;
        // tkill names a thread, whose in-namespace id the log does not keep.
        if n <= 1 || matches!(syscall, "pidfd_send_signal" | "tkill") {
            return None;
        }
        Some(types::TargetNs {
            inum: ns.inum,
            pid: self.m.ns_owner(ns.inum, n, t).map(|k| k.pid),
        })
    }

    /// The ancestors of `key` as they were at `t`, as an `ancestors` entry
    /// (interned from the farthest down). A `ProcRef` is only built for an
    /// entry not seen before. The chain is climbed only up to the first
    /// ancestor whose own entry is memoised for `t` (see `ancestors::Memo`);
    /// the entries are the ones the whole walk ([`Ctx::ancestry_walk`]) makes.
    pub(crate) fn ancestry(&self, key: ProcKey, t: u64) -> Option<usize> {
        let mut table = self.ancestors.borrow_mut();
        // The ancestors not memoised, nearest first, as `Model::ancestors`
        // walks them (stopping after the run root or the tracer).
        let mut path = Vec::new();
        let mut seen = HashSet::from([key]);
        let mut above = None;
        let mut cur = key;
        while let Some(parent) = self.m.proc(cur).and_then(|p| p.parent) {
            if !seen.insert(parent) {
                // A cycle (a hand-edited log): the walk decides where it ends.
                drop(table);
                return self.ancestry_walk(key, t);
            }
            if let Some(m) = table.memo(parent, t) {
                above = Some(m);
                break;
            }
            path.push(parent);
            if Some(parent) == self.m.root || self.m.is_tracer(parent) {
                break;
            }
            cur = parent;
        }
        let (mut id, mut from, mut until) = match above {
            Some(m) => (Some(m.id), m.from, m.until),
            None => (None, 0, None),
        };
        for &a in path.iter().rev() {
            let (execs, a_from, a_until) = self.execs_in_force(a, t);
            from = from.max(a_from);
            until = match (until, a_until) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            };
            let entry = table.intern((a, execs), id, || self.proc_ref(a, t));
            table.remember(
                a,
                ancestors::Memo {
                    id: entry,
                    from,
                    until,
                },
            );
            id = Some(entry);
        }
        id
    }

    /// `key` itself as it was at `t`, as an `ancestors` entry: its ancestry
    /// is the entry's `parent_id` chain (a near miss's sender, cited once).
    pub(crate) fn entry(&self, key: ProcKey, t: u64) -> usize {
        let parent = self.ancestry(key, t);
        let (execs, _, _) = self.execs_in_force(key, t);
        self.ancestors
            .borrow_mut()
            .intern((key, execs), parent, || self.proc_ref(key, t))
    }

    /// [`Ctx::ancestry`] by the whole walk, memoising nothing.
    fn ancestry_walk(&self, key: ProcKey, t: u64) -> Option<usize> {
        let mut table = self.ancestors.borrow_mut();
        let mut parent = None;
        for a in self.m.ancestors(key).into_iter().rev() {
            let (execs, _, _) = self.execs_in_force(a, t);
            parent = Some(table.intern((a, execs), parent, || self.proc_ref(a, t)));
        }
        parent
    }

    /// How many of `key`'s execs were in force at `t` (counted as `exec_at`
    /// finds the last one), and the times `[from, until)` that count holds.
    fn execs_in_force(&self, key: ProcKey, t: u64) -> (usize, u64, Option<u64>) {
        let Some(p) = self.m.proc(key) else {
            return (0, 0, None);
        };
        let n = p.execs.iter().rposition(|e| e.t <= t).map_or(0, |i| i + 1);
        // The last exec counted came into force at its time; the count
        // grows when any later exec does.
        let from = n.checked_sub(1).map_or(0, |i| p.execs[i].t);
        let until = p.execs[n..].iter().map(|e| e.t).min();
        (n, from, until)
    }

    /// A worker's non-zero exit deserves a certificate: it lived at least a
    /// second, had children, said something on stderr (a Node worker that
    /// prints `TypeError: …` and exits 1 in 150 ms), or the user asked to
    /// watch it. Silent short-lived helpers (`grep -q`, `test -f`) failing
    /// is normal control flow.
    pub(crate) fn is_worker(&self, key: ProcKey) -> bool {
        let Some(p) = self.m.proc(key) else {
            return false;
        };
        if p.lifetime_ns().unwrap_or(0) >= WORKER_LIFETIME_NS || !p.children.is_empty() {
            return true;
        }
        // The log keeps no time for a write, so any stderr output counts:
        // the last_words record holds only what a process wrote itself.
        if p.last_words()
            .is_some_and(|l| !l.to_null && quote::quote_line(&l.text).is_some())
        {
            return true;
        }
        self.watched(key)
    }

    /// The user asked to watch it (`--watch`): its command line or exec'd
    /// filename matches.
    pub(crate) fn watched(&self, key: ProcKey) -> bool {
        let Some(p) = self.m.proc(key) else {
            return false;
        };
        if self.opts.watch.is_empty() {
            return false;
        }
        let t = p.end.as_ref().map_or(u64::MAX, |e| e.t);
        let r = self.proc_ref(key, t);
        let file = r.filename.as_deref().unwrap_or("");
        self.opts
            .watch
            .iter()
            .any(|re| re.is_match(&r.command) || re.is_match(file))
    }
}
