//! Where the labels come from: what the kernel shows of each runner with
//! no change to the project (docs/report.md, "Which test").
//!
//! - libtest (`cargo test`): every test runs on a thread named after it;
//!   the kernel keeps 15 bytes of the name (`comm`), completed from the
//!   binary's `--exact NAME` or from a panic line (`thread 'NAME'`) in
//!   what the process wrote last to stderr.
//! - cargo-nextest (and any libtest binary run `--exact NAME`): one process
//!   per test, named by its argv, or by `NEXTEST_TEST_NAME` at exec.
//! - pytest: `PYTEST_CURRENT_TEST` (and xdist's `PYTEST_XDIST_WORKER`) in the
//!   environment of every process a test spawns, read at its exec.
//! - vitest, jest: `VITEST_POOL_ID` in a worker's children, `JEST_WORKER_ID`
//!   in a jest worker: the worker's name.
use crate::{
    eventlog::ProcKey,
    model::{Model, Process},
};

use super::{At, Labels, Phase, Runner, Source, Test};

/// The bytes of a thread name the kernel keeps (`TASK_COMM_LEN` - 1).
const COMM_BYTES: usize = 15;

pub(super) fn collect(m: &Model, l: &mut Labels) {
    for p in m.procs.values() {
        libtest(m, p, l);
        environment(m, p, l);
    }
}

/// A worker id as a name may carry it: digits, or xdist's `gw` and digits.
fn worker_id(v: &str) -> Option<&str> {
    let ok = !v.is_empty() && v.len() <= 16 && v.bytes().all(|b| b.is_ascii_alphanumeric());
    ok.then_some(v)
}

/// The runners' variables each exec of `p` had (`test_env`).
fn environment(m: &Model, p: &Process, l: &mut Labels) {
    let parent_env = |name: &str| -> Option<&str> {
        let parent = m.proc(p.parent?)?;
        let fork_t = p.fork.as_ref()?.t;
        parent
            .exec_at(fork_t)?
            .test_env()
            .get(name)
            .map(String::as_str)
    };
    for (i, e) in p.execs.iter().enumerate() {
        let env = e.test_env();
        if env.is_empty() {
            continue;
        }
        let until = exec_until(p, i);
        let xdist = env
            .get("PYTEST_XDIST_WORKER")
            .and_then(|w| worker_id(w))
            .map(|w| format!("xdist {w}"));
        // Set in the test's own process (os.environ): in the environment of
        // what it spawns, so this process is the test's helper.
        if let Some(current) = env.get("PYTEST_CURRENT_TEST") {
            // "<nodeid> (<phase>)", as pytest sets it.
            let (nodeid, phase) = match current.rsplit_once(" (") {
                Some((id, ph)) => (id, ph.strip_suffix(')').and_then(Phase::parse)),
                None => (current.as_str(), None),
            };
            l.add(
                At::Helper(p.key),
                e.t,
                until,
                Test {
                    runner: Runner::Pytest,
                    worker: xdist.clone(),
                    file: nodeid.split_once("::").map(|(f, _)| f.to_string()),
                    name: nodeid.to_string(),
                    name_truncated: false,
                    phase,
                    source: Source::ArgvEnv,
                    uncertainty_ms: None,
                },
            );
        }
        if let Some(name) = env.get("NEXTEST_TEST_NAME") {
            let binary = env.get("NEXTEST_BINARY_ID").cloned();
            let test = Test {
                runner: Runner::Nextest,
                worker: None,
                file: binary.clone(),
                name: name.clone(),
                name_truncated: false,
                phase: None,
                source: Source::ArgvEnv,
                uncertainty_ms: None,
            };
            // The test's own process is the first with the variable; what
            // it spawns inherits it, and is its helper.
            if parent_env("NEXTEST_TEST_NAME") == Some(name.as_str()) {
                l.add(At::Helper(p.key), e.t, until, test);
            } else {
                if let Some(b) = &binary {
                    l.set_worker(p.key, format!("nextest: {b}::{name}"));
                }
                l.add(At::Proc(p.key), e.t, until, test);
            }
        }
        // vitest sets its ids inside the worker once it runs: a process
        // that has them at exec is a worker's child, and names its parent.
        if let Some(id) = env.get("VITEST_POOL_ID").and_then(|v| worker_id(v)) {
            if parent_env("VITEST_POOL_ID").is_none() {
                if let Some(parent) = p.parent {
                    l.set_worker(parent, format!("vitest worker {id}"));
                }
            }
        }
        // jest hands its id to the worker's fork: the topmost process that
        // has it is the worker (its children inherit it).
        if let Some(id) = env.get("JEST_WORKER_ID").and_then(|v| worker_id(v)) {
            if parent_env("JEST_WORKER_ID") != Some(id) {
                l.set_worker(p.key, format!("jest worker {id}"));
            }
        }
        if let Some(w) = xdist.filter(|_| parent_env("PYTEST_XDIST_WORKER").is_none()) {
            l.set_worker(p.key, w);
        }
    }
}

