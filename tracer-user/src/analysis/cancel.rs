//! Named cancellation: the kill that ends most CI runs is the CI runner's
//! own, and it reads as one finding ("the job was cancelled by GitHub's
//! runner …"), not as a pile of deaths from an outside process. Recognised
//! by its signature in the log alone (rules stated in docs/report.md,
//! "Cancellation by the CI runner"):
//! - one sender, outside the run, or a runner of the run named by its
//!   process (a test runner stopping its tests);
//! - every signal it sent into the run is a request to stop or a kill
//!   (SIGINT, SIGHUP/SIGQUIT/SIGTERM, SIGSTOP/SIGKILL), in that order of
//!   force: GitHub's runner sends SIGINT, waits 7.5 s, SIGTERM, waits 2.5 s,
//!   then SIGKILLs the tree; gitlab-runner SIGKILLs the process group;
//!   cargo-nextest sends SIGTERM (or the signal it was cancelled with) to a
//!   test's process group, then SIGKILL after its grace period; ctest
//!   stops and kills a test's tree with SIGSTOP and SIGKILL. No interval is
//!   read: a runner's waits are configurable, and a loaded machine
//!   stretches them;
//! - at least one of them aims at the head of the run: its root or a
//!   process whose parent is outside it (a runner's child, for a runner of
//!   the run), or a process group. A foreign kill of one worker deep in
//!   the tree is no cancellation: it stays an unexpected death;
//! - a sender not named as a runner also shows a runner's shape: a gentler
//!   signal, then a harder one, or a process-group kill. One lone kill of
//!   one process (a service manager's SIGTERM) stays a foreign kill.
//!
//! The deaths it caused (killed by its signals, or that caught one and
//! ended, or a non-zero exit after it) rank expected, as the tracer's own
//! forwarding of a cancellation does: the runner has already marked the
//! job cancelled.
use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use tracer_common::signals::{SIGHUP, SIGINT, SIGQUIT, SIGSTOP, SIGTERM};

use super::{
    sigfacts::{sent_by_process, SIGCHLD, SIGKILL},
    types::ProcRef,
    wording::{self as w, proc_phrase},
    Ctx,
};
use crate::{eventlog::ProcKey, model::Model};

/// A runner whose terminator tracer names, by the name its process or
/// sending thread has (the kernel's 15-byte comm, an exec'd file's name).
#[derive(Debug)]
pub(crate) struct Runner {
    /// What report.json calls it (`cancellation.runner`).
    pub id: &'static str,
    /// Its process name.
    name: &'static str,
    /// How a sentence names it.
    pub words: &'static str,
    /// A test runner (it stops tests), not a CI runner (it stops jobs).
    tests: bool,
}

/// GitHub's `Runner.Worker` runs the job's steps; `gitlab-runner` its shell
/// executor; `cargo-nextest` and `ctest` are test runners with their own
/// terminators. A .NET runner's kill comes from a thread-pool thread whose
/// comm is not the process's: the process is named only where the log
/// knows it (its exec, or a sidecar daemon that watched it start).
const RUNNERS: [Runner; 4] = [
    Runner {
        id: "github",
        tests: false,
        name: "Runner.Worker",
        words: "GitHub's runner",
    },
    Runner {
        id: "gitlab",
        tests: false,
        name: "gitlab-runner",
        words: "gitlab-runner",
    },
    Runner {
        id: "nextest",
        tests: true,
        name: "cargo-nextest",
        words: "cargo-nextest",
    },
    Runner {
        id: "ctest",
        tests: true,
        name: "ctest",
        words: "ctest",
    },
];

/// How hard a signal stops: a runner never goes back to a gentler one.
/// SIGSTOP ranks with SIGKILL: ctest stops each process of a tree before
/// it kills it, process by process.
fn force(sig: i32) -> Option<u8> {
    match sig {
        SIGINT => Some(1),
        SIGHUP | SIGQUIT | SIGTERM => Some(2),
        SIGSTOP | SIGKILL => Some(3),
        _ => None,
    }
}

