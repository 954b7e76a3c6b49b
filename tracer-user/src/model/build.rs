//! Log -> model: one pass registering everything, then the joins.
use std::collections::BTreeMap;

use super::joins::{join_kill_calls, join_ooms, mark_run};
use super::{
    compact::{At, KillRec, SigRec, Who},
    lines::{KillLine, SignalLine},
    process::{End, ExecInfo, ForkInfo, Process, ThreadExit, ThreadSpan},
    KillCallEv, Model, OomEv, SignalEv,
};
use crate::eventlog::{
    Exec, Existing, Exit, Fork, Header, ProcKey, Record, Task, TestMark, Trailer,
};

use tracer_common::signals::{SIGCHLD, SI_QUEUE, SI_TKILL, SI_USER};
/// Builds the model from records handed over one at a time, in log order:
/// each is read and let go, so a log never has to be in memory whole.
pub struct Builder {
    m: Model,
    hooks: Vec<crate::eventlog::HookStatus>,
    command: Vec<String>,
}

impl Builder {
    pub fn new(header: &Header) -> Builder {
        Builder {
            m: Model {
                tracer_pid: header.tracer_pid,
                daemon: header.mode == "daemon",
                boot_to_wall_ns: header.boot_to_wall_ns,
                arch: header.arch.clone().unwrap_or_else(|| "x86_64".into()),
                root: None,
                procs: BTreeMap::new(),
                signals: Vec::new(),
                kill_calls: Vec::new(),
                ooms: Vec::new(),
                oom_index: Default::default(),
                lineage: Default::default(),
                snapshots: Vec::new(),
                resources: Default::default(),
                signal_summaries: Vec::new(),
                odd_times: Default::default(),
                intern: Default::default(),
                first_t: 0,
                last_t: 0,
                not_run: None,
                coverage: Default::default(),
                marks: Vec::new(),
                marks_left_out: 0,
                test_windows: Vec::new(),
                test_windows_left_out: 0,
            },
            hooks: header.hooks.clone(),
            command: header.command.clone(),
        }
    }

    pub fn push(&mut self, rec: &Record) {
        let m = &mut self.m;
        if let Some(s) = rec.stamp() {
            if m.first_t == 0 || s.t < m.first_t {
                m.first_t = s.t;
            }
            m.last_t = m.last_t.max(s.t);
            // The run's root: the tracer's first child process.
            if m.root.is_none() {
                if let Record::Fork(f) = rec {
                    if !f.thread && f.parent.pid == m.tracer_pid {
                        m.root = Some(f.child.key());
                    }
                }
            }
        }
        record(m, rec);
    }

    /// A `signal` line read in place ([`super::lines`]): as `push` of its record.
    pub fn push_signal(&mut self, s: &SignalLine) {
        self.stamped(s.t);
        signal(
            &mut self.m,
            s.rec(),
            [s.sender.who(), s.target.who()],
            [s.sender.comm.as_deref(), s.target.comm.as_deref()],
            s.sender_argv.as_ref().map(|a| (a, s.sender_argv_truncated)),
            &s.time,
        );
    }

    /// A `kill_call` line read in place: as `push` of its record.
    pub fn push_kill_call(&mut self, k: &KillLine) {
        self.stamped(k.t);
        kill_call(
            &mut self.m,
            k.rec(),
            k.sender.who(),
            k.sender.comm.as_deref(),
            &k.time,
        );
    }

    fn stamped(&mut self, t: u64) {
        let m = &mut self.m;
        if m.first_t == 0 || t < m.first_t {
            m.first_t = t;
        }
        m.last_t = m.last_t.max(t);
    }

