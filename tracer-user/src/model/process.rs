//! One process: what it was, where it came from, how it ended.
use std::sync::Arc;

use crate::eventlog::{ExitStatus, ProcKey};

#[derive(Debug, Clone)]
pub struct ForkInfo {
    pub seq: u64,
    pub t: u64,
    /// The thread of the parent that forked (the parent is its process).
    pub by_tid: u32,
}

#[derive(Debug, Clone)]
pub struct ExecInfo {
    pub seq: u64,
    pub t: u64,
    /// Shared: a fork storm execs the same few images a million times, and
    /// the model keeps each distinct filename and argv once.
    pub filename: Arc<str>,
    pub argv: Arc<[String]>,
    pub argv_truncated: bool,
    /// The runners' variables of its environment at exec (the log's
    /// `test_env`), boxed: most execs have none, and a fork storm's model
    /// holds a million execs.
    pub env: Option<Box<std::collections::BTreeMap<String, String>>>,
}

impl ExecInfo {
    /// The runners' variables at this exec (empty for most).
    pub fn test_env(&self) -> &std::collections::BTreeMap<String, String> {
        static NONE: std::collections::BTreeMap<String, String> = std::collections::BTreeMap::new();
        self.env.as_deref().unwrap_or(&NONE)
    }
}

/// A process's execs, in order. Most processes exec once (or never): the
/// one is kept in place (a vector's allocation cost 64 bytes a process);
/// reads as a slice.
#[derive(Debug, Clone, Default)]
pub enum Execs {
    #[default]
    None,
    One(ExecInfo),
    Many(Vec<ExecInfo>),
}

impl Execs {
    pub fn push(&mut self, e: ExecInfo) {
        match std::mem::take(self) {
            Execs::None => *self = Execs::One(e),
            Execs::One(first) => *self = Execs::Many(vec![first, e]),
            Execs::Many(mut v) => {
                v.push(e);
                *self = Execs::Many(v);
            }
        }
    }
}

impl std::ops::Deref for Execs {
    type Target = [ExecInfo];
    fn deref(&self) -> &[ExecInfo] {
        match self {
            Execs::None => &[],
            Execs::One(e) => std::slice::from_ref(e),
            Execs::Many(v) => v,
        }
    }
}

/// When a thread was alive, as far as the log tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadSpan {
    /// Thread creation (fork event), else the process start: a thread first
    /// mentioned mid-run may have existed since the process began.
    pub from: u64,
    pub until: Option<u64>,
}

/// A process's threads by tid. Most processes have one thread: it is kept
/// in place (a vector's allocation cost 48 bytes a process); more are a
/// vector sorted by tid.
#[derive(Debug, Clone, Default)]
pub enum Threads {
    #[default]
    None,
    One(u32, ThreadSpan),
    Many(Vec<(u32, ThreadSpan)>),
}

impl Threads {
    pub fn get(&self, tid: &u32) -> Option<&ThreadSpan> {
        match self {
            Threads::None => None,
            Threads::One(t, span) => (t == tid).then_some(span),
            Threads::Many(v) => v
                .binary_search_by_key(tid, |&(t, _)| t)
                .ok()
                .map(|i| &v[i].1),
        }
    }

    pub fn get_mut(&mut self, tid: &u32) -> Option<&mut ThreadSpan> {
        match self {
            Threads::None => None,
            Threads::One(t, span) => (t == tid).then_some(span),
            Threads::Many(v) => v
                .binary_search_by_key(tid, |&(t, _)| t)
                .ok()
                .map(|i| &mut v[i].1),
        }
    }

    /// Set `tid`'s span; the one it replaces, if any.
    pub fn insert(&mut self, tid: u32, span: ThreadSpan) -> Option<ThreadSpan> {
        match self.get_mut(&tid) {
            Some(old) => Some(std::mem::replace(old, span)),
            None => {
                self.add(tid, span);
                None
            }
        }
    }

    /// `tid`'s span, set to `span` if it had none.
    pub fn or_insert(&mut self, tid: u32, span: ThreadSpan) -> &mut ThreadSpan {
        if self.get(&tid).is_none() {
            self.add(tid, span);
        }
        self.get_mut(&tid).expect("just added")
    }

    /// Adds a tid not yet present.
    fn add(&mut self, tid: u32, span: ThreadSpan) {
        match std::mem::take(self) {
            Threads::None => *self = Threads::One(tid, span),
            Threads::One(t, s) => {
                let mut v = vec![(t, s), (tid, span)];
                v.sort_unstable_by_key(|&(t, _)| t);
                *self = Threads::Many(v);
            }
            Threads::Many(mut v) => {
                let i = v.partition_point(|&(t, _)| t < tid);
                if v.len() < 4 {
                    v.reserve_exact(1);
                }
                v.insert(i, (tid, span));
                *self = Threads::Many(v);
            }
        }
    }

