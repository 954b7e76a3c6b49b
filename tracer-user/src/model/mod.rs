//! The process model: every process the log mentions, keyed by
//! `(pid, start)`, with its threads, parent, execs, lifetime and end; every
//! signal joined to the kill-family call that produced it; every OOM kill
//! joined to its victim.
//!
//! Built in one pass over the log plus a join pass, because a `kill_call`
//! record is written at syscall *exit*, after the `signal` records it caused.
mod build;
mod compact;
mod intern;
mod joins;
mod lineage;
pub mod lines;
mod positions;
mod process;
mod threads;
mod times;

use std::collections::BTreeMap;

pub use build::Builder;
pub use compact::{At, CallRec, Ids, KillRec, SigRec, Sym, Who};
pub(crate) use intern::Interner;
pub use positions::Positions;
pub use process::{
    End, ExecInfo, Execs, ForkInfo, Process, ThreadName, ThreadSpan, MAX_THREAD_NAMES,
};

use crate::eventlog::{EventLog, Oom, ProcKey, SnapshotTaken};

/// One `signal` record with both ends resolved to processes.
#[derive(Debug, Clone)]
pub struct SignalEv {
    pub ev: SigRec,
    pub sender: ProcKey,
    pub target: ProcKey,
    /// Index into [`Model::kill_calls`]: the syscall this delivery came
    /// from ([`SignalEv::kill_call`]; 32 bits, a signal storm keeps millions).
    kill_call: Option<u32>,
}

impl SignalEv {
    /// Index into [`Model::kill_calls`]: the syscall this delivery came from.
    pub fn kill_call(&self) -> Option<usize> {
        self.kill_call.map(|k| k as usize)
    }
}

/// One `kill_call` record (the signals it produced name it: `SignalEv::kill_call`).
#[derive(Debug, Clone)]
pub struct KillCallEv {
    pub ev: KillRec,
    /// The start of the process the sender resolved to (its pid is the
    /// record's): [`KillCallEv::sender`]. A signal storm keeps millions.
    sender_start: u64,
}

impl KillCallEv {
    pub fn new(ev: KillRec, sender: ProcKey) -> KillCallEv {
        debug_assert_eq!(ev.sender.pid, sender.pid, "resolving keeps the pid");
        KillCallEv {
            ev,
            sender_start: sender.start,
        }
    }

    /// The process that made the call.
    pub fn sender(&self) -> ProcKey {
        ProcKey {
            pid: self.ev.sender.pid,
            start: self.sender_start,
        }
    }
}

