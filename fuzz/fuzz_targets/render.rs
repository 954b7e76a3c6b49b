//! Hostile strings in the run-controlled fields of real logs (argv, comm,
//! exe paths, fds, stderr, host facts): the reports must keep the output
//! invariants (`tracer_user::text::invariants`): one verdict line, no
//! control bytes, balanced code spans, closed fences, whole table rows, no
//! CI workflow command, one <script>. The input is split at 0xFF bytes
//! into the strings used, in turn, for each distinct original string.
//! tracer-user/tests/offline/output_fuzz.rs checks the same property with a seeded
//! generator on every fixture, in the ordinary test suite.
#![no_main]

use std::{cell::RefCell, collections::HashMap, path::PathBuf};

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use tracer_user::{eventlog::read_log, report, text::invariants};

const LOGS: [&str; 3] = [
    include_str!("../../tracer-user/tests/fixtures/seed000_group_kill.ndjson"),
    include_str!("../../tracer-user/tests/fixtures/real_last_words.ndjson"),
    include_str!("../../tracer-user/tests/fixtures/real_leak_kill.ndjson"),
];

thread_local! {
    static PATH: RefCell<PathBuf> = RefCell::new(
        std::env::temp_dir().join(format!("tracer-fuzz-render-{}.ndjson", std::process::id())),
    );
}

fn hostile_key(parent: &str, key: &str) -> bool {
    matches!(
        key,
        "argv" | "command" | "filename" | "comm" | "text" | "exe" | "fds" | "hostname" | "kernel"
    ) || (parent == "memcg" && matches!(key, "name" | "path"))
}

fn mutate(v: &mut Value, parent: &str, sub: &mut dyn FnMut(&str) -> String) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                match x {
                    Value::String(s) if hostile_key(parent, k) => *s = sub(s),
                    Value::Array(a) if hostile_key(parent, k) => {
                        for e in a.iter_mut() {
                            if let Value::String(s) = e {
                                *s = sub(s);
                            }
                        }
                    }
                    _ => mutate(x, k, sub),
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mutate(x, parent, sub)),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, data)) = data.split_first() else {
        return;
    };
    let pieces: Vec<String> = data
        .split(|&b| b == 0xFF)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let mut map: HashMap<String, String> = HashMap::new();
    let mut next = 0;
    let mut sub = |s: &str| {
        map.entry(s.to_string())
            .or_insert_with(|| {
                next += 1;
                format!("{}z{next}", pieces[next % pieces.len()])
            })
            .clone()
    };
    let mut out = String::new();
    for line in LOGS[pick as usize % LOGS.len()].lines() {
        let mut v: Value = serde_json::from_str(line).expect("fixture line");
        mutate(&mut v, "", &mut sub);
        out.push_str(&serde_json::to_string(&v).unwrap());
        out.push('\n');
    }
    PATH.with(|p| {
        let path = p.borrow();
        std::fs::write(&*path, &out).expect("write the log");
        let log = read_log(&path).expect("a fixture with other strings still reads");
        let r = report::build_report(&log, &report::ReportOptions::default());
        let md = report::render_markdown(&r);
        let v = invariants::report_md(&md);
        assert!(v.is_empty(), "report.md: {v:?}\n{md}");
        let html = report::html::render(&r, &report::html::Context::from_log(&log, &r));
        let v = invariants::html(&html);
        assert!(v.is_empty(), "report.html: {v:?}");
        let s = report::summary(&r, "o/report.md".as_ref(), "o/report.json".as_ref());
        let v = invariants::terminal(&s);
        assert!(v.is_empty(), "summary: {v:?}\n{s}");
    });
});
