//! Process labels: which test every process and thread was running, over
//! time ("test windows"), from what the log shows of the test runners —
//! nothing here changes the project under test.
//!
//! A test is found on a process or thread by one of its sources
//! ([`sources`]): a libtest thread named after its test, a process run
//! `--exact NAME` (cargo-nextest, a libtest re-run), and, later, the
//! runners' environment and the marks the in-process integrations write.
//! A process with no test of its own runs its **spawner's**: the test of
//! the thread that forked it at the moment it did (`fork.by_tid`), so a
//! `pkill` or `sh -c` started by a test is that test's helper whatever
//! the process around the thread is (a threads pool, libtest).
//!
//! Built from the model alone ([`Labels::build`]), so a log re-renders its
//! labels byte for byte; the analysis asks [`Labels::at`] for the victim's
//! and the killer's test.
pub mod env;
pub mod marks;
pub mod report_file;
#[cfg(test)]
mod report_tests;
mod reported;
mod sources;
pub mod status;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::{eventlog::ProcKey, model::Model};

/// How far up the spawners a label is looked for: a helper of a helper
/// (`sh -c 'pkill …'` from a test) is two; a deeper chain is still one
/// test's only when every link was a helper, and 16 covers every runner's
/// own nesting seen (npx → sh → node → worker).
const MAX_SPAWN_DEPTH: usize = 16;

/// Which runner ran the test.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Runner {
    /// cargo-nextest: one process per test.
    Nextest,
    /// libtest (`cargo test`): one thread per test, or a binary re-run
    /// `--exact NAME`.
    CargoTest,
    Pytest,
    Vitest,
    Jest,
    /// Node's built-in runner (`node --test`): one process per test file.
    #[serde(rename = "node_test")]
    NodeTest,
    /// mocha: its CLI's process (serial), or its `--parallel` workers.
    Mocha,
    /// Playwright Test (`playwright test`): its worker processes.
    Playwright,
    /// `go test`.
    Go,
    /// Named only by a JUnit report (`--test-report junit:PATH`).
    Junit,
}

impl Runner {
    pub fn as_str(self) -> &'static str {
        match self {
            Runner::Nextest => "nextest",
            Runner::CargoTest => "cargo test",
            Runner::Pytest => "pytest",
            Runner::Vitest => "vitest",
            Runner::Jest => "jest",
            Runner::NodeTest => "node:test",
            Runner::Mocha => "mocha",
            Runner::Playwright => "playwright",
            Runner::Go => "go test",
            Runner::Junit => "JUnit report",
        }
    }

    /// A runner whose full name of a test is `file > name` (vitest, jest,
    /// node:test, mocha, Playwright).
    fn file_then_name(self) -> bool {
        matches!(
            self,
            Runner::Vitest | Runner::Jest | Runner::NodeTest | Runner::Mocha | Runner::Playwright
        )
    }
}

/// Where a label comes from, and so how far to trust it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// Kernel-stamped: a mark the test's own thread wrote, in program order
    /// with its kill and fork calls. Who and when are the kernel's; the
    /// test's name is what the test declared.
    #[serde(rename = "exact")]
    Exact,
    /// What the kernel shows of the runner: a thread name, argv, the
    /// environment at exec. Exact about the process, as fine as the runner
    /// makes it about time (a libtest thread lives for its one test).
    #[serde(rename = "argv/env")]
    ArgvEnv,
    /// A runner's own report (JUnit, `go test -json`), joined by wall time.
    #[serde(rename = "approximate")]
    Approximate,
}

/// The phase of a test (pytest's setup, call, teardown).
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Setup,
    Call,
    Teardown,
}

impl Phase {
    pub fn parse(s: &str) -> Option<Phase> {
        match s {
            "setup" => Some(Phase::Setup),
            "call" => Some(Phase::Call),
            "teardown" => Some(Phase::Teardown),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Call => "call",
            Phase::Teardown => "teardown",
        }
    }
}

/// One test, as its runner names it. Every text is the job's (argv, a
/// thread name, a mark's payload): renderers escape it like argv.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Test {
    /// The runner that ran it.
    pub runner: Runner,
    /// The worker as its runner calls it: `vitest worker 3`, `jest worker
    /// 2`, `xdist gw1`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    /// The test's file or binary (a vitest file, a pytest module, the test
    /// binary of a Rust crate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// The test's name within it (`crate::module::test`, `suite > case`,
    /// a pytest node id).
    pub name: String,
    /// The name the kernel kept was cut (a thread name's 15 bytes) and
    /// nothing completed it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub name_truncated: bool,
    /// Which part of the test: setup, call or teardown (pytest).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Where the label comes from: exact, argv/env, approximate.
    pub source: Source,
    /// An approximate label's uncertainty: either end of its window may be
    /// this many ms off (a runner's report).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncertainty_ms: Option<u32>,
}