/// A libtest binary: cargo names it `<crate>-<16 hex digits>` in
/// `target/*/deps` (the hash is cargo's metadata); its stem is the crate
/// (or integration test) name.
fn test_binary(filename: &str, argv: &[String]) -> Option<String> {
    let path = if filename.is_empty() {
        argv.first()?.as_str()
    } else {
        filename
    };
    let base = path.rsplit('/').next()?;
    let (stem, hash) = base.rsplit_once('-')?;
    let ok = hash.len() == 16
        && hash.bytes().all(|b| b.is_ascii_hexdigit())
        && !stem.is_empty()
        && stem.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    ok.then(|| stem.to_string())
}

/// `--exact NAME`: the one test a libtest binary was told to run.
pub(super) fn exact_arg(argv: &[String]) -> Option<&str> {
    let i = argv.iter().position(|a| a == "--exact")?;
    // libtest takes the filter as a free argument anywhere: a re-run names
    // it after `--exact`, nextest just before (`NAME --exact --nocapture`).
    // A flag's own value (`--skip X`) is no filter.
    const VALUED: [&str; 6] = [
        "--skip",
        "--test-threads",
        "--format",
        "--logfile",
        "--color",
        "-Z",
    ];
    let free =
        |j: usize| !argv[j].starts_with('-') && (j == 0 || !VALUED.contains(&argv[j - 1].as_str()));
    (i + 1..argv.len())
        .find(|&j| free(j))
        .or_else(|| (1..i).rev().find(|&j| free(j)))
        .map(|j| argv[j].as_str())
}

/// A libtest test name: a Rust path (`module::test_name`), which is never
/// what a runtime names its own threads (`tokio-runtime-w`, `V8 Worker`).
fn test_like(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
        && !name.starts_with(':')
}

/// Run by cargo-nextest: an ancestor's argv or name says so.
fn under_nextest(m: &Model, key: ProcKey) -> bool {
    m.ancestors(key).into_iter().any(|a| {
        m.proc(a).is_some_and(|p| {
            p.comm.as_deref().is_some_and(|c| c.contains("nextest"))
                || p.execs.iter().any(|e| {
                    e.argv.iter().take(3).any(|a| {
                        a.rsplit('/').next().is_some_and(|b| b.contains("nextest"))
                            || a == "nextest"
                    })
                })
        })
    })
}

/// When the image of `p`'s exec `i` ended: at the next exec, else at the
/// process's end (open while it lives).
fn exec_until(p: &Process, i: usize) -> Option<u64> {
    p.execs
        .get(i + 1)
        .map(|n| n.t)
        .or(p.end.as_ref().map(|x| x.t))
}