    /// Every tid, ascending.
    pub fn tids(&self) -> impl Iterator<Item = u32> + '_ {
        let (one, many) = match self {
            Threads::None => (None, &[][..]),
            Threads::One(t, _) => (Some(*t), &[][..]),
            Threads::Many(v) => (None, &v[..]),
        };
        one.into_iter().chain(many.iter().map(|&(t, _)| t))
    }

    pub fn len(&self) -> usize {
        match self {
            Threads::None => 0,
            Threads::One(..) => 1,
            Threads::Many(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The process's end: its group-dead exit.
#[derive(Debug, Clone)]
pub struct End {
    pub seq: u64,
    pub t: u64,
    /// The last thread to exit.
    pub tid: u32,
    pub exit_code: i32,
    pub status: ExitStatus,
}

/// A thread exit that did not end the process.
#[derive(Debug, Clone)]
pub struct ThreadExit {
    pub seq: u64,
    pub t: u64,
    pub tid: u32,
    pub status: ExitStatus,
}

/// The rarely present parts of a [`Process`].
#[derive(Debug, Clone, Default)]
pub struct Rare {
    /// Thread exits that did not end the process.
    pub thread_exits: Vec<ThreadExit>,
    /// Indices into `Model::signals` of signals aimed at this process.
    pub signals_in: Vec<usize>,
    /// The end of what it wrote to stderr (`last_words` record). Boxed:
    /// a process signalled is not one that wrote to stderr.
    pub last_words: Option<Box<crate::eventlog::LastWords>>,
    /// Where it was when a fatal crash-class signal reached it
    /// (`crash_stack` record).
    pub crash_stack: Option<Box<crate::eventlog::CrashStack>>,
    /// Still alive when the command exited (`leak` record).
    pub leak: Option<Box<crate::eventlog::Leak>>,
    /// Each thread's names over time, as the kernel reported them on the
    /// records it is named in (a libtest thread is named after its test):
    /// one entry per change, at most [`MAX_THREAD_NAMES`] a process.
    pub thread_names: Vec<ThreadName>,
    /// Name changes past the cap, not kept.
    pub thread_names_left_out: u32,
}

/// Most name changes kept for one process: a libtest binary names a thread
/// per test (a big crate runs thousands), and a process that renames its
/// threads in a loop must not grow the model without end.
pub const MAX_THREAD_NAMES: usize = 16_384;

/// Thread `tid` was named `name` from `t` on (the first record that showed
/// it; until its next entry).
#[derive(Debug, Clone)]
pub struct ThreadName {
    pub tid: u32,
    pub t: u64,
    pub name: Arc<str>,
}

#[derive(Debug, Clone)]
pub struct Process {
    pub key: ProcKey,
    /// The process of the thread that forked this one (not the reaper after
    /// reparenting: "born of" is what a reader needs).
    pub parent: Option<ProcKey>,
    /// Child processes (never threads), in fork order.
    pub children: Vec<ProcKey>,
    pub fork: Option<ForkInfo>,
    /// Every exec, in order: a process may exec several times.
    pub execs: Execs,
    /// The last `comm` the kernel reported for any of its threads (shared,
    /// like an exec's argv).
    pub comm: Option<Arc<str>>,
    pub threads: Threads,
    pub end: Option<End>,
    /// A fork (as either end), exec or exit record was written for it: the
    /// kernel side was tracking it, not merely naming it as a signal end.
    pub lifecycle_seen: bool,
    /// Part of the traced run (the root and its descendants).
    pub in_run: bool,
    /// The last time it demonstrably ran code of its own: forked, exec'd,
    /// created a thread, made a kill call or sent a signal (0 if never).
    pub last_active: u64,
    /// What few processes have (thread exits, signals aimed at them, last
    /// words, a leak): boxed together, absent for most (a fork storm's model
    /// holds a million processes). Read through the accessors below.
    rare: Option<Box<Rare>>,
    /// Its pid inside its own pid namespace, when that is below the log's.
    pub ns: Option<crate::eventlog::NsPid>,
}

impl Process {
    /// Alive at `t`: started, and not yet ended.
    pub fn alive_at(&self, t: u64) -> bool {
        self.key.start <= t && self.end.as_ref().is_none_or(|e| e.t >= t)
    }

    pub fn new(key: ProcKey) -> Self {
        Process {
            key,
            parent: None,
            children: Vec::new(),
            fork: None,
            execs: Execs::None,
            comm: None,
            threads: Threads::default(),
            end: None,
            lifecycle_seen: false,
            in_run: false,
            rare: None,
            ns: None,
            last_active: 0,
        }
    }

    /// Thread exits that did not end the process, in log order.
    pub fn thread_exits(&self) -> &[ThreadExit] {
        self.rare.as_ref().map_or(&[], |r| &r.thread_exits)
    }

    /// Indices into `Model::signals` of signals aimed at this process.
    pub fn signals_in(&self) -> &[usize] {
        self.rare.as_ref().map_or(&[], |r| &r.signals_in)
    }

    /// The end of what it wrote to stderr (`last_words` record).
    pub fn last_words(&self) -> Option<&crate::eventlog::LastWords> {
        self.rare.as_ref()?.last_words.as_deref()
    }

    /// Where it crashed (`crash_stack` record).
    pub fn crash_stack(&self) -> Option<&crate::eventlog::CrashStack> {
        self.rare.as_ref()?.crash_stack.as_deref()
    }

    /// Still alive when the command exited (`leak` record).
    pub fn leak(&self) -> Option<&crate::eventlog::Leak> {
        self.rare.as_ref()?.leak.as_deref()
    }

    /// Each thread's names over time (see [`Rare::thread_names`]).
    pub fn thread_names(&self) -> &[ThreadName] {
        self.rare.as_ref().map_or(&[], |r| &r.thread_names)
    }

    /// The rare parts, made on first use.
    pub fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Default::default)
    }

    /// The exec in force at time `t` (the last one at or before it).
    pub fn exec_at(&self, t: u64) -> Option<&ExecInfo> {
        self.execs.iter().rev().find(|e| e.t <= t)
    }

    pub fn last_exec(&self) -> Option<&ExecInfo> {
        self.execs.last()
    }

    /// Start time (CLOCK_BOOTTIME ns): the identity's own start.
    pub fn start_t(&self) -> u64 {
        self.key.start
    }

    /// Lifetime in ns, when the end was observed.
    pub fn lifetime_ns(&self) -> Option<u64> {
        self.end
            .as_ref()
            .map(|e| e.t.saturating_sub(self.start_t()))
    }
}