/// What [`find`] recognised in the model.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub sender: ProcKey,
    pub runner: Option<&'static Runner>,
    /// The sender is a process of the run (a test runner).
    pub in_run: bool,
    /// Its signals into the run (indices into `Model::signals`), in log
    /// order: every one is the cancellation's.
    pub signals: Vec<usize>,
    /// The first of them: a non-zero exit after it is the cancellation's.
    pub first_seq: u64,
}

impl Found {
    /// Who cancelled, in words: the runner, or "an outside process".
    pub(crate) fn by(&self) -> &'static str {
        self.runner.map_or("an outside process", |r| r.words)
    }

    /// A test runner of the run stopping its own tests (its timeout or a
    /// cancellation it passed on: the kernel cannot tell which), not a CI
    /// runner cancelling the job (a daemon's scope may hold the runner).
    pub(crate) fn stops_tests(&self) -> bool {
        self.in_run && self.runner.is_some_and(|r| r.tests)
    }

    /// Why a death it caused ranks as it does: its rank reason, and the
    /// end of its headline.
    pub(crate) fn reason(&self) -> String {
        if self.stops_tests() {
            format!("stopped by {}, the run's own test runner", self.by())
        } else {
            format!("the job was cancelled by {}", self.by())
        }
    }

    /// Signal `i` is one of the cancellation's.
    pub(crate) fn sent(&self, i: usize) -> bool {
        self.signals.binary_search(&i).is_ok()
    }
}

/// The job's cancellation in the log, if its signature is there: the
/// first sender (in log order) whose signals into the run fit it.
pub(crate) fn find(m: &Model) -> Option<Found> {
    let mut order: Vec<ProcKey> = Vec::new();
    let mut by_sender: BTreeMap<ProcKey, Vec<usize>> = BTreeMap::new();
    // A sender of the run qualifies only as a named runner: looked up once.
    let mut named: HashMap<ProcKey, Option<&'static Runner>> = HashMap::new();
    for (i, s) in m.signals.iter().enumerate() {
        if s.ev.sig == SIGCHLD
            || !sent_by_process(s)
            || s.sender == s.target
            || m.is_tracer(s.sender)
            || !m.in_run(s.target)
        {
            continue;
        }
        if m.in_run(s.sender)
            && named
                .entry(s.sender)
                .or_insert_with(|| runner_of(m, s.sender))
                .is_none()
        {
            continue;
        }
        let list = by_sender.entry(s.sender).or_default();
        if list.is_empty() {
            order.push(s.sender);
        }
        list.push(i);
    }
    order.into_iter().find_map(|sender| {
        let signals = by_sender.remove(&sender)?;
        let in_run = m.in_run(sender);
        let forces: Option<Vec<u8>> = signals
            .iter()
            .map(|&i| force(m.signals[i].ev.sig))
            .collect();
        let forces = forces?;
        let in_order = forces.windows(2).all(|p| p[0] <= p[1]);
        if !in_order || !signals.iter().any(|&i| aims_at_head(m, i, in_run)) {
            return None;
        }
        // An unnamed sender shows a runner's shape, or it is one kill of
        // its own (a service manager stopping one process, an admin's
        // `kill`), which stays a foreign kill: a gentler signal, then a
        // harder one, or a process-group kill.
        let runner = runner_of(m, sender);
        let escalates = forces.first() < forces.last();
        if runner.is_none() && !escalates && !signals.iter().any(|&i| group_kill(m, i)) {
            return None;
        }
        let first = &m.signals[signals[0]];
        Some(Found {
            sender,
            runner,
            in_run,
            first_seq: first.ev.at.seq,
            signals,
        })
    })
}

