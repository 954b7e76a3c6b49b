//! Test windows from runners' reports (`test_window` records, read by
//! [`super::report_file`]) onto the processes that ran them:
//!
//! - `go-json`: the package's test binary, `go test`'s `<last element of
//!   the import path>.test` (`gotest.test` for `tracer.test/suites/gotest`),
//!   each process that exec'd it;
//! - `junit`: the topmost process whose argv names the report file
//!   (`pytest --junitxml=report.xml`): the runner that wrote it.
//!
//! A window is widened by its uncertainty at both ends, so two tests run
//! one after the other are "one of" around their boundary, never a guess.
//! What a process spawned runs its test by the spawner rule of
//! [`super::Labels::at`]. Exact and argv/env labels win (`Labels::direct`).
use std::collections::HashMap;

use super::{At, Labels, Runner, Source, Test};
use crate::{eventlog::ProcKey, model::Model};

const NS_PER_MS: u64 = 1_000_000;

/// The last path element: `a/b/c.test` → `c.test`.
fn base(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// Whether an argv element names the report file `path`: it is the path,
/// or ends with it after `=` (`--junitxml=PATH`), or the same file name by
/// another way there (`--junitxml=./out/r.xml` for `out/r.xml`).
fn names_file(arg: &str, path: &str) -> bool {
    let value = arg.rsplit_once('=').map_or(arg, |(_, v)| v);
    let value = value.strip_prefix("./").unwrap_or(value);
    let path = path.strip_prefix("./").unwrap_or(path);
    if value == path || arg == path {
        return true;
    }
    // Relative to another directory: the same name, and one ends the other.
    base(value) == base(path) && (value.ends_with(path) || path.ends_with(value))
}

pub(super) fn collect(m: &Model, l: &mut Labels) {
    if m.test_windows.is_empty() {
        return;
    }
    // The processes each window may name, found in one pass over the model.
    let mut go_bins: HashMap<String, Vec<(ProcKey, u64)>> = HashMap::new();
    for w in m.test_windows.iter().filter(|w| w.format == "go-json") {
        if let Some(pkg) = &w.file {
            go_bins.entry(format!("{}.test", base(pkg))).or_default();
        }
    }
    let mut junit_paths: HashMap<&str, Vec<(ProcKey, u64)>> = m
        .test_windows
        .iter()
        .filter(|w| w.format == "junit")
        .map(|w| (w.path.as_str(), Vec::new()))
        .collect();
    for p in m.procs.values() {
        for e in p.execs.iter() {
            if let Some(v) = go_bins.get_mut(base(&e.filename)) {
                v.push((p.key, e.t));
            }
            for (path, v) in junit_paths.iter_mut() {
                if e.argv.iter().skip(1).any(|a| names_file(a, path)) {
                    v.push((p.key, e.t));
                }
            }
        }
    }
    // The topmost: a runner's workers may be handed the same argument.
    for v in junit_paths.values_mut() {
        let all: Vec<ProcKey> = v.iter().map(|(k, _)| *k).collect();
        v.retain(|(k, _)| {
            let parent = m.proc(*k).and_then(|p| p.parent);
            !parent.is_some_and(|pp| all.contains(&pp))
        });
    }
    for w in &m.test_windows {
        let (runner, procs) = match w.format.as_str() {
            "go-json" => {
                let bin = w.file.as_deref().map(|pkg| format!("{}.test", base(pkg)));
                (Runner::Go, bin.and_then(|b| go_bins.get(&b)))
            }
            "junit" => (Runner::Junit, junit_paths.get(w.path.as_str())),
            _ => continue,
        };
        let Some(procs) = procs else {
            continue;
        };
        let slack = u64::from(w.uncertainty_ms) * NS_PER_MS;
        let test = Test {
            runner,
            worker: None,
            file: w.file.clone(),
            name: w.name.clone(),
            name_truncated: false,
            phase: None,
            source: Source::Approximate,
            uncertainty_ms: Some(w.uncertainty_ms),
        };
        for &(key, exec_t) in procs {
            let Some(p) = m.proc(key) else { continue };
            let end = p.end.as_ref().map(|e| e.t);
            // Unknown start: from the exec (the process's whole life as
            // this program); unknown end: to the process's end.
            let from = w
                .from
                .map_or(exec_t, |f| f.saturating_sub(slack).max(exec_t));
            let until = match (w.until, end) {
                (Some(u), Some(e)) => Some(u.saturating_add(slack).min(e)),
                (Some(u), None) => Some(u.saturating_add(slack)),
                (None, e) => e,
            };
            if until.is_some_and(|u| u < from) {
                continue;
            }
            l.add(At::Approx(key), from, until, test.clone());
        }
    }
}