impl Test {
    /// The test in words, for a sentence: "`file > name`" and its worker,
    /// or the runner when no worker is named.
    pub fn phrase(&self) -> String {
        let name = self.full_name();
        let cut = if self.name_truncated { "…" } else { "" };
        let after = self.phase_and_place();
        let shown = format!("{}{cut}", self.short_name(&name));
        format!("{}{after}", crate::text::markdown::code(&shown))
    }

    /// What follows the test's name in words: its phase unless the call
    /// (" (setup)"), then its worker (" in vitest worker 3") or its runner
    /// (" (pytest)").
    fn phase_and_place(&self) -> String {
        let phase = self
            .phase
            .filter(|p| *p != Phase::Call)
            .map(|p| format!(" ({})", p.as_str()))
            .unwrap_or_default();
        let place = match &self.worker {
            Some(w) => format!(" in {w}"),
            None => format!(" ({})", self.runner.as_str()),
        };
        format!("{phase}{place}")
    }

    /// `full` (the full name) for a sentence: whole when it is short; else
    /// its path shortened to the file's own name (`…/handler.test.ts >
    /// name`), never the test's own name, which is what tells the test
    /// apart (a mark's name is at most 400 characters).
    fn short_name(&self, full: &str) -> String {
        if full.chars().count() <= crate::text::command::MAX {
            return full.to_string();
        }
        let short = |p: &str| match p.rsplit_once('/') {
            Some((_, last)) => format!("…/{last}"),
            None => p.to_string(),
        };
        match &self.file {
            Some(f) if self.runner.file_then_name() => {
                format!("{} > {}", short(f), self.name)
            }
            Some(f) if self.runner == Runner::Nextest => format!("{}::{}", short(f), self.name),
            // A node id (`tests/unit/test_x.py::TestC::test_y[1]`): its path.
            _ => match full.split_once("::") {
                Some((path, rest)) => format!("{}::{rest}", short(path)),
                None => full.to_string(),
            },
        }
    }
}

impl Test {
    /// The test's full name as its runner prints it: `file > name` (vitest,
    /// jest), `binary::name` (nextest), else the name. Run-independent (no
    /// pid, no worker): what a signature across runs keys on.
    pub fn full_name(&self) -> String {
        match &self.file {
            Some(f) if self.runner.file_then_name() => {
                format!("{f} > {}", self.name)
            }
            Some(f) if self.runner == Runner::Nextest => format!("{f}::{}", self.name),
            _ => self.name.clone(),
        }
    }

    /// Plain text (no markup), for a lane, a JUnit body, an attribute:
    /// "name (phase) in worker" or "name (runner)". Escaped by the caller.
    pub fn plain(&self) -> String {
        let cut = if self.name_truncated { "…" } else { "" };
        let after = self.phase_and_place();
        format!("{}{cut}{after}", self.full_name())
    }
}

/// How a process came to be running the test.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// The process (or the thread that acted) ran the test itself.
    Own,
    /// A helper (`pkill`, `sh -c`, a child the test started): the test
    /// ran in the thread that forked it, or in that one's spawner.
    Spawned,
}

/// The test a process or thread was running at a moment.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct TestAt {
    /// The test; when several were running there at that moment, the first
    /// of `one_of` (never a guess: the report says "one of").
    #[serde(flatten)]
    pub test: Test,
    /// Whether it ran the test itself or is a helper its test spawned.
    pub via: Via,
    /// The process whose thread ran the test, when `via` is `spawned`:
    /// (pid, its start, the thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<SpawnedBy>,
    /// Every test that was running there at that moment, when more than one
    /// was (`test.concurrent`, `t.Parallel`, several libtest threads).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub one_of: Vec<Test>,
}

impl TestAt {
    /// For a sentence: "`a > b` in vitest worker 1", or "one of: `A`, `B`".
    pub fn phrase(&self) -> String {
        if self.one_of.len() > 1 {
            let all: Vec<String> = self.one_of.iter().map(Test::phrase).collect();
            format!("one of: {}", all.join(", "))
        } else {
            self.test.phrase()
        }
    }

