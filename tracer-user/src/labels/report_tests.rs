//! `--test-report` files: real reports captured from the runner suites
//! (tests/fixtures/go_test.json: `go test -json` on suites/go;
//! tests/fixtures/junit_pytest.xml: pytest 9 `--junitxml` on
//! suites/pytest), and hostile ones.
use std::path::{Path, PathBuf};

use super::report_file::{self, Format, Spec, MAX_BYTES};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn wall(s: &str) -> i128 {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .unwrap()
        .unix_timestamp_nanos()
}

#[test]
fn go_json_windows_run_to_pass_or_fail() {
    let bytes = report_file::read_file(&fixture("go_test.json"), None).unwrap();
    let got = report_file::parse(Format::GoJson, &bytes).unwrap();
    assert_eq!(got.len(), 2, "{got:?}");
    let sib = got
        .iter()
        .find(|r| r.name == "TestSiblingOwnsAHelper")
        .unwrap();
    assert_eq!(sib.file.as_deref(), Some("tracer.test/suites/gotest"));
    assert_eq!(sib.from, Some(wall("2026-12-02T00:03:19.692035999Z")));
    // Its `fail`, after the pause and both `cont`s.
    assert_eq!(sib.until, Some(wall("2026-12-02T00:03:19.713614165Z")));
    let clean = got
        .iter()
        .find(|r| r.name == "TestCleanupKillsStrayHelpers")
        .unwrap();
    assert_eq!(clean.until, Some(wall("2026-12-02T00:03:19.713560885Z")));
}

#[test]
fn junit_cases_share_their_suites_window() {
    let bytes = report_file::read_file(&fixture("junit_pytest.xml"), None).unwrap();
    let got = report_file::parse(Format::Junit, &bytes).unwrap();
    let names: Vec<_> = got
        .iter()
        .map(|r| (r.file.as_deref(), r.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            (Some("test_cleanup"), "test_cleanup_kills_stray_workers"),
            (Some("test_sibling"), "test_sibling_holds_its_worker")
        ]
    );
    let from = wall("2026-12-02T00:03:55.874012+00:00");
    for r in &got {
        // When in the suite each ran is not in the file: the whole suite.
        assert_eq!(r.from, Some(from));
        assert_eq!(r.until, Some(from + 4_610_000_000));
        assert_eq!(r.resolution_ms, 1);
    }
}