    pub fn finish(self, trailer: Option<&Trailer>, truncated: bool) -> Model {
        let mut m = self.m;
        m.not_run = trailer.and_then(|t| {
            Some(super::NotRun {
                command: self.command.clone(),
                reason: t.command_error.clone()?,
                code: match t.command_status {
                    Some(crate::eventlog::ExitStatus::Exited { code }) => Some(code),
                    _ => None,
                },
            })
        });
        m.coverage = coverage(&self.hooks, trailer, truncated);
        m.odd_times.finish();
        m.intern = Default::default();
        m.signals.shrink_to_fit();
        m.kill_calls.shrink_to_fit();
        join_kill_calls(&mut m);
        for (i, s) in m.signals.iter().enumerate() {
            if let Some(p) = m.procs.get_mut(&s.target) {
                p.rare_mut().signals_in.push(i);
            }
        }
        mark_run(&mut m);
        join_ooms(&mut m);
        m
    }
}

fn coverage(
    hooks: &[crate::eventlog::HookStatus],
    trailer: Option<&Trailer>,
    truncated: bool,
) -> super::Coverage {
    let attached = |name: &str| hooks.iter().any(|h| h.name == name && h.attached);
    let Some(t) = trailer.filter(|_| !truncated) else {
        return super::Coverage::default();
    };
    let signals = attached("signal_generate") && t.lost.total() == 0;
    super::Coverage {
        signals,
        kill_calls: signals && attached("kill_syscalls"),
    }
}

/// si_code values a process chooses (kill family); anything else is raised
/// by the kernel and says nothing about the "sender" running code.
const PROCESS_CODES: [i32; 3] = [SI_USER, SI_QUEUE, SI_TKILL];

/// Registers a task mention: its process exists, its thread is known.
fn see(m: &mut Model, task: &Task, t: u64) -> ProcKey {
    see_who(m, Who::from(task), task.comm.as_deref(), t)
}

/// [`see`], handing back the process too.
fn see_task<'a>(m: &'a mut Model, task: &Task, t: u64) -> (ProcKey, &'a mut Process) {
    see_mut(
        &mut m.procs,
        &mut m.intern,
        Who::from(task),
        task.comm.as_deref(),
        t,
    )
}

fn see_who(m: &mut Model, task: Who, comm: Option<&str>, t: u64) -> ProcKey {
    see_mut(&mut m.procs, &mut m.intern, task, comm, t).0
}

type Procs = BTreeMap<ProcKey, Box<Process>>;

/// [`see_who`], handing back the process too: one search of a map that a
/// fork storm fills with a million processes, where each record used to
/// search it three to six times.
fn see_mut<'a>(
    procs: &'a mut Procs,
    intern: &mut super::intern::Interner,
    task: Who,
    comm: Option<&str>,
    t: u64,
) -> (ProcKey, &'a mut Process) {
    let key = resolve(procs, &task, t);
    let p = procs
        .entry(key)
        .or_insert_with(|| Box::new(Process::new(key)));
    // Compared first: a signal storm names the same two processes a
    // million times.
    if let Some(comm) = comm {
        if p.comm.as_deref() != Some(comm) {
            let name = intern.text(comm);
            // A process's name changing between records is a thread of
            // another name (or a rename): kept per thread for the labels
            // stage. Only on a change, so a storm from one thread costs
            // nothing more.
            if p.comm.is_some() || task.tid != task.pid {
                note_thread_name(p, task.tid, t, &name);
            }
            p.comm = Some(name);
        }
    }
    p.threads.or_insert(
        task.tid,
        ThreadSpan {
            from: key.start,
            until: None,
        },
    );
    (key, p)
}

/// Thread `tid` showed `name` at `t`: a new entry when that is not the
/// name its latest entry (or, with none, the process's first) says.
fn note_thread_name(p: &mut Process, tid: u32, t: u64, name: &std::sync::Arc<str>) {
    let first = p.comm.clone();
    let (pid, start) = (p.key.pid, p.key.start);
    let r = p.rare_mut();
    let last = r.thread_names.iter().rev().find(|n| n.tid == tid);
    let unchanged = match last {
        Some(n) => n.name == *name,
        None => first.as_ref() == Some(name) && tid == pid,
    };
    if unchanged {
        return;
    }
    if r.thread_names.is_empty() && tid != pid {
        // The main thread's name so far: what the other threads differ from.
        if let Some(first) = first {
            r.thread_names.push(super::ThreadName {
                tid: pid,
                t: start,
                name: first,
            });
        }
    }
    if r.thread_names.len() >= super::MAX_THREAD_NAMES {
        r.thread_names_left_out = r.thread_names_left_out.saturating_add(1);
        return;
    }
    r.thread_names.push(super::ThreadName {
        tid,
        t,
        name: name.clone(),
    });
}

