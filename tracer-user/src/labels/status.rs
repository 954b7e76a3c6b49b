//! What the test integrations said of themselves, and which runners ran
//! without one: report.json's `run.test_integrations`, report.md's "Test
//! names" line (docs/report.md, "Which test").
//!
//! Each integration writes one `status` mark per process it loads in: the
//! runner's version and the way it took into the runner (`seam`: a setup
//! file, a hook, an entry point), or why it names no test there (`why`: a
//! pool it cannot reach, a runner it does not cover, an export of a shape
//! it does not know). A runner or version tracer cannot label is then one
//! plain line, never a silent nothing. And when `--tests` injected the
//! integrations, a runner's main process (pytest, vitest, jest, by argv)
//! with no status mark in it or under it ran without them: the job's own
//! `PYTHONPATH` or `NODE_OPTIONS` replaced tracer's, or it turned pytest's
//! plugin autoload off — its suite ran as it would without tracer, and the
//! report says so.
use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::marks::payload;
use crate::{eventlog::ProcKey, model::Model};

/// Most lines kept: every text is the job's (a mark's payload), so the
/// report stays bounded whatever it writes.
const MAX_LINES: usize = 32;
/// Most processes listed per line (the rest counted).
const MAX_PIDS: usize = 20;
/// Longest text kept of a field.
const MAX_TEXT: usize = 200;
/// Processes remembered per line, so one is counted once however many
/// marks it writes or looks see it (a daemon's window shows a live
/// process's mark again at every look); past this a process seen again may
/// be counted twice in `pids_left_out`.
const MAX_COUNTED: usize = 4096;
/// How far up from a process with a status mark a runner's main process is
/// looked for (vitest → forks worker; jest → jest-worker child).
const MAX_UP: usize = 16;

/// Why a runner's main process had no status mark under `--tests`.
pub const NOT_LOADED: &str = "the integration did not load in it: the job replaced \
     tracer's PYTHONPATH or NODE_OPTIONS with its own, or turned pytest's plugin \
     autoload off (its suite ran as without --tests)";

/// One line: the processes where one runner's integration took one way,
/// or named no test for one reason.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TestIntegration {
    /// The runner, as the integration or the argv names it (`vitest`,
    /// `jest`, `pytest`).
    pub runner: String,
    /// The runner's version, as the integration read it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The way the integration took into the runner (`setupFiles`,
    /// `__vitest_required__`, `jest-circus/runner (function)`, `pytest11
    /// entry point`): test names are available there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seam: Option<String>,
    /// Why no test is named there: test names are not available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// The runner's worker ids it said this in (vitest's `2`, xdist's
    /// `gw0`), at most 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<String>,
    /// The processes, at most 20.
    pub pids: Vec<u32>,
    /// Processes past `pids`, counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pids_left_out: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl TestIntegration {
    /// The line in words: "vitest 4.1.12: test names through
    /// `__vitest_required__` (workers 1, 2; pids 10, 11)", or "…: test
    /// names not available: why (…)". `code` escapes a value for the format.
    pub fn phrase(&self, code: impl Fn(&str) -> String, text: impl Fn(&str) -> String) -> String {
        let who = match &self.version {
            Some(v) => format!("{} {}", text(&self.runner), text(v)),
            None => text(&self.runner),
        };
        let what = match (&self.seam, &self.why) {
            (_, Some(why)) => format!("test names not available: {}", text(why)),
            (Some(seam), None) => format!("test names through {}", code(seam)),
            (None, None) => "test names".to_string(),
        };
        let mut place: Vec<String> = Vec::new();
        if !self.workers.is_empty() {
            place.push(text(&format!("workers {}", self.workers.join(", "))));
        }
        let pids: Vec<String> = self.pids.iter().map(u32::to_string).collect();
        let more = match self.pids_left_out {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        place.push(format!(
            "pid{} {}{more}",
            if self.pids.len() + self.pids_left_out > 1 {
                "s"
            } else {
                ""
            },
            pids.join(", ")
        ));
        format!("{who}: {what} ({})", place.join("; "))
    }
}

#[derive(Deserialize)]
struct Payload {
    ev: String,
    runner: String,
    #[serde(default)]
    worker: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    seam: Option<String>,
    #[serde(default)]
    why: Option<String>,
}

fn bounded(s: Option<String>) -> Option<String> {
    s.map(|s| crate::text::one_line(&s.chars().take(MAX_TEXT).collect::<String>()))
        .filter(|s| !s.is_empty())
}

type Key = (String, Option<String>, Option<String>, Option<String>);

/// Status lines gathered from one model or several: a daemon's looks each
/// see part of the run (live/ledger.rs), the same mark again while its
/// process lives; a process is listed once per line.
#[derive(Clone, Debug, Default)]
pub struct Lines {
    lines: BTreeMap<Key, TestIntegration>,
    counted: HashMap<Key, HashSet<ProcKey>>,
}

