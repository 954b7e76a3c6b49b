//! The resource samples of real captures, rendered offline: a 96 MiB
//! v1 memcg leak killed by the OOM killer (real_resources_leak) and a
//! python3 under a tenth of a CPU that timed out (real_resources_throttled).
use tracer_user::report::{render_json, render_markdown};

use crate::common::{fixture_report, no_panic, report_cmd};

#[test]
fn an_oom_certificate_shows_the_growth() {
    let r = fixture_report("real_resources_leak");
    let c = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.oom.is_some())
        .expect("the OOM kill");
    let g = c.oom.as_ref().unwrap().memory.as_ref().expect("growth");
    assert_eq!(g.limit_bytes, Some(96 << 20));
    assert!(g.from_bytes < 1 << 20 && g.to_bytes > 90 << 20, "{g:?}");
    let l = g.largest.as_ref().unwrap();
    assert_eq!((l.pid, l.comm.as_str()), (c.victim.process.pid, "python3"));
    let md = render_markdown(&r);
    let row = md
        .lines()
        .find(|l| l.starts_with("| memory before the kill |"))
        .unwrap();
    assert!(
        row.starts_with(
            "| memory before the kill | 252 KiB → 95.3 MiB in the last 6 s (limit 96 MiB)"
        ),
        "{row}"
    );
    assert!(md.contains("## Resources"));
    let res = r.resources.as_ref().unwrap();
    assert_eq!(res.memory_cgroup.as_deref(), Some("v1:/manual-5002"));
    assert_eq!(res.processes[0].comm, "python3");
    assert!(res.series.len() >= 6);
    // The verdict is the one it was: the curve is in the certificate.
    assert!(!r.verdict.contains("→"), "{}", r.verdict);

    let html = tracer_user::report::html::render(&r, &html_context("real_resources_leak", &r));
    assert!(html.contains("<svg id=\"resources-svg\""));
    assert_eq!(
        html.matches("class=\"oomkill\"").count(),
        1,
        "the kill marked"
    );
    assert!(html.contains("class=\"limit\""), "the limit drawn");
    assert!(html.contains("<polyline class=\"mem proc\""));
}

#[test]
fn a_throttled_timeout_says_so() {
    let r = fixture_report("real_resources_throttled");
    assert!(
        r.verdict
            .starts_with("Timed out, CPU-throttled in 97% of its last minute; "),
        "{}",
        r.verdict
    );
    let m = r.snapshots[0].last_minute.as_ref().unwrap();
    assert_eq!(m.throttled_periods_pct, Some(97));
    assert_eq!(m.quota_pct, Some(10));
    let md = render_markdown(&r);
    assert!(md.contains("throttled in 97% of its CPU periods"), "{md}");
    let json = render_json(&r);
    assert!(json.contains("\"throttled_periods_pct\": 97"), "{json}");
}

/// `tracer report` re-renders a log with samples byte for byte.
#[test]
fn the_reports_render_again_byte_for_byte() {
    let log = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real_resources_leak.ndjson");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for out in [&a, &b] {
        let o = report_cmd(&log, out.path());
        no_panic(&o);
    }
    for f in ["report.json", "report.md", "report.html"] {
        let x = std::fs::read(a.path().join(f)).unwrap();
        assert_eq!(x, std::fs::read(b.path().join(f)).unwrap(), "{f}");
    }
}

fn html_context(name: &str, r: &tracer_user::report::Report) -> tracer_user::report::html::Context {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.ndjson"));
    let log = tracer_user::eventlog::read_log(&path).unwrap();
    tracer_user::report::html::Context::from_log(&log, r)
}

/// real_resources_leak with a pytest integration's marks added for its
/// python3 (`test_small`, then `test_leaks`, open when it was killed):
/// each test's growth of the worker's RSS, and the kill names the test.
#[test]
fn each_test_grows_its_worker_by_so_much() {
    let r = fixture_report("real_resources_tests");
    let tests = &r.resources.as_ref().unwrap().tests;
    let names: Vec<&str> = tests.iter().map(|t| t.test.as_str()).collect();
    assert_eq!(
        names,
        ["test_leaks in xdist gw0", "test_small in xdist gw0"],
        "the one that grew most first"
    );
    let (leaks, small) = (&tests[0], &tests[1]);
    assert!(leaks.grew_bytes > 60 << 20, "{leaks:?}");
    assert!(leaks.rss.peak_bytes > 90 << 20, "{leaks:?}");
    assert_eq!(
        small.rss.start_bytes, small.rss.peak_bytes,
        "one sample: {small:?}"
    );
    let g = r.analysis.certificates[0]
        .oom
        .as_ref()
        .unwrap()
        .memory
        .as_ref()
        .unwrap();
    assert_eq!(
        g.largest.as_ref().unwrap().test.as_deref(),
        Some("test_leaks in xdist gw0")
    );
    let md = render_markdown(&r);
    assert!(md.contains(", running `test_leaks in xdist gw0`"), "{md}");
    assert!(
        md.contains("| `test_leaks in xdist gw0` | pid 29284 | "),
        "{md}"
    );
    let html = tracer_user::report::html::render(&r, &html_context("real_resources_tests", &r));
    assert_eq!(html.matches("<rect class=\"testwin\"").count(), 2);
}