/// A task whose start time the capture could not read (`start: 0`) is the
/// most recently started known process with that pid that had not ended by
/// `t`; failing that it keeps `(pid, 0)` as its own identity.
fn resolve(procs: &Procs, task: &Who, t: u64) -> ProcKey {
    if task.start != 0 {
        return task.key();
    }
    let lo = ProcKey {
        pid: task.pid,
        start: 1,
    };
    let hi = ProcKey {
        pid: task.pid,
        start: u64::MAX,
    };
    procs
        .range(lo..=hi)
        .rev()
        .find(|(k, p)| k.start <= t && p.end.as_ref().is_none_or(|e| e.t >= t))
        .map_or(task.key(), |(k, _)| *k)
}

fn active(m: &mut Model, key: ProcKey, t: u64) {
    if let Some(p) = m.procs.get_mut(&key) {
        p.last_active = p.last_active.max(t);
    }
}

fn record(m: &mut Model, rec: &Record) {
    match rec {
        Record::Fork(f) => fork(m, f),
        Record::Exec(e) => exec(m, e),
        Record::Exit(x) => exit(m, x),
        Record::Signal(s) => signal(
            m,
            SigRec::from(s),
            [Who::from(&s.sender), Who::from(&s.target)],
            [s.sender.comm.as_deref(), s.target.comm.as_deref()],
            s.sender_argv.as_ref().map(|a| (a, s.sender_argv_truncated)),
            &s.at.time,
        ),
        Record::KillCall(k) => kill_call(
            m,
            KillRec::from(k),
            Who::from(&k.sender),
            k.sender.comm.as_deref(),
            &k.at.time,
        ),
        Record::SignalSummary(s) => {
            see(m, &s.target, s.at.t);
            let sender = see(m, &s.sender, s.at.t);
            if s.sig != SIGCHLD {
                active(m, sender, s.last_t);
            }
            m.signal_summaries.push(s.clone());
        }
        Record::Oom(o) => {
            let trigger = see(m, &o.trigger, o.at.t);
            m.ooms.push(OomEv {
                ev: o.clone(),
                victim: None,
                trigger,
                signal: None,
            });
        }
        Record::LastWords(l) => {
            let key = see(m, &l.task, l.at.t);
            if let Some(p) = m.procs.get_mut(&key) {
                p.rare_mut().last_words = Some(Box::new(l.clone()));
            }
        }
        Record::CrashStack(c) => {
            let key = see(m, &c.task, c.at.t);
            if let Some(p) = m.procs.get_mut(&key) {
                p.rare_mut().crash_stack = Some(Box::new(c.clone()));
            }
        }
        Record::Leak(l) => {
            let key = see(m, &l.task, l.at.t);
            if let Some(p) = m.procs.get_mut(&key) {
                p.rare_mut().leak = Some(Box::new(l.clone()));
            }
        }
        Record::Snapshot(snap) => m.snapshots.push(snap.clone()),
        Record::Existing(x) => existing(m, x),
        Record::TestMark(mk) => test_mark(m, mk),
        Record::TestWindow(w) => m.add_test_window(w.clone()),
        Record::Resources(r) => m.resources.push(r),
        Record::Header(_) | Record::Trailer(_) => {}
    }
}

