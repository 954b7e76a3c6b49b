//! What a daemon's live look analyses: not the log so far (re-read and
//! re-analysed at every interval, that cost grew with the log: CPU per 1,000
//! events doubled within a minute, BENCHMARKS.md "Daemon soak"), but the
//! records written since the last look, the look before (a `kill_call` is
//! logged at syscall exit, after the deaths it caused; a victim's certificate
//! may need its sender's exit), and the context the analysis needs of older
//! records: every live process's fork or `existing` record, its latest exec,
//! its threads and the last signals it received, and the same for the dead
//! ancestors of live processes. A look costs what is live plus two intervals,
//! whatever the log's length; the context's memory is what is live.
//!
//! The context is kept as the log's own records, so the analysis is the one
//! every report uses, unchanged.
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use crate::{
    analysis::READER_EXIT_AFTER_NS,
    eventlog::{EventLog, Exit, ExitStatus, Header, KillCall, ProcKey, Record, Signal, TestMark},
};

/// Signals kept per live process for the next looks (a SIGTERM caught long
/// before the SIGKILL that ends it still names the first sender).
const SIGNALS_KEPT: usize = 16;
/// Thread forks kept per live process (its threads' names and spans).
const THREADS_KEPT: usize = 64;
/// A process whose birth the window never saw (a lost fork, or one outside
/// the scope that only received a signal) and that it never sees end: kept
/// while a record names it within this many looks.
const UNBORN_LOOKS: u64 = 64;
/// Test marks kept per thread (the latest): a test's `begin` stays as
/// long as the test runs, however many looks that is, unless this many
/// marks came after it on its thread (pytest writes six per test, so the
/// open one's `begin` is among the last three).
const MARKS_KEPT: usize = 16;
/// OOM records kept for the looks after them.
const OOMS_KEPT: usize = 64;
/// Signals waiting for their call at most: past that the oldest waits are
/// dropped (the signal stays, without its syscall's details).
const AWAITING_MAX: usize = 4096;
/// How deep a chain of last failed children is kept below a kept process:
/// a runner's death names its worker's, a wrapper's the runner's
/// (analysis/cascade.rs), whichever look each came in.
const FAILED_CHAIN_KEPT: usize = 8;
use tracer_common::signals::{SIGCHLD, SIGPIPE};

/// One process's records that outlive the interval they came in.
#[derive(Default, Debug)]
struct Context {
    /// Its `fork` or `existing` record.
    birth: Option<Record>,
    /// Its latest `exec`.
    exec: Option<Record>,
    /// The fork of its latest child, dead or alive: that it forked at all
    /// makes it a worker whose non-zero exit is a death (`is_worker`).
    last_child: Option<Record>,
    threads: VecDeque<Record>,
    /// Its threads' latest ends (a parent-death signal fired by a parent's
    /// thread is told apart by that thread's exit).
    thread_exits: VecDeque<Record>,
    signals: VecDeque<Record>,
    /// The kill-family calls that sent `signals` (logged at syscall exit,
    /// after the signals), so an old signal keeps its syscall and target.
    calls: VecDeque<Record>,
    /// Its stderr's last words.
    last_words: Option<Record>,
    /// Where it crashed (`crash_stack`): logged at the signal's delivery,
    /// which may be many looks before its exit (a core dump takes
    /// seconds), so it is kept with the process, not only for a look.
    crash_stack: Option<Record>,
    /// SIGCHLDs apart: a shell gets one per child, which would push the
    /// signal that ends it out of `signals`.
    sigchlds: VecDeque<Record>,
    /// Its threads' latest test marks, by thread (at most [`THREADS_KEPT`]
    /// threads, the first seen let go first): the window a test opened
    /// looks ago still names the test when the process dies in it.
    marks: VecDeque<(u32, VecDeque<Record>)>,
    /// Its `exit` (a dead ancestor's: a parent-death signal is told apart
    /// by the sender's exit just before it).
    end: Option<Record>,
    /// The parent's identity, when known.
    parent: Option<ProcKey>,
    /// Its latest child to fail (exit non-zero or die of a signal it did
    /// not send itself): kept while it is, as a later exit of its may
    /// follow from that death (a cascade), and the analysis must see the
    /// last failure before it to say so. One per process: bounded by what
    /// is live.
    failed_child: Option<ProcKey>,
    /// Its latest child to end, however it ended.
    ended_child: Option<ProcKey>,
    /// Died of SIGPIPE: the sibling that had ended last before it, the
    /// pipe's likeliest reader (analysis/mechanism/idioms.rs), kept with it.
    reader_before: Option<ProcKey>,
    /// Still running (no `exit` with `group_dead` yet).
    alive: bool,
    /// The look its end came in: it stays one more look, when its
    /// certificate is made (see [`Look::pending`]).
    ended_in: Option<u64>,
    /// The last look a record named it in.
    seen_in: u64,
}