#[test]
fn junit_without_a_timestamp_or_offset_has_no_start() {
    for suite in [
        r#"<testsuite name="x" time="1.5">"#,
        r#"<testsuite name="x" time="1.5" timestamp="2026-12-02T00:03:55">"#,
    ] {
        let xml = format!(r#"{suite}<testcase name="a" time="0.1"/></testsuite>"#);
        let got = report_file::parse(Format::Junit, xml.as_bytes()).unwrap();
        assert_eq!((got[0].from, got[0].until), (None, None), "{xml}");
    }
}

#[test]
fn windows_on_the_log_clock_with_their_uncertainty() {
    let bytes = std::fs::read(fixture("go_test.json")).unwrap();
    let got = report_file::parse(Format::GoJson, &bytes).unwrap();
    let spec: Spec = "go-json:out/go.json".parse().unwrap();
    let off: i64 = 1_764_000_000_000_000_000;
    let started = wall("2026-12-02T00:03:19Z");
    let w = report_file::to_windows(&spec, &got, off, Some(started));
    assert_eq!(w[0].name, "TestSiblingOwnsAHelper");
    assert_eq!(
        w[0].from.map(|t| i128::from(t) + i128::from(off)),
        Some(wall("2026-12-02T00:03:19.692035999Z"))
    );
    // 10 ms base, 0 for test2json's ns digits, 0.36 ms of drift in
    // 0.71 s, rounded up.
    assert_eq!(w[0].uncertainty_ms, 11);
    // An hour later, the wall clock may have slewed 1.8 s.
    let w = report_file::to_windows(&spec, &got, off, Some(started - 3_600_000_000_000));
    assert_eq!(w[0].uncertainty_ms, 10 + 1800 + 1);
}

#[test]
fn specs() {
    let s: Spec = "junit:a:b.xml".parse().unwrap();
    assert_eq!(
        (s.format, s.path),
        (Format::Junit, PathBuf::from("a:b.xml"))
    );
    assert!("xml:a".parse::<Spec>().is_err());
    assert!("go-json:".parse::<Spec>().is_err());
    assert!("report.json".parse::<Spec>().is_err());
}

#[test]
fn hostile_xml_is_refused() {
    let deep = format!(
        "<testsuites>{}{}</testsuites>",
        "<a>".repeat(100),
        "</a>".repeat(100)
    );
    let laughs = r#"<?xml version="1.0"?><!DOCTYPE t [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><testsuite><testcase name="&b;"/></testsuite>"#;
    for (bad, why) in [
        (deep.as_str(), "nested"),
        (laughs, "DOCTYPE"),
        ("<testsuite><testcase name='a'></testsuite>", "XML error"),
        ("<html/>", "not JUnit"),
        ("<testsuite/><testsuite/>", "more than one root"),
        (
            "<testsuite><testcase time='1'/></testsuite>",
            "without a name",
        ),
        ("\u{0}\u{1}garbage", "no XML element"),
        ("", "no XML element"),
        ("<testsuite>", "ends inside"),
    ] {
        let err = report_file::parse(Format::Junit, bad.as_bytes()).unwrap_err();
        assert!(err.contains(why), "{bad:?}: {err}");
    }
}

#[test]
fn hostile_go_json_is_refused() {
    for (bad, why) in [
        ("{\"Action\":\"run\"\n", "line 1"),
        ("# tracer.test/x\n{\"Action\":\"run\"}\n", "line 1"),
        (
            "{\"Time\":\"yesterday\",\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T\"}",
            "bad Time",
        ),
        ("\u{ff}", "not a test2json event"),
    ] {
        let err = report_file::parse(Format::GoJson, bad.as_bytes()).unwrap_err();
        assert!(err.contains(why), "{bad:?}: {err}");
    }
    assert!(report_file::parse(Format::GoJson, &[0xff, 0xfe]).is_err());
}

#[test]
fn too_many_tests_are_refused() {
    let mut s = String::new();
    for i in 0..=report_file::MAX_TESTS {
        s.push_str(&format!(
            "{{\"Action\":\"run\",\"Package\":\"p\",\"Test\":\"T{i}\"}}\n"
        ));
    }
    let err = report_file::parse(Format::GoJson, s.as_bytes()).unwrap_err();
    assert!(err.contains("tests"), "{err}");
}

#[test]
fn files_are_read_safely() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    std::fs::copy(fixture("go_test.json"), &real).unwrap();
    // A link the job planted (to a file root may read) is not followed.
    let link = dir.path().join("link.json");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let err = report_file::read_file(&link, None).unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    // Over the limit: refused before reading (a sparse file costs nothing).
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(MAX_BYTES + 1)
        .unwrap();
    let err = report_file::read_file(&huge, None).unwrap_err();
    assert!(err.contains("limit"), "{err}");
    // A FIFO would block a reader for ever: not a regular file.
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let err = report_file::read_file(&fifo, None).unwrap_err();
    assert!(err.contains("regular"), "{err}");
    assert!(report_file::read_file(dir.path(), None).is_err());
    // A refused file brings no windows (and one warning line).
    let spec: Spec = format!("go-json:{}", link.display()).parse().unwrap();
    assert!(report_file::load(&spec, 0, "2026-12-02T00:03:19Z", None).is_empty());
    let spec: Spec = format!("go-json:{}", real.display()).parse().unwrap();
    assert_eq!(
        report_file::load(&spec, 0, "2026-12-02T00:03:19Z", None).len(),
        2
    );
}