/// A fork: a thread joins its process; a process gets its parent, its
/// namespace and its first thread, and joins its parent's children.
fn fork(m: &mut Model, f: &Fork) {
    let (parent, pp) = see_task(m, &f.parent, f.at.t);
    pp.last_active = pp.last_active.max(f.at.t);
    // The kernel side logs a fork only from a process it tracks (or
    // the tracer's own): under `daemon --all` that is how a process
    // started before the daemon, which never execs or exits while
    // watched (the job's shell), is known to be watched.
    pp.lifecycle_seen = true;
    if f.thread {
        let (_, p) = see_task(m, &f.child, f.at.t);
        p.threads.insert(
            f.child.tid,
            ThreadSpan {
                from: f.at.t,
                until: None,
            },
        );
        return;
    }
    let (child, p) = see_task(m, &f.child, f.at.t);
    // A child is in a parent's `children` only if its `parent` was
    // once set to it: a child with no parent yet needs no search (a
    // fork storm's parent has thousands of children).
    let listed = p.parent.is_some();
    p.parent = Some(parent);
    p.ns = f.child_ns;
    p.fork = Some(ForkInfo {
        seq: f.at.seq,
        t: f.at.t,
        by_tid: f.parent.tid,
    });
    p.lifecycle_seen = true;
    p.threads.insert(
        f.child.tid,
        ThreadSpan {
            from: f.at.t,
            until: None,
        },
    );
    let pp = m.procs.get_mut(&parent).expect("registered");
    if !listed || !pp.children.contains(&child) {
        pp.children.push(child);
    }
}

/// An exec: the process's new program and argv (a non-leader's exec ends
/// the old leader tid).
fn exec(m: &mut Model, e: &Exec) {
    let (_, p) = see_mut(
        &mut m.procs,
        &mut m.intern,
        Who::from(&e.task),
        None,
        e.at.t,
    );
    // An exec renames the process (its comm becomes the new program's):
    // that is the exec, not a thread of another name, so only a process
    // that already keeps thread names notes it. Noted for every exec, it
    // gave each process of a fork storm its rare parts and two names: a
    // 1M-event fork-heavy report went from 140 to 208 MB.
    if let Some(comm) = e.task.comm.as_deref() {
        if p.comm.as_deref() != Some(comm) {
            let name = m.intern.text(comm);
            if !p.thread_names().is_empty() {
                note_thread_name(p, e.task.tid, e.at.t, &name);
            }
            p.comm = Some(name);
        }
    }
    p.last_active = p.last_active.max(e.at.t);
    p.lifecycle_seen = true;
    // A non-leader exec takes over the leader's tid; the old tid ends.
    if let Some(old) = e.old_tid.filter(|&o| o != e.task.tid) {
        if let Some(span) = p.threads.get_mut(&old) {
            span.until = Some(e.at.t);
        }
    }
    p.execs.push(ExecInfo {
        seq: e.at.seq,
        t: e.at.t,
        filename: m.intern.text(&e.filename),
        argv: m.intern.argv(&e.argv),
        argv_truncated: e.argv_truncated,
        env: (!e.test_env.is_empty()).then(|| Box::new(e.test_env.clone())),
    });
}

/// An exit: a thread's, or the group's (the process's end).
fn exit(m: &mut Model, x: &Exit) {
    let (_, p) = see_task(m, &x.task, x.at.t);
    p.lifecycle_seen = true;
    if let Some(span) = p.threads.get_mut(&x.task.tid) {
        span.until = Some(x.at.t);
    }
    if x.group_dead {
        // The first group-dead exit wins; a second one would be a
        // corrupt log, not a second death.
        p.end.get_or_insert(End {
            seq: x.at.seq,
            t: x.at.t,
            tid: x.task.tid,
            exit_code: x.exit_code,
            status: x.status.clone(),
        });
    } else {
        p.rare_mut().thread_exits.push(ThreadExit {
            seq: x.at.seq,
            t: x.at.t,
            tid: x.task.tid,
            status: x.status.clone(),
        });
    }
}

