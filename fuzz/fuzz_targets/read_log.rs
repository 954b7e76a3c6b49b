//! Arbitrary bytes as `events.ndjson`: `read_log` must return a log or an
//! error, never panic; a log it accepts must render both reports.
#![no_main]

use std::{cell::RefCell, path::PathBuf};

use libfuzzer_sys::fuzz_target;
use tracer_user::{eventlog::read_log, report};

thread_local! {
    // One file per fuzzing process, rewritten for every input (read_log takes a path).
    static PATH: RefCell<PathBuf> = RefCell::new(
        std::env::temp_dir().join(format!("tracer-fuzz-{}.ndjson", std::process::id())),
    );
}

fuzz_target!(|data: &[u8]| {
    PATH.with(|p| {
        let path = p.borrow();
        std::fs::write(&*path, data).expect("write the input");
        if let Ok(log) = read_log(&path) {
            // The analysis is a pure function of the log: any log the reader
            // accepts must go through the model, analysis and both renderers.
            let r = report::build_report(&log, &report::ReportOptions::default());
            let _ = report::render_json(&r);
            let _ = report::render_markdown(&r);
        }
    });
});