    /// Plain text: the test, or "one of: A, B".
    pub fn plain(&self) -> String {
        if self.one_of.len() > 1 {
            let all: Vec<String> = self.one_of.iter().map(Test::plain).collect();
            format!("one of: {}", all.join(", "))
        } else {
            self.test.plain()
        }
    }

    /// The same test(s), whatever the way there.
    pub fn same_tests(&self, other: &TestAt) -> bool {
        if self.one_of.is_empty() && other.one_of.is_empty() {
            self.test == other.test
        } else {
            self.one_of == other.one_of
        }
    }
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpawnedBy {
    /// The spawner's pid.
    pub pid: u32,
    /// The spawner's start (with pid, its identity).
    pub start: u64,
    /// The thread of it that forked.
    pub tid: u32,
}

/// One stretch of time a thread or a process ran one test.
#[derive(Debug, Clone)]
struct Window {
    from: u64,
    /// Open while the thread or process lives on.
    until: Option<u64>,
    test: usize,
    /// The source says the test ran in the spawner, not here (pytest's
    /// variable is in the environment of what a test spawns).
    helper: bool,
}

impl Window {
    fn covers(&self, t: u64) -> bool {
        self.from <= t && self.until.is_none_or(|u| t <= u)
    }
}

/// Where a test window goes.
#[derive(Debug, Clone, Copy)]
enum At {
    /// The whole process (argv, environment).
    Proc(ProcKey),
    /// A process the test spawned: the test ran in the spawner.
    Helper(ProcKey),
    /// One thread of the process (a libtest thread, a mark's writer).
    Thread(ProcKey, u32),
    /// The whole process, from a runner's report (approximate).
    Approx(ProcKey),
}

/// Every test window of a run, by process and by thread.
#[derive(Debug, Default)]
pub struct Labels {
    /// Each distinct test once.
    tests: Vec<Test>,
    index: HashMap<Test, usize>,
    /// Windows of a whole process (argv, environment).
    procs: HashMap<ProcKey, Vec<Window>>,
    /// Windows of one thread (a libtest thread, a mark's writer).
    threads: HashMap<ProcKey, BTreeMap<u32, Vec<Window>>>,
    /// Windows of a whole process from a runner's report: approximate,
    /// consulted only when no exact or argv/env window names a test there.
    approx: HashMap<ProcKey, Vec<Window>>,
    /// Worker names by process (`vitest worker 3`), for lanes and tables.
    workers: HashMap<ProcKey, String>,
}

impl Labels {
    /// The labels of every process of `m`.
    pub fn build(m: &Model) -> Labels {
        let mut l = Labels::default();
        sources::collect(m, &mut l);
        marks::collect(m, &mut l);
        reported::collect(m, &mut l);
        l
    }

    /// No test was found anywhere in the log.
    pub fn is_empty(&self) -> bool {
        self.tests.is_empty() && self.workers.is_empty()
    }

    fn intern(&mut self, test: Test) -> usize {
        if let Some(&i) = self.index.get(&test) {
            return i;
        }
        self.tests.push(test.clone());
        self.index.insert(test, self.tests.len() - 1);
        self.tests.len() - 1
    }

    /// One window, where `at` says it goes.
    fn add(&mut self, at: At, from: u64, until: Option<u64>, test: Test) {
        let window = Window {
            from,
            until,
            test: self.intern(test),
            helper: matches!(at, At::Helper(_)),
        };
        let windows = match at {
            At::Proc(key) | At::Helper(key) => self.procs.entry(key).or_default(),
            At::Thread(key, tid) => self.threads.entry(key).or_default().entry(tid).or_default(),
            At::Approx(key) => self.approx.entry(key).or_default(),
        };
        windows.push(window);
    }

    fn set_worker(&mut self, key: ProcKey, name: String) {
        self.workers.entry(key).or_insert(name);
    }

    /// The worker name of a process, as its runner calls it.
    pub fn worker(&self, key: ProcKey) -> Option<&str> {
        self.workers.get(&key).map(String::as_str)
    }