impl Context {
    /// Every record it keeps.
    fn records(&self) -> impl Iterator<Item = &Record> {
        let one = [
            &self.birth,
            &self.exec,
            &self.last_child,
            &self.end,
            &self.last_words,
            &self.crash_stack,
        ];
        let many = [
            &self.threads,
            &self.thread_exits,
            &self.signals,
            &self.calls,
            &self.sigchlds,
        ];
        let marks = self.marks.iter().flat_map(|(_, m)| m);
        one.into_iter()
            .flatten()
            .chain(many.into_iter().flatten())
            .chain(marks)
    }
}

/// What one look analyses, and which deaths it must not certify yet.
pub struct Look {
    pub log: EventLog,
    /// Processes whose end came in this look's newest records: their
    /// certificates wait one look, for what the next records add (the
    /// `kill_call` at syscall exit, the OOM killer's `oom` record).
    pub pending: HashSet<ProcKey>,
}

/// The daemon's live window over its own records (see the module's doc).
#[derive(Default, Debug)]
pub struct Window {
    procs: HashMap<ProcKey, Context>,
    /// The newest process seen with each pid (an `existing` record names its
    /// parent by pid only; a pid's newest holder is the one alive now).
    by_pid: HashMap<u32, ProcKey>,
    /// The previous look's records.
    before: Vec<Record>,
    /// Looks so far.
    looks: u64,
    /// Signals kept in a context whose kill-family call is not logged yet:
    /// (sender thread, call id) -> the targets holding them.
    awaiting: HashMap<(u32, u64), Vec<ProcKey>>,
    /// The latest OOM kills (rare; joined to their victims by thread id).
    ooms: VecDeque<Record>,
    /// The last look left deaths to certify at the next.
    waiting: bool,
}

impl Window {
    /// The log a look analyses: the context, the previous look's records
    /// and `new`, in sequence order (each record once); then `new` is
    /// folded into the context and kept as the next look's `before`.
    pub fn look(&mut self, header: &Header, new: Vec<Record>) -> Look {
        let mut by_seq: BTreeMap<u64, Record> = BTreeMap::new();
        for rec in self.procs.values().flat_map(Context::records) {
            if let Some(seq) = rec.stamp().map(|s| s.seq) {
                by_seq.entry(seq).or_insert_with(|| rec.clone());
            }
        }
        for rec in &self.ooms {
            if let Some(seq) = rec.stamp().map(|s| s.seq) {
                by_seq.entry(seq).or_insert_with(|| rec.clone());
            }
        }
        let mut unstamped = Vec::new();
        // A kill-family call that delivered nothing joins no signal: it is
        // analysed in the look it came in only, so a fold of failed calls
        // (near misses) counts each call once whatever the looks cut.
        let joinable = |rec: &&Record| !matches!(rec, Record::KillCall(k) if k.deliveries == 0);
        for rec in self.before.iter().filter(joinable).chain(&new) {
            match rec.stamp().map(|s| s.seq) {
                Some(seq) => {
                    by_seq.entry(seq).or_insert_with(|| rec.clone());
                }
                None => unstamped.push(rec.clone()),
            }
        }
        let mut pending = HashSet::new();
        for rec in &new {
            if let Record::Exit(e) = rec {
                if e.group_dead {
                    pending.insert(e.task.key());
                }
            }
            self.absorb(rec);
        }
        // A SIGPIPE's reader may end just after it (within the analysis's
        // slack): its writer waits while new records keep coming that
        // soon after its death, so the reader's end is there when it is
        // certified. A look with nothing new lets it go.
        let newest = new.iter().filter_map(|r| r.stamp().map(|s| s.t)).max();
        for (key, ctx) in &mut self.procs {
            let waits = match (&ctx.end, newest) {
                (Some(Record::Exit(e)), Some(now)) => {
                    matches!(
                        e.status,
                        ExitStatus::Signaled {
                            signal: SIGPIPE,
                            ..
                        }
                    ) && e.at.t + READER_EXIT_AFTER_NS > now
                }
                _ => false,
            };
            if waits {
                pending.insert(*key);
                ctx.ended_in = Some(self.looks);
            }
        }
        self.evict();
        self.before = new;
        self.looks += 1;
        self.waiting = !pending.is_empty();
        let mut events: Vec<Record> = by_seq.into_values().collect();
        events.extend(unstamped);
        Look {
            log: EventLog {
                header: header.clone(),
                events,
                trailer: None,
                truncated: false,
                ignored: Vec::new(),
                lines_skipped: 0,
                not_whole: None,
            },
            pending,
        }
    }

    /// The last look logged deaths it left for the next to certify: look
    /// again even if nothing new was written.
    pub fn waiting(&self) -> bool {
        self.waiting
    }