/// One `oom` record with its victim resolved.
#[derive(Debug, Clone)]
pub struct OomEv {
    pub ev: Oom,
    /// The process owning `victim_tid` at the time of the kill, if known.
    pub victim: Option<ProcKey>,
    /// The allocating task's process: named in reports, never blamed.
    pub trigger: ProcKey,
    /// The SIGKILL (SI_KERNEL) the OOM killer sent, index into `signals`.
    pub signal: Option<usize>,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub tracer_pid: u32,
    /// A `tracer daemon`'s log: the tracer watches a scope, and a signal
    /// to it from that scope is how a CI step stops it.
    pub daemon: bool,
    /// The log header's offset: wall-clock ns = `t` + this.
    pub boot_to_wall_ns: i64,
    /// The traced machine's architecture (the header's `arch`; `x86_64`
    /// for a log from before it was recorded): whose syscall numbers.
    pub arch: String,
    /// The wrapped command's process (forked by the tracer), if seen.
    pub root: Option<ProcKey>,
    /// Boxed: the map's nodes stay small (a fork storm's model holds
    /// hundreds of thousands of processes, and half-full nodes of whole
    /// processes doubled its memory).
    pub procs: BTreeMap<ProcKey, Box<Process>>,
    pub signals: Vec<SignalEv>,
    pub kill_calls: Vec<KillCallEv>,
    pub ooms: Vec<OomEv>,
    /// Each OOM kill found again by its victim and by its SIGKILL.
    oom_index: joins::OomIndex,
    /// Who is above whom, numbered once when a deep tree needs it.
    lineage: std::sync::OnceLock<lineage::Index>,
    /// Signal floods the kernel counted instead of logging each delivery.
    pub signal_summaries: Vec<crate::eventlog::SignalSummary>,
    /// Hang or cancellation snapshots, in log order.
    pub snapshots: Vec<SnapshotTaken>,
    /// The run's resources over time, bounded (resources/curve.rs).
    pub resources: crate::resources::Curve,
    /// Signal and kill-call `time` texts that are not what `t` says (a
    /// hand-edited log), by `seq`: the report shows the log's own text.
    odd_times: times::OddTimes,
    /// Names and argvs seen so far, while building (emptied by `finish`).
    intern: intern::Interner,
    /// Kernel time of the first and last event (0 when the log is empty).
    pub first_t: u64,
    pub last_t: u64,
    /// The wrapped command could not be run (the trailer's `command_error`).
    pub not_run: Option<NotRun>,
    /// What the log can vouch for (hooks attached, nothing lost).
    pub coverage: Coverage,
    /// Test marks (`test_mark` records), in log order, at most [`MAX_MARKS`].
    pub marks: Vec<Mark>,
    /// Marks past the cap, not kept.
    pub marks_left_out: u64,
    /// Test windows from runners' reports (`test_window` records, or
    /// `report --test-report`), at most [`MAX_TEST_WINDOWS`].
    pub test_windows: Vec<crate::eventlog::TestWindow>,
    /// Windows past the cap, not kept.
    pub test_windows_left_out: u64,
}

/// Most runner-report windows a model keeps: as many as one report file
/// may bring (`labels::report_file::MAX_TESTS`) times a few files.
pub const MAX_TEST_WINDOWS: usize = 400_000;

impl Model {
    /// A window from a runner's report, up to [`MAX_TEST_WINDOWS`].
    pub fn add_test_window(&mut self, w: crate::eventlog::TestWindow) {
        if self.test_windows.len() >= MAX_TEST_WINDOWS {
            self.test_windows_left_out += 1;
        } else {
            self.test_windows.push(w);
        }
    }
}

/// Most test marks a model keeps: the kernel sends at most 2,560 a second
/// per thread (`tracer_common::MARK_RATE`), and a long run of many threads
/// must still cost bounded memory.
pub const MAX_MARKS: usize = 200_000;

/// One test mark: the writer (process and thread) and the time are the
/// kernel's; `text` is what the test declared.
#[derive(Debug, Clone)]
pub struct Mark {
    pub seq: u64,
    pub t: u64,
    pub key: ProcKey,
    pub tid: u32,
    pub text: std::sync::Arc<str>,
}

/// A `tracer record` whose command could not be run: what it was to run,
/// why not, and the status tracer exited with (127, 126).
#[derive(Debug, Clone)]
pub struct NotRun {
    pub command: Vec<String>,
    pub reason: String,
    pub code: Option<i32>,
}

/// Whether an absence in the log means something. With the hook attached
/// and nothing lost, "no signal event" or "no kill syscall" is a fact about
/// the kernel path, not a gap in the capture.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Coverage {
    /// signal_generate attached, a trailer, and no event lost.
    pub signals: bool,
    /// ... and the kill-family syscalls attached with no in-flight loss:
    /// a process-sent signal without a `call` was sent by no kill syscall.
    pub kill_calls: bool,
}

/// The model keeps what the analysis reads, not the log's records: it is
/// built from a stream of records ([`Builder`], each record dropped once
/// seen), so a million-event log is never in memory as records.
impl Model {
    /// The model of a log already in memory.
    pub fn build(log: &EventLog) -> Model {
        let mut b = Builder::new(&log.header);
        for rec in &log.events {
            b.push(rec);
        }
        b.finish(log.trailer.as_ref(), log.truncated)
    }

