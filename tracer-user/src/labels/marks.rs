//! Test marks: what an in-process integration (`--tests`, or the one line
//! a project adds) declares as a test begins and ends, written to
//! `tracer_common::MARK_FD` (docs/event-log.md, "Test marks"). The writer's
//! process, thread and time are the kernel's, so a mark labels only the
//! thread that wrote it, in program order with its own kill and fork calls;
//! what it says is the test's word (`source: exact`, shown as declared by
//! the test).
//!
//! The payload: `tracer-test-mark/1 ` and a JSON object, `ev` (`begin` or
//! `end`), `runner` (`vitest`, `jest`, `pytest`, `node:test`,
//! `mocha`, `playwright`), `worker` (the runner's
//! worker id), `file`, `name`, `phase`. Anything else is ignored.
use std::collections::HashMap;

use serde::{de::DeserializeOwned, Deserialize};

use super::{At, Labels, Phase, Runner, Source, Test};
use crate::{eventlog::ProcKey, model::Model};

/// How a mark's text begins: a write to the mark fd that is not a mark
/// (a program's stray write there) labels nothing.
pub const PREFIX: &str = "tracer-test-mark/1 ";

/// A mark's payload as `P`: `None` for a write that is not a mark (no
/// [`PREFIX`]) or whose JSON is not a `P`.
pub(super) fn payload<P: DeserializeOwned>(text: &str) -> Option<P> {
    let json = text.strip_prefix(PREFIX)?;
    serde_json::from_str(json.trim_end()).ok()
}

#[derive(Deserialize)]
struct Payload {
    ev: String,
    runner: String,
    #[serde(default)]
    worker: Option<String>,
    #[serde(default)]
    file: Option<String>,
    name: String,
    #[serde(default)]
    phase: Option<String>,
}

fn runner(s: &str) -> Option<Runner> {
    Some(match s {
        "vitest" => Runner::Vitest,
        "jest" => Runner::Jest,
        "pytest" => Runner::Pytest,
        "node:test" => Runner::NodeTest,
        "mocha" => Runner::Mocha,
        "playwright" => Runner::Playwright,
        _ => return None,
    })
}

/// The worker as the runner calls it, from an id that is only an id.
fn worker_name(runner: Runner, id: &str) -> Option<String> {
    let ok = !id.is_empty() && id.len() <= 16 && id.bytes().all(|b| b.is_ascii_alphanumeric());
    if !ok {
        return None;
    }
    Some(match runner {
        Runner::Vitest => format!("vitest worker {id}"),
        Runner::Jest => format!("jest worker {id}"),
        Runner::Pytest => format!("xdist {id}"),
        Runner::Mocha => format!("mocha worker {id}"),
        Runner::Playwright => format!("playwright worker {id}"),
        _ => return None,
    })
}

/// Every mark of the run into thread windows: a `begin` opens one on the
/// writer's thread, the `end` of the same test closes it; a test never
/// ended is open until its thread ends. Two begun at once on one thread
/// (`test.concurrent`) are both open: "one of".
pub(super) fn collect(m: &Model, l: &mut Labels) {
    // Open windows: (process, thread, test) -> begin time.
    let mut open: HashMap<(ProcKey, u32, Test), u64> = HashMap::new();
    for mk in &m.marks {
        let Some(p) = payload::<Payload>(&mk.text) else {
            continue;
        };
        let Some(runner) = runner(&p.runner) else {
            continue;
        };
        let worker = p.worker.as_deref().and_then(|w| worker_name(runner, w));
        if let Some(w) = &worker {
            l.set_worker(mk.key, w.clone());
        }
        let test = Test {
            runner,
            worker,
            file: p.file,
            name: p.name,
            name_truncated: false,
            phase: p.phase.as_deref().and_then(Phase::parse),
            source: Source::Exact,
            uncertainty_ms: None,
        };
        match p.ev.as_str() {
            "begin" => {
                open.entry((mk.key, mk.tid, test)).or_insert(mk.t);
            }
            "end" => {
                if let Some(from) = open.remove(&(mk.key, mk.tid, test.clone())) {
                    l.add(At::Thread(mk.key, mk.tid), from, Some(mk.t), test);
                }
            }
            _ => {}
        }
    }
    let mut rest: Vec<_> = open.into_iter().collect();
    rest.sort_by_key(|((k, tid, _), from)| (*k, *tid, *from));
    for ((key, tid, test), from) in rest {
        let until = m.proc(key).and_then(|p| {
            p.threads
                .get(&tid)
                .and_then(|s| s.until)
                .or(p.end.as_ref().map(|e| e.t))
        });
        l.add(At::Thread(key, tid), from, until, test);
    }
}