/// A process already running when the capture began, with its parent when
/// that was running too.
fn existing(m: &mut Model, x: &Existing) {
    let key = see(m, &x.task, x.at.t);
    // Its parent, if that was already running too (same instant):
    // the latest process of that pid started before it. Looked up
    // in the map's (pid, start) order, not by a scan of every
    // process: a daemon starting on 20,000 processes scanned them
    // all for each (1.6 s).
    let parent = m
        .procs
        .range(
            ProcKey {
                pid: x.ppid,
                start: 0,
            }..=ProcKey {
                pid: x.ppid,
                start: x.task.start,
            },
        )
        .next_back()
        .map(|(k, _)| *k);
    let p = m.procs.get_mut(&key).expect("registered");
    // Listed among a parent's children only if its parent was once
    // set (as for forks): a shell with thousands of existing
    // children needs no search of them.
    let listed = p.parent.is_some();
    p.lifecycle_seen = true;
    p.ns = x.ns;
    if !x.argv.is_empty() {
        p.execs.push(ExecInfo {
            seq: x.at.seq,
            t: x.at.t,
            filename: m.intern.text(x.exe.as_deref().unwrap_or_default()),
            argv: m.intern.argv(&x.argv),
            argv_truncated: x.argv_truncated,
            env: None,
        });
    }
    if let Some(parent) = parent.filter(|pk| *pk != key) {
        p.parent = Some(parent);
        if let Some(pp) = m.procs.get_mut(&parent) {
            if !listed || !pp.children.contains(&key) {
                pp.children.push(key);
            }
        }
    }
}

/// A test's mark, up to [`super::MAX_MARKS`] (counted beyond).
fn test_mark(m: &mut Model, mk: &TestMark) {
    let key = see(m, &mk.task, mk.at.t);
    if m.marks.len() >= super::MAX_MARKS {
        m.marks_left_out += 1;
        return;
    }
    let text = m.intern.text(&mk.text);
    m.marks.push(super::Mark {
        seq: mk.at.seq,
        t: mk.at.t,
        key,
        tid: mk.task.tid,
        text,
    });
}

/// A signal, from a record or a line ([`super::lines`]). `comms`: the
/// sender's and the target's names.
fn signal(
    m: &mut Model,
    s: SigRec,
    ends: [Who; 2],
    comms: [Option<&str>; 2],
    sender_argv: Option<(&Vec<String>, bool)>,
    time: &str,
) {
    // The sender's own changes first (seeing the target touches neither
    // its execs nor its activity): one search of the map for it.
    let (sender, p) = see_mut(&mut m.procs, &mut m.intern, ends[0], comms[0], s.at.t);
    // An outside sender's argv, read at capture time: its only name.
    if let Some((argv, cut)) = sender_argv {
        if p.execs.is_empty() {
            p.execs.push(ExecInfo {
                seq: s.at.seq,
                t: s.at.t,
                filename: m.intern.text(""),
                argv: m.intern.argv(argv),
                argv_truncated: cut,
                env: None,
            });
        }
    }
    if s.sig != SIGCHLD && (s.call.is_some() || PROCESS_CODES.contains(&s.code)) {
        p.last_active = p.last_active.max(s.at.t);
    }
    let target = see_who(m, ends[1], comms[1], s.at.t);
    keep_odd_time(m, s.at, time);
    m.signals.push(SignalEv {
        ev: s,
        sender,
        target,
        kill_call: None,
    });
}

fn kill_call(m: &mut Model, k: KillRec, who: Who, comm: Option<&str>, time: &str) {
    let (sender, p) = see_mut(&mut m.procs, &mut m.intern, who, comm, k.at.t);
    p.last_active = p.last_active.max(k.at.t);
    keep_odd_time(m, k.at, time);
    m.kill_calls.push(KillCallEv::new(k, sender));
}

/// The model derives a signal's or kill call's `time` from `t`; a log whose
/// text says otherwise keeps it.
fn keep_odd_time(m: &mut Model, at: At, time: &str) {
    m.odd_times.note(at.seq, at.t, time, m.boot_to_wall_ns);
}