    /// The worker `key` is, or was spawned from (up its spawners), as its
    /// runner calls it, and whether it is that worker itself.
    pub fn worker_of(&self, m: &Model, key: ProcKey) -> Option<(&str, bool)> {
        if self.workers.is_empty() {
            return None;
        }
        let mut cur = key;
        for depth in 0..MAX_SPAWN_DEPTH {
            if let Some(w) = self.worker(cur) {
                return Some((w, depth == 0));
            }
            cur = m.proc(cur)?.parent?;
            if m.is_tracer(cur) {
                return None;
            }
        }
        None
    }

    /// The tests a process ran itself, each once, in the order first seen
    /// (a lane's labels): `(from, until, test)`.
    pub fn spans(&self, key: ProcKey) -> Vec<(u64, Option<u64>, &Test)> {
        let mut out: Vec<(u64, Option<u64>, &Test)> = Vec::new();
        let own = self
            .procs
            .get(&key)
            .into_iter()
            .chain(self.approx.get(&key))
            .flatten();
        let threads = self
            .threads
            .get(&key)
            .into_iter()
            .flatten()
            .flat_map(|(_, w)| w);
        for w in own.chain(threads) {
            out.push((w.from, w.until, &self.tests[w.test]));
        }
        out.sort_by(|a, b| (a.0, &a.2.name).cmp(&(b.0, &b.2.name)));
        out
    }

    /// The test process `key` was running at `t`: in thread `tid` when one
    /// is named (the thread that sent a kill), else in any of its threads
    /// (a victim dies whole). Failing that, the test of the thread that
    /// spawned it, up the chain of spawners.
    pub fn at(&self, m: &Model, key: ProcKey, tid: Option<u32>, t: u64) -> Option<TestAt> {
        if self.is_empty() {
            return None;
        }
        let (mut key, mut tid, mut t) = (key, tid, t);
        let mut via = Via::Own;
        let mut spawned_by = None;
        for _ in 0..MAX_SPAWN_DEPTH {
            let (found, helper) = self.direct(key, tid, t);
            if helper && via == Via::Own {
                via = Via::Spawned;
                spawned_by = m.proc(key).and_then(|p| {
                    let (parent, fork) = (p.parent?, p.fork.as_ref()?);
                    Some(SpawnedBy {
                        pid: parent.pid,
                        start: parent.start,
                        tid: fork.by_tid,
                    })
                });
            }
            if let Some(first) = found.first() {
                let test = self.tests[*first].clone();
                let one_of = if found.len() > 1 {
                    found.iter().map(|&i| self.tests[i].clone()).collect()
                } else {
                    Vec::new()
                };
                return Some(TestAt {
                    test,
                    via,
                    spawned_by,
                    one_of,
                });
            }
            let p = m.proc(key)?;
            let fork = p.fork.as_ref()?;
            let parent = p.parent?;
            if m.is_tracer(parent) {
                return None;
            }
            // The first spawner up the chain is the one a reader can find.
            spawned_by.get_or_insert(SpawnedBy {
                pid: parent.pid,
                start: parent.start,
                tid: fork.by_tid,
            });
            key = parent;
            tid = Some(fork.by_tid);
            t = fork.t;
            via = Via::Spawned;
        }
        None
    }

    /// The tests running at `t` in thread `tid` of `key` (or any thread),
    /// then the process's own, distinct, sorted by index (first seen); and
    /// whether a helper's window named them.
    fn direct(&self, key: ProcKey, tid: Option<u32>, t: u64) -> (Vec<usize>, bool) {
        let mut found: Vec<usize> = Vec::new();
        let mut helper = false;
        let mut take = |found: &mut Vec<usize>, ws: &Vec<Window>| {
            for w in ws.iter().filter(|w| w.covers(t)) {
                helper |= w.helper;
                if !found.contains(&w.test) {
                    found.push(w.test);
                }
            }
        };
        let threads = self.threads.get(&key);
        match tid {
            Some(tid) => {
                if let Some(ws) = threads.and_then(|t| t.get(&tid)) {
                    take(&mut found, ws);
                }
            }
            None => {
                for ws in threads.into_iter().flat_map(|t| t.values()) {
                    take(&mut found, ws);
                }
            }
        }
        // A thread's own test is finer than its process's: the process's
        // windows only when no thread had one.
        if found.is_empty() {
            if let Some(ws) = self.procs.get(&key) {
                take(&mut found, ws);
            }
        }
        // Exact and argv/env sources win over a runner's report.
        if found.is_empty() {
            if let Some(ws) = self.approx.get(&key) {
                take(&mut found, ws);
            }
        }
        found.sort_unstable();
        (found, helper)
    }
}
