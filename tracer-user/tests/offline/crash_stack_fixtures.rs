//! Crash stacks rendered from the log alone: a real capture of a -O2 -g C
//! program's NULL dereference (`real_crash_stack_segv.ndjson`, recorded on
//! the host kernel; src/parse.c has parse_header's dereference at line 42,
//! load_file's call at 88, main's at 95), and the same log with the
//! process's name edited to `python3` (`crash_stack_python_comm.ndjson`).
use std::path::PathBuf;

use tracer_user::{
    eventlog::{read_log, EventLog, StackCompleteness},
    report::{build_report, html, render_markdown, Report, ReportOptions},
};

fn fixture(name: &str) -> EventLog {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    read_log(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn report(name: &str) -> Report {
    build_report(&fixture(name), &ReportOptions::default())
}

const HEADLINE: &str = "`test_parser` (pid 18397) died of SIGSEGV: address 0x0 not mapped \
     (SEGV_MAPERR) in parse_header (src/parse.c:42) ← load_file (src/parse.c:88) ← main \
     (src/parse.c:95)";

#[test]
fn the_certificate_names_the_fault_the_function_and_its_callers() {
    let r = report("real_crash_stack_segv.ndjson");
    let c = &r.analysis.certificates[0];
    assert_eq!(c.headline, HEADLINE);
    let crash = c.crash.as_ref().expect("the crash stack");
    assert_eq!(crash.completeness, StackCompleteness::Complete);
    assert_eq!(crash.fault_addr, Some(0));
    assert_eq!(crash.machinery, 0);
    assert_eq!(crash.first_user_frame, Some(0));
    assert!(c.evidence.contains(&crash.seq));
    let names: Vec<_> = crash
        .frames
        .iter()
        .filter_map(|f| f.symbol.as_deref())
        .collect();
    assert_eq!(
        names,
        [
            "parse_header",
            "load_file",
            "main",
            "__libc_start_main",
            "_start"
        ]
        .iter()
        .filter(|n| names.contains(n))
        .copied()
        .collect::<Vec<_>>()
    );
    assert!(
        names.starts_with(&["parse_header", "load_file", "main"]),
        "{names:?}"
    );
}

#[test]
fn report_md_html_and_json_carry_the_stack_and_rerender_byte_for_byte() {
    let r = report("real_crash_stack_segv.ndjson");
    let md = render_markdown(&r);
    assert!(md.contains(HEADLINE), "{md}");
    assert!(md.contains("Crash stack (seq"), "{md}");
    assert!(md.contains("#0 parse_header (src/parse.c:42) — "), "{md}");
    assert!(md.contains("#1 load_file (src/parse.c:88) — "), "{md}");
    assert_eq!(md, render_markdown(&report("real_crash_stack_segv.ndjson")));
    let log = fixture("real_crash_stack_segv.ndjson");
    let html = html::render(&r, &html::Context::from_log(&log, &r));
    assert!(html.contains("crash stack"), "html has the stack row");
    assert!(html.contains("#0 parse_header (src/parse.c:42)"));
    let json = serde_json::to_value(&r).unwrap();
    let crash = &json["certificates"][0]["crash"];
    assert_eq!(
        crash["clause"],
        "parse_header (src/parse.c:42) ← load_file (src/parse.c:88) ← main (src/parse.c:95)"
    );
    assert_eq!(crash["completeness"], "complete");
    assert_eq!(crash["frames"][0]["line"], 42);
}

/// An interpreter's native frames are its own machinery: its headline
/// stays the fault's words (its last words, when it has any, lead), the
/// frames stay in the details.
#[test]
fn an_interpreter_keeps_its_headline() {
    let r = report("crash_stack_python_comm.ndjson");
    let c = &r.analysis.certificates[0];
    assert!(
        c.headline
            .ends_with("crashed: SIGSEGV (SEGV_MAPERR) raised by the kernel on a faulting access"),
        "{}",
        c.headline
    );
    assert!(c.crash.is_some());
}