    /// Is `key` running, as far as the window has seen (its end not seen)?
    /// A look's log may name a process the window let go (a record of the
    /// look before it), and its model then has no end for it.
    pub fn alive(&self, key: ProcKey) -> bool {
        self.procs.get(&key).is_some_and(|c| c.alive)
    }

    /// Processes the context holds now (alive, or a dead ancestor of one).
    pub fn held(&self) -> usize {
        self.procs.len()
    }

    fn absorb(&mut self, rec: &Record) {
        match rec {
            Record::Fork(f) if f.thread => {
                let threads = &mut self.entry(f.child.key()).threads;
                threads.push_back(rec.clone());
                if threads.len() > THREADS_KEPT {
                    threads.pop_front();
                }
            }
            Record::Fork(f) => {
                if let Some(parent) = self.procs.get_mut(&f.parent.key()) {
                    parent.last_child = Some(rec.clone());
                }
                let key = f.child.key();
                let ctx = self.entry(key);
                ctx.birth = Some(rec.clone());
                ctx.parent = Some(f.parent.key());
                ctx.alive = true;
            }
            Record::Existing(x) => {
                let parent = self.by_pid.get(&x.ppid).copied();
                let ctx = self.entry(x.task.key());
                ctx.birth = Some(rec.clone());
                ctx.parent = parent;
                ctx.alive = true;
            }
            Record::Exec(e) => self.entry(e.task.key()).exec = Some(rec.clone()),
            Record::Signal(s) => self.absorb_signal(rec, s),
            Record::KillCall(k) => self.absorb_kill_call(rec, k),
            Record::Oom(_) => {
                self.ooms.push_back(rec.clone());
                if self.ooms.len() > OOMS_KEPT {
                    self.ooms.pop_front();
                }
            }
            Record::TestMark(m) => self.absorb_mark(rec, m),
            Record::LastWords(l) => self.entry(l.task.key()).last_words = Some(rec.clone()),
            Record::CrashStack(c) => self.entry(c.task.key()).crash_stack = Some(rec.clone()),
            Record::Exit(e) if e.group_dead => self.absorb_group_exit(rec, e),
            Record::Exit(e) => {
                // A thread's end, kept with its fork (both bounded).
                if let Some(ctx) = self.procs.get_mut(&e.task.key()) {
                    ctx.thread_exits.push_back(rec.clone());
                    if ctx.thread_exits.len() > SIGNALS_KEPT {
                        ctx.thread_exits.pop_front();
                    }
                }
            }
            _ => {}
        }
    }

    /// A signal: kept with its target (SIGCHLDs apart, both bounded), and
    /// its target awaited by the kill-family call that sent it.
    fn absorb_signal(&mut self, rec: &Record, s: &Signal) {
        if let Some(call) = &s.call {
            if self.awaiting.len() >= AWAITING_MAX {
                self.awaiting.clear();
            }
            let wait = self.awaiting.entry((s.sender.tid, call.id));
            wait.or_default().push(s.target.key());
        }
        let ctx = self.entry(s.target.key());
        let signals = match s.sig {
            SIGCHLD => &mut ctx.sigchlds,
            _ => &mut ctx.signals,
        };
        signals.push_back(rec.clone());
        if signals.len() > SIGNALS_KEPT {
            signals.pop_front();
        }
    }

    /// A kill-family call: kept with each target its signals reached.
    fn absorb_kill_call(&mut self, rec: &Record, k: &KillCall) {
        for target in self
            .awaiting
            .remove(&(k.sender.tid, k.call_id))
            .unwrap_or_default()
        {
            if let Some(ctx) = self.procs.get_mut(&target) {
                ctx.calls.push_back(rec.clone());
                if ctx.calls.len() > SIGNALS_KEPT {
                    ctx.calls.pop_front();
                }
            }
        }
    }

    /// A test mark: kept per thread of its process (both bounded).
    fn absorb_mark(&mut self, rec: &Record, m: &TestMark) {
        let marks = &mut self.entry(m.task.key()).marks;
        let at = match marks.iter().position(|(tid, _)| *tid == m.task.tid) {
            Some(at) => at,
            None => {
                if marks.len() >= THREADS_KEPT {
                    marks.pop_front();
                }
                marks.push_back((m.task.tid, VecDeque::new()));
                marks.len() - 1
            }
        };
        let kept = &mut marks[at].1;
        kept.push_back(rec.clone());
        if kept.len() > MARKS_KEPT {
            kept.pop_front();
        }
    }