    /// The signals kill call `k` produced (indices into `signals`, in
    /// order): the join is kept on the signal side only.
    pub fn signals_of(&self, k: usize) -> impl Iterator<Item = usize> + '_ {
        self.signals
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.kill_call() == Some(k))
            .map(|(i, _)| i)
    }

    /// The `time` of a signal or kill call: RFC 3339 UTC, as in the log.
    pub fn time_at(&self, at: &At) -> String {
        match self.odd_times.get(at.seq) {
            Some(text) => text,
            None => crate::eventlog::wall_time(at.t, self.boot_to_wall_ns),
        }
    }

    /// The (first) OOM kill whose victim `key` was, index into `ooms`.
    pub fn oom_of(&self, key: ProcKey) -> Option<usize> {
        self.oom_index.of_victim(key)
    }

    /// The (first) OOM kill that signal `i` was the SIGKILL of.
    pub fn oom_by_signal(&self, i: usize) -> Option<usize> {
        self.oom_index.of_signal(i)
    }

    pub fn proc(&self, key: ProcKey) -> Option<&Process> {
        self.procs.get(&key).map(|p| &**p)
    }

    pub fn is_tracer(&self, key: ProcKey) -> bool {
        // The tracer lives for the whole run, so its pid cannot be recycled
        // while the log is written: the bare pid is safe here.
        key.pid == self.tracer_pid
    }

    pub fn in_run(&self, key: ProcKey) -> bool {
        self.procs.get(&key).is_some_and(|p| p.in_run)
    }

    /// Parent chain, nearest first, stopping after the run root (or at the
    /// first process whose parent is unknown). Never includes `key` itself.
    pub fn ancestors(&self, key: ProcKey) -> Vec<ProcKey> {
        let mut out = Vec::new();
        // A set, not `out.contains`: that made a deep tree's chains cubic.
        let mut seen = std::collections::HashSet::from([key]);
        let mut cur = key;
        while let Some(parent) = self.procs.get(&cur).and_then(|p| p.parent) {
            // A cycle is impossible with real start times; guard anyway so a
            // hand-edited log cannot hang the report.
            if !seen.insert(parent) {
                break;
            }
            out.push(parent);
            if Some(parent) == self.root || self.is_tracer(parent) {
                break;
            }
            cur = parent;
        }
        out
    }

    /// `a` is among `b`'s [`Model::ancestors`], found without walking a
    /// deep tree's chain each time it is asked.
    pub fn is_ancestor(&self, a: ProcKey, b: ProcKey) -> bool {
        lineage::is_ancestor(self, a, b)
    }

    /// The argv a process was running at time `t`: its own last exec before
    /// `t`, else the image it inherited at fork (flagged `true`).
    pub fn argv_at(&self, key: ProcKey, t: u64) -> Option<(&[String], bool)> {
        let mut cur = key;
        let mut at = t;
        let mut inherited = false;
        for _ in 0..64 {
            let p = self.procs.get(&cur)?;
            if let Some(e) = p.exec_at(at) {
                return Some((&e.argv, inherited));
            }
            let fork = p.fork.as_ref()?;
            cur = p.parent?;
            at = fork.t;
            inherited = true;
        }
        None
    }

    /// The filename of the last exec of `key` before `t` (not inherited).
    pub fn filename_at(&self, key: ProcKey, t: u64) -> Option<&str> {
        self.procs.get(&key)?.exec_at(t).map(|e| &*e.filename)
    }

    /// Which process owned thread `tid` at time `t`. Among the processes that
    /// had such a thread alive then, the most recently started one wins (an
    /// older owner would have had to end before the tid could be reused).
    pub fn tid_owner(&self, tid: u32, t: u64) -> Option<ProcKey> {
        threads::owner(self, tid, t)
    }

    /// The process that was pid `ns_pid` in pid namespace `inum` at `t`: how
    /// a kill(2) from inside a container names its target.
    pub fn ns_owner(&self, inum: u32, ns_pid: u32, t: u64) -> Option<ProcKey> {
        self.procs
            .values()
            .filter(|p| p.ns.is_some_and(|n| n.inum == inum && n.pid == ns_pid))
            .filter(|p| p.alive_at(t))
            .map(|p| p.key)
            .max_by_key(|k| k.start)
    }
}