impl Lines {
    /// The status marks of `m`; the processes that wrote them.
    pub fn marks(&mut self, m: &Model) -> HashSet<ProcKey> {
        let mut marked: HashSet<ProcKey> = HashSet::new();
        for mk in &m.marks {
            let Some(p) = payload::<Payload>(&mk.text) else {
                continue;
            };
            if p.ev != "status" {
                continue;
            }
            marked.insert(mk.key);
            let runner = bounded(Some(p.runner)).unwrap_or_default();
            let key = (runner, bounded(p.version), bounded(p.seam), bounded(p.why));
            let worker = p.worker.filter(|w| {
                !w.is_empty() && w.len() <= 16 && w.bytes().all(|b| b.is_ascii_alphanumeric())
            });
            self.add(key, mk.key, worker);
        }
        marked
    }

    /// Process `p` in the line `key`, listed or counted once.
    fn add(&mut self, key: Key, p: ProcKey, worker: Option<String>) {
        let lines = &mut self.lines;
        if !lines.contains_key(&key) && lines.len() >= MAX_LINES {
            return;
        }
        let l = lines.entry(key.clone()).or_insert_with(|| TestIntegration {
            runner: key.0.clone(),
            version: key.1.clone(),
            seam: key.2.clone(),
            why: key.3.clone(),
            workers: Vec::new(),
            pids: Vec::new(),
            pids_left_out: 0,
        });
        if let Some(w) = worker {
            if !l.workers.contains(&w) && l.workers.len() < MAX_PIDS {
                l.workers.push(w);
            }
        }
        let counted = self.counted.entry(key).or_default();
        if counted.contains(&p) {
            return;
        }
        if counted.len() < MAX_COUNTED {
            counted.insert(p);
        }
        if l.pids.len() < MAX_PIDS {
            l.pids.push(p.pid);
        } else {
            l.pids_left_out += 1;
        }
    }

    /// The lines, those without test names first: what a reader must act on.
    pub fn finish(self) -> Vec<TestIntegration> {
        let mut out: Vec<TestIntegration> = self.lines.into_values().collect();
        out.sort_by_key(|l| l.why.is_none());
        out
    }
}

/// Every status line of the run; `injected`: `--tests` handed the command
/// the integrations (the log header's `env_changes`), so a runner without
/// a status mark ran without them.
pub fn collect(m: &Model, injected: bool) -> Vec<TestIntegration> {
    let mut all = Lines::default();
    let marked = all.marks(m);
    if injected {
        let covered = ancestors_of(m, &marked);
        for (key, p) in &m.procs {
            if !p.in_run || covered.contains(key) {
                continue;
            }
            let Some(runner) = p.last_exec().and_then(|e| runner_of(&e.argv)) else {
                continue;
            };
            let line = (runner.to_string(), None, None, Some(NOT_LOADED.to_string()));
            all.add(line, *key, None);
        }
    }
    all.finish()
}

/// Every process with a status mark and its ancestors (a vitest worker's
/// mark covers the vitest process above it).
fn ancestors_of(m: &Model, marked: &HashSet<ProcKey>) -> HashSet<ProcKey> {
    let mut out = HashSet::new();
    for &k in marked {
        let mut cur = Some(k);
        for _ in 0..MAX_UP {
            let Some(c) = cur else { break };
            if !out.insert(c) {
                break;
            }
            cur = m.proc(c).and_then(|p| p.parent);
        }
    }
    out
}