fn libtest(m: &Model, p: &Process, l: &mut Labels) {
    for (i, e) in p.execs.iter().enumerate() {
        let Some(stem) = test_binary(&e.filename, &e.argv) else {
            continue;
        };
        let until = exec_until(p, i);
        let nextest = under_nextest(m, p.key);
        let runner = if nextest {
            Runner::Nextest
        } else {
            Runner::CargoTest
        };
        let exact = exact_arg(&e.argv).filter(|n| test_like(n));
        // nextest's own variables name it better (its binary id): the
        // environment source takes it (`environment`).
        let by_env = e.test_env().contains_key("NEXTEST_TEST_NAME");
        if let Some(name) = exact.filter(|_| !by_env) {
            l.add(
                At::Proc(p.key),
                e.t,
                until,
                Test {
                    runner,
                    worker: None,
                    file: Some(stem.clone()),
                    name: name.to_string(),
                    name_truncated: false,
                    phase: None,
                    source: Source::ArgvEnv,
                    uncertainty_ms: None,
                },
            );
            if nextest {
                l.set_worker(p.key, format!("nextest: {stem}::{name}"));
            }
        }
        thread_tests(p, e.t, until, &stem, runner, exact, l);
    }
}

/// The test threads of a libtest process during one exec (`from`..`until`).
fn thread_tests(
    p: &Process,
    from: u64,
    until: Option<u64>,
    stem: &str,
    runner: Runner,
    exact: Option<&str>,
    l: &mut Labels,
) {
    let names = p.thread_names();
    let main_names: Vec<&str> = names
        .iter()
        .filter(|n| n.tid == p.key.pid)
        .map(|n| &*n.name)
        .chain(p.comm.as_deref().filter(|_| names.is_empty()))
        .collect();
    for (i, n) in names.iter().enumerate() {
        // The main thread is the harness (named after the binary), and a
        // name it also had is the harness's, not a test's.
        if n.tid == p.key.pid || main_names.contains(&&*n.name) || !test_like(&n.name) {
            continue;
        }
        if n.t < from || until.is_some_and(|u| n.t > u) {
            continue;
        }
        let span = p.threads.get(&n.tid);
        let earlier = names[..i].iter().any(|o| o.tid == n.tid);
        // A libtest thread is named as it starts: its first name holds from
        // its creation; a later one from when it was seen.
        let start = match (earlier, span) {
            (false, Some(s)) => s.from.max(from),
            _ => n.t,
        };
        let end = names[i + 1..]
            .iter()
            .find(|o| o.tid == n.tid)
            .map(|o| o.t)
            .or(span.and_then(|s| s.until))
            .or(until);
        let (name, cut) = complete(&n.name, exact, p);
        l.add(
            At::Thread(p.key, n.tid),
            start,
            end,
            Test {
                runner,
                worker: None,
                file: Some(stem.to_string()),
                name,
                name_truncated: cut,
                phase: None,
                source: Source::ArgvEnv,
                uncertainty_ms: None,
            },
        );
    }
}

/// A thread name cut at the kernel's 15 bytes, completed from the binary's
/// `--exact NAME` or a panic line (`thread 'NAME' panicked`, with or without
/// the tid Rust 1.89+ adds) in the process's last words, when exactly one
/// name fits; else kept cut (and said so).
fn complete(comm: &str, exact: Option<&str>, p: &Process) -> (String, bool) {
    if comm.len() < COMM_BYTES {
        return (comm.to_string(), false);
    }
    if let Some(full) = exact.filter(|e| e.starts_with(comm)) {
        return (full.to_string(), false);
    }
    let mut fits: Vec<&str> = Vec::new();
    if let Some(words) = p.last_words() {
        let mut rest = words.text.as_str();
        while let Some(i) = rest.find("thread '") {
            rest = &rest[i + "thread '".len()..];
            let Some(end) = rest.find('\'') else { break };
            let name = &rest[..end];
            if name.starts_with(comm) && test_like(name) && !fits.contains(&name) {
                fits.push(name);
            }
            rest = &rest[end..];
        }
    }
    match fits.as_slice() {
        [one] => (one.to_string(), false),
        _ => (comm.to_string(), true),
    }
}