/// The runner `key` is, by the names the log saw it under (its own, its
/// threads'), or the file it exec'd (argv[0] too: a runner run through a
/// symlink). The kernel keeps 15 bytes of a name: all four fit.
fn runner_of(m: &Model, key: ProcKey) -> Option<&'static Runner> {
    let p = m.proc(key)?;
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    let mut names: Vec<String> = p.comm.iter().map(|c| c.to_string()).collect();
    names.extend(p.thread_names().iter().map(|n| n.name.to_string()));
    if let Some(e) = p.execs.last() {
        names.push(base(&e.filename));
        names.extend(e.argv.first().map(|a| base(a)));
    }
    RUNNERS.iter().find(|r| names.iter().any(|n| n == r.name))
}

/// Signal `i` aims at the head of the run: a process group, or the run's
/// root or a process whose parent is outside the run; for a runner of the
/// run, its own child.
fn aims_at_head(m: &Model, i: usize, sender_in_run: bool) -> bool {
    if group_kill(m, i) {
        return true;
    }
    let s = &m.signals[i];
    let parent = m.proc(s.target).and_then(|p| p.parent);
    if sender_in_run {
        return parent == Some(s.sender);
    }
    m.root == Some(s.target) || parent.is_none_or(|p| !m.in_run(p))
}

/// Signal `i` came from a kill(-pgid, …): a process-group kill.
fn group_kill(m: &Model, i: usize) -> bool {
    let s = &m.signals[i];
    let call =
        s.ev.call
            .as_ref()
            .map(|c| (c.syscall == "kill", c.target_arg));
    let call = call.or_else(|| {
        let k = &m.kill_calls[s.kill_call()?].ev;
        Some((k.syscall == "kill", k.target_arg))
    });
    call.is_some_and(|(kill, arg)| kill && arg < -1)
}

/// The cancellation as report.json and the verdict show it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Cancellation {
    /// One sentence: the verdict's lead ("The job was cancelled by …").
    pub summary: String,
    /// Who, in words: the runner ("GitHub's runner", "gitlab-runner",
    /// "cargo-nextest", "ctest") or "an outside process".
    pub by: String,
    /// The runner recognised by its process name: `github`, `gitlab`,
    /// `nextest`, `ctest`; absent for an outside process it could not name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// The process that sent the signals.
    pub sender: ProcRef,
    /// The sender is a process of the run: a test runner stopping its
    /// tests (its timeout, or a cancellation it passed on).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sender_in_run: bool,
    /// Its signals into the run, in order (every delivery of a group
    /// kill).
    pub signals: Vec<super::SignalRef>,
    /// The deaths ranked as its doing (`cause.cancelled`).
    pub deaths: usize,
}

/// One of the cancellation's signals as its summary words it: what a
/// daemon's ledger keeps of it across looks (live/ledger/cancel.rs), so
/// that signals seen by many looks are worded as one log's are.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub signal: super::SignalRef,
    pub target: ProcKey,
    /// The target by its program's name, as it was then: "`bash` (pid 900)".
    pub program: String,
    /// A process-group kill's aim ("process group 900").
    pub group: Option<String>,
    /// The id of the kill-family call that sent it, when the signal names it.
    pub call: Option<u64>,
}

/// What a daemon's ledger takes of a look's cancellation ([`super::Raw`]):
/// who sent it, the summary's lead, and its signals that look saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    pub sender: ProcKey,
    /// The summary before its steps: "The job was cancelled by …".
    pub lead: String,
    /// Why a death it caused ranks expected (its rank reason).
    pub reason: String,
    pub steps: Vec<Step>,
}