/// The runner whose main process `argv` runs: `python -m pytest`,
/// `pytest`, `node …/vitest.mjs`, `vitest`, `node …/jest.js`, `jest`,
/// `node --test` (its flags before the first file or script), `mocha`,
/// `node …/bin/mocha.js`, `playwright test`, `node …/cli.js test` of
/// Playwright. Workers
/// (`…/workers/forks.js`, jest-worker's child, an xdist worker's `python
/// -c`, the process `node --test` runs a file in) are none: their runner's
/// main process is.
pub fn runner_of(argv: &[String]) -> Option<&'static str> {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    if argv.first().is_some_and(|a| base(a).starts_with("node")) {
        let flags = argv[1..].iter().take_while(|a| a.starts_with('-'));
        if flags.take(64).any(|a| a == "--test") {
            return Some("node:test");
        }
    }
    for (i, a) in argv.iter().take(3).enumerate() {
        let b = base(a);
        let runner = match b.as_str() {
            "pytest" | "py.test" => "pytest",
            "vitest" | "vitest.mjs" => "vitest",
            "jest" => "jest",
            "jest.js" if a.ends_with("/bin/jest.js") => "jest",
            "mocha" | "_mocha" => "mocha",
            "mocha.js" if a.ends_with("/bin/mocha.js") => "mocha",
            "playwright" if argv.get(i + 1).is_some_and(|t| t == "test") => "playwright",
            "cli.js"
                if (a.ends_with("/@playwright/test/cli.js")
                    || a.ends_with("/playwright/cli.js"))
                    && argv.get(i + 1).is_some_and(|t| t == "test") =>
            {
                "playwright"
            }
            _ => {
                if a == "-m" && argv.get(i + 1).is_some_and(|m| m == "pytest") {
                    return Some("pytest");
                }
                continue;
            }
        };
        return Some(runner);
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::eventlog::{read_log, EventLog, Record, TestMark};

    /// real_resources_tests.ndjson (a pytest-xdist worker's test marks and
    /// memory samples) with the marks `edit` makes, each from a copy of its
    /// first test mark, put before that mark: as an integration's status
    /// mark is written when it loads, before any test.
    pub(crate) fn log_with_marks(
        edits: impl IntoIterator<Item = impl FnOnce(&mut TestMark)>,
    ) -> EventLog {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/real_resources_tests.ndjson");
        let mut log = read_log(&path).unwrap();
        let at = log
            .events
            .iter()
            .position(|r| matches!(r, Record::TestMark(_)))
            .expect("a test mark");
        let Record::TestMark(first) = log.events[at].clone() else {
            unreachable!()
        };
        for edit in edits {
            let mut m = first.clone();
            edit(&mut m);
            log.events.insert(at, Record::TestMark(m));
        }
        log
    }

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn runners_main_processes_by_argv() {
        let cases: [(&[&str], Option<&str>); 20] = [
            (&["python3", "-m", "pytest", "-q"], Some("pytest")),
            (&["/venv/bin/pytest", "-n", "2"], Some("pytest")),
            (
                &["node", "/x/node_modules/vitest/vitest.mjs", "run"],
                Some("vitest"),
            ),
            (&["/x/node_modules/.bin/vitest", "run"], Some("vitest")),
            (&["node", "/x/node_modules/jest/bin/jest.js"], Some("jest")),
            (
                &["node", "/x/node_modules/vitest/dist/workers/forks.js"],
                None,
            ),
            (
                &[
                    "python",
                    "-c",
                    "import sys;exec(eval(sys.stdin.readline()))",
                ],
                None,
            ),
            (&["sh", "-c", "PYTHONPATH=src python3 -m pytest"], None),
            (&["node", "/x/src/jest.js"], None),
            (&["node", "--test"], Some("node:test")),
            (
                &[
                    "/usr/bin/node",
                    "--test-concurrency=2",
                    "--test",
                    "a.test.js",
                ],
                Some("node:test"),
            ),
            (&["node", "/x/a.test.js"], None),
            (&["node", "a.js", "--test"], None),
            (&["/x/node_modules/.bin/mocha", "--parallel"], Some("mocha")),
            (
                &["node", "/x/node_modules/mocha/bin/mocha.js"],
                Some("mocha"),
            ),
            (
                &["node", "/x/node_modules/mocha/lib/nodejs/worker.js"],
                None,
            ),
            (&["npx", "playwright", "test"], Some("playwright")),
            (
                &["node", "/x/node_modules/@playwright/test/cli.js", "test"],
                Some("playwright"),
            ),
            (
                &["node", "/x/node_modules/.bin/playwright", "install"],
                None,
            ),
            (&["node", "/x/src/cli.js", "test"], None),
        ];
        for (a, want) in cases {
            assert_eq!(runner_of(&argv(a)), want, "{a:?}");
        }
    }

    #[test]
    fn a_line_in_words() {
        let l = TestIntegration {
            runner: "vitest".into(),
            version: Some("4.1.12".into()),
            seam: Some("__vitest_required__".into()),
            why: None,
            workers: vec!["1".into(), "2".into()],
            pids: vec![10, 11],
            pids_left_out: 0,
        };
        let code = |s: &str| format!("`{s}`");
        let text = |s: &str| s.to_string();
        assert_eq!(
            l.phrase(code, text),
            "vitest 4.1.12: test names through `__vitest_required__` (workers 1, 2; pids 10, 11)"
        );
        let none = TestIntegration {
            runner: "pytest".into(),
            version: None,
            seam: None,
            why: Some("why".into()),
            workers: Vec::new(),
            pids: vec![7],
            pids_left_out: 0,
        };
        assert_eq!(
            none.phrase(code, text),
            "pytest: test names not available: why (pid 7)"
        );
    }

    /// A process is counted once per line however often its mark is seen
    /// (a daemon's every look shows a live process's mark again): 25
    /// workers, seen in three looks, are 20 listed and 5 more.
    #[test]
    fn a_process_seen_again_is_counted_once() {
        let log = log_with_marks((0..25u32).map(|i| {
            move |m: &mut TestMark| {
                m.task.pid = 60_000 + i;
                m.task.tid = 60_000 + i;
                m.task.start = 1_000 + u64::from(i);
                m.text = "tracer-test-mark/1 {\"ev\":\"status\",\"runner\":\"jest\",\
                          \"version\":\"30.5.2\",\"seam\":\"s\"}"
                    .into();
            }
        }));
        let m = Model::build(&log);
        let mut lines = Lines::default();
        for _ in 0..3 {
            lines.marks(&m);
        }
        let got = lines.finish();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            (got[0].pids.len(), got[0].pids_left_out),
            (20, 5),
            "{got:?}"
        );
        assert_eq!(got, collect(&m, false));
    }
}
