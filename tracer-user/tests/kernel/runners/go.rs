//! go test (Debian's golang-go 1.19), two t.Parallel tests in one binary.
use tracer_user::analysis::{LinkEvidence, Relation};

use super::*;
use crate::common::root;
use crate::common::suites::{require, Suite};

#[test]
fn parallel_siblings_helper_killed() {
    require("go", "Debian's golang-go, installed by cargo xtask test");
    let argv = ["go", "test", "-json", "-count=1", "."];
    let (suite, r) = run("go test", || Suite::in_place("go"), &[], &argv);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "helper.pid", Relation::Parent);
    let test_process = cert_of(&rep, suite.pid("killer.pid"));
    expected_kill_then_own_failure(&rep, dead, test_process);
    // The runner passes the test binary's failure on.
    let runner = cert_of(&rep, root(&r).pid);
    follows(
        &rep,
        runner,
        test_process,
        test_process,
        LinkEvidence::Window,
    );
}

/// `go test -json > FILE` under `record --test-report go-json:FILE`: the
/// report's windows are written into the log, and the two t.Parallel
/// tests, both running in the test binary when its test killed the
/// sibling's helper, are what both ends ran: "one of" the two, approximate
/// with its uncertainty, never one of them guessed. `tracer report`
/// re-renders the same from the log alone.
#[test]
fn go_json_report_names_both_ends_approximately() {
    require("go", "Debian's golang-go, installed by cargo xtask test");
    let suite = Suite::in_place("go");
    let file = suite.dir.path().join("go.json");
    let spec = format!("go-json:{}", file.display());
    let script = r#"exec go test -json -count=1 . > "$SUITE_DIR/go.json""#;
    let (r, _) = suite.record(&["--test-report", &spec], &["sh", "-c", script]);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = report(&r);
    let dead = killed_by_the_cleanup_test(&rep, &suite, "helper.pid", Relation::Parent);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let c = json["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["victim"]["pid"] == dead.victim.process.pid)
        .expect("the helper's certificate");
    let names = |t: &serde_json::Value| -> Vec<String> {
        let mut v: Vec<String> = t["one_of"]
            .as_array()
            .unwrap_or_else(|| panic!("one_of: {t:#}"))
            .iter()
            .map(|x| x["name"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    let both = ["TestCleanupKillsStrayHelpers", "TestSiblingOwnsAHelper"];
    for end in [&c["victim"]["test"], &c["killer"]["test"]] {
        assert_eq!(names(end), both, "{c:#}");
        assert_eq!(end["source"], "approximate", "{c:#}");
        assert_eq!(end["runner"], "go", "{c:#}");
        let n = end["uncertainty_ms"].as_u64().unwrap_or(0);
        assert!((10..1000).contains(&n), "uncertainty {n} ms: {c:#}");
    }
    assert_eq!(c["victim"]["test"]["via"], "spawned", "{c:#}");
    assert_eq!(c["killer"]["test"]["via"], "own", "{c:#}");
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(md.contains("approximate (runner report, ±"), "{md}");
    // The log alone re-renders it: the windows are records in it.
    let log = std::fs::read_to_string(r.path("events.ndjson")).unwrap();
    assert!(
        log.contains(r#""type":"test_window""#),
        "no test_window record"
    );
}