/// The finding, worded: `deaths` counted by the caller; and what a
/// daemon's ledger keeps of it.
pub(crate) fn finding(cx: &Ctx, f: &Found, deaths: usize) -> (Cancellation, Sent) {
    let m = cx.m;
    let first = &m.signals[f.signals[0]];
    let sender = cx.proc_ref(f.sender, first.ev.at.t);
    // A runner by its own name: its command line (a shell's script, a
    // .NET host's arguments) says nothing more on line 1.
    let who = match f.runner {
        Some(r) => format!("{} (`{}`, pid {})", r.words, r.name, sender.pid),
        None => format!("{}, {}", f.by(), proc_phrase(&sender)),
    };
    let lead = if f.stops_tests() {
        format!("The tests were stopped by {who}, the run's own test runner (its timeout or a cancellation it passed on)")
    } else {
        format!("The job was cancelled by {who}")
    };
    let steps = steps(cx, f);
    let c = Cancellation {
        summary: summary(&lead, &steps, 0),
        by: f.by().to_string(),
        runner: f.runner.map(|r| r.id.to_string()),
        sender,
        sender_in_run: f.in_run,
        signals: steps.iter().map(|s| s.signal.clone()).collect(),
        deaths,
    };
    let sent = Sent {
        sender: f.sender,
        lead,
        reason: f.reason(),
        steps,
    };
    (c, sent)
}

/// Each of the cancellation's signals, in log order, as [`summary`] reads it.
fn steps(cx: &Ctx, f: &Found) -> Vec<Step> {
    let m = cx.m;
    f.signals
        .iter()
        .map(|&i| {
            let s = &m.signals[i];
            let group = cx
                .call_of(s)
                .filter(|(sc, a, _)| sc == "kill" && *a < -1)
                .map(|(sc, a, t)| w::aimed_at(&sc, a, t));
            Step {
                signal: super::certificate::signal_ref(m, s),
                target: s.target,
                program: program(&cx.proc_ref(s.target, s.ev.at.t)),
                group,
                call: s.ev.call.as_ref().map(|c| c.id),
            }
        })
        .collect()
}

/// The finding's one sentence: `lead`, then "SIGINT to `bash` (pid 900),
/// SIGTERM to it 7.5 s later, then SIGKILL to 3 processes 2.5 s later": one
/// clause per run of one signal, each target by its program's name (its
/// whole command is in its certificate). `more`: deliveries past the
/// `steps` listed (a daemon's ledger lists a bounded number), counted as
/// further targets of the last run.
pub fn summary(lead: &str, steps: &[Step], more: usize) -> String {
    let runs: Vec<&[Step]> = steps
        .chunk_by(|a, b| a.signal.sig == b.signal.sig)
        .collect();
    let mut clauses = Vec::new();
    let mut prev: Option<(u64, String)> = None;
    for (n, r) in runs.iter().enumerate() {
        let s = &r[0];
        let extra = if n + 1 == runs.len() { more } else { 0 };
        let mut targets: Vec<ProcKey> = r.iter().map(|x| x.target).collect();
        targets.sort_unstable();
        targets.dedup();
        // Every delivery of the run came from one kill-family call.
        let same_call = r.iter().all(|x| x.call.is_some() && x.call == s.call);
        let aim = match (&s.group, targets.as_slice()) {
            (Some(g), _) if same_call => g.clone(),
            (_, [_]) if extra == 0 => s.program.clone(),
            (_, many) => w::plural(many.len() + extra, "process", "processes"),
        };
        let t = s.signal.t;
        let (later, same) = match &prev {
            Some((at, a)) => (
                format!(" {} later", w::duration(t.saturating_sub(*at))),
                *a == aim,
            ),
            None => (String::new(), false),
        };
        let to = if same { "it" } else { aim.as_str() };
        clauses.push(format!("{} to {to}{later}", s.signal.sig_name));
        prev = Some((t, aim));
    }
    let steps = match clauses.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{}, then {last}", rest.join(", ")),
        _ => clauses.concat(),
    };
    format!("{lead}: {steps}")
}

/// "`bash` (pid 900)": the program a process ran, by its file's name.
fn program(p: &ProcRef) -> String {
    let name = p
        .argv
        .first()
        .map(|a| a.rsplit('/').next().unwrap_or(a).to_string())
        .or_else(|| p.comm.clone())
        .unwrap_or_else(|| "?".into());
    format!(
        "{} ({})",
        crate::text::markdown::code(&name),
        w::pid_label(p)
    )
}