    /// A process's end: it is no longer alive, and its parent has an ended
    /// (maybe failed) child; a failed end (a SIGPIPE death, an EPIPE exit)
    /// keeps the child that ended before it (the reader).
    fn absorb_group_exit(&mut self, rec: &Record, e: &Exit) {
        let look = self.looks;
        let key = e.task.key();
        let mut failed_under = None;
        if let Some(ctx) = self.procs.get_mut(&key) {
            ctx.alive = false;
            ctx.end = Some(rec.clone());
            ctx.ended_in = Some(look);
            let failed = !matches!(e.status, ExitStatus::Exited { code: 0 });
            failed_under = ctx.parent.map(|p| (p, failed && !stopped_by(ctx, p)));
        }
        if let Some((parent, failed)) = failed_under {
            let before = self.procs.get_mut(&parent).and_then(|parent| {
                let before = parent.ended_child.replace(key);
                if failed {
                    parent.failed_child = Some(key);
                }
                before
            });
            // A writer's reader: for a SIGPIPE death, and for a failed exit,
            // which is how Python and Node end on EPIPE (their reader, e.g.
            // `head`, ended just before them and would otherwise leave the
            // window once the parent's next child ends).
            let sigpipe = matches!(
                e.status,
                ExitStatus::Signaled {
                    signal: SIGPIPE,
                    ..
                }
            );
            if failed || sigpipe {
                if let Some(ctx) = self.procs.get_mut(&key) {
                    ctx.reader_before = before;
                }
            }
        }
    }

    fn entry(&mut self, key: ProcKey) -> &mut Context {
        let newest = self.by_pid.entry(key.pid).or_insert(key);
        if newest.start < key.start {
            *newest = key;
        }
        let look = self.looks;
        let ctx = self.procs.entry(key).or_insert_with(|| Context {
            // Alive until its end is seen, born or not.
            alive: true,
            ..Context::default()
        });
        ctx.seen_in = look;
        ctx
    }

    /// Drop every process that ended before this look and is no live
    /// process's ancestor (one that ended in this look stays for the next,
    /// which certifies it).
    fn evict(&mut self) {
        let mut keep: HashSet<ProcKey> = HashSet::new();
        for (key, ctx) in &self.procs {
            let live =
                ctx.alive && (ctx.birth.is_some() || ctx.seen_in + UNBORN_LOOKS > self.looks);
            if !live && ctx.ended_in != Some(self.looks) {
                continue;
            }
            let mut at = Some(*key);
            // Ancestors up the chain, each once (a cycle of reused pids ends).
            while let Some(k) = at {
                if !keep.insert(k) {
                    break;
                }
                at = self.procs.get(&k).and_then(|c| c.parent);
            }
        }
        // Below each kept process, its chain of last failed children and its
        // last child to end; then the senders of the signals each one keeps
        // (a victim certified a look after its killer ended still names it,
        // as it was: a caught SIGTERM's sender is not the latest once the
        // victim re-raises it on itself).
        let roots: Vec<ProcKey> = keep.iter().copied().collect();
        for root in roots {
            let ctx = self.procs.get(&root);
            let near = ctx.map(|c| [c.ended_child, c.reader_before]);
            keep.extend(
                near.into_iter()
                    .flatten()
                    .flatten()
                    .filter(|k| self.procs.contains_key(k)),
            );
            let mut at = ctx.and_then(|c| c.failed_child);
            for _ in 0..FAILED_CHAIN_KEPT {
                let Some(k) = at.filter(|k| self.procs.contains_key(k)) else {
                    break;
                };
                keep.insert(k);
                at = self.procs.get(&k).and_then(|c| c.failed_child);
            }
        }
        let senders: Vec<ProcKey> = keep
            .iter()
            .filter_map(|k| self.procs.get(k))
            .flat_map(senders)
            .filter(|k| self.procs.contains_key(k))
            .collect();
        keep.extend(senders);
        self.procs.retain(|k, _| keep.contains(k));
        self.by_pid.retain(|_, k| keep.contains(k));
    }
}

/// The senders of the delivered signals it keeps (SIGCHLD aside): at most
/// [`SIGNALS_KEPT`].
fn senders(ctx: &Context) -> impl Iterator<Item = ProcKey> + '_ {
    ctx.signals.iter().filter_map(|r| match r {
        Record::Signal(s) if s.result == "delivered" => Some(s.sender.key()),
        _ => None,
    })
}

/// The sender of its latest delivered signal (SIGCHLD aside).
fn last_sender(ctx: &Context) -> Option<ProcKey> {
    ctx.signals.iter().rev().find_map(|r| match r {
        Record::Signal(s) if s.result == "delivered" => Some(s.sender.key()),
        _ => None,
    })
}

/// Its last signal (SIGCHLD aside) came from `parent`: a death its parent
/// caused (a pool stopping its workers), which no later exit of the
/// parent's follows from.
fn stopped_by(ctx: &Context, parent: ProcKey) -> bool {
    last_sender(ctx) == Some(parent)
}
