//! Bad input to `tracer report`: corrupt, truncated, empty, binary and
//! future-version logs get a clear one-line error or a flagged partial
//! report, never a panic.
use std::{fs, path::Path};

use crate::common::{no_panic, report_cmd};

fn fixture_header() -> String {
    let text = fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_segv.ndjson"),
    )
    .unwrap();
    text.lines().next().unwrap().to_string()
}

fn fixture_lines() -> Vec<String> {
    fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_segv.ndjson"),
    )
    .unwrap()
    .lines()
    .map(String::from)
    .collect()
}

enum Expect {
    /// Non-zero exit, one line on stderr naming the problem.
    Error(&'static str),
    /// Exit 0, a report flagged truncated.
    Truncated,
}

fn check_bad_log(name: &str, bytes: &[u8], expect: Expect) {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join(format!("{name}.ndjson"));
    fs::write(&log, bytes).unwrap();
    let out_dir = tmp.path().join("out");
    let out = report_cmd(&log, &out_dir);
    let stderr = no_panic(&out);
    match expect {
        Expect::Error(word) => {
            assert_ne!(out.status.code(), Some(0), "{name}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{name}: one line: {stderr}");
            assert!(
                stderr.starts_with("tracer: error:") && stderr.contains(word),
                "{name}: {stderr}"
            );
        }
        Expect::Truncated => {
            assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
            assert!(stderr.contains("warning"), "{name}: {stderr}");
            let md = fs::read_to_string(out_dir.join("report.md")).unwrap();
            assert!(md.contains("truncated"), "{name}: {md}");
        }
    }
}

#[test]
fn broken_logs_get_a_clear_error_or_a_flagged_report() {
    let lines = fixture_lines();
    let events: Vec<&String> = lines.iter().take(lines.len() - 1).collect();
    let join = |ls: &[&String]| ls.iter().map(|l| format!("{l}\n")).collect::<String>();

    check_bad_log("empty", b"", Expect::Error("empty"));
    check_bad_log("blank", b"\n\n  \n", Expect::Error("empty"));
    let mut binary: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    binary[0] = 0x7f;
    check_bad_log("binary", &binary, Expect::Error("not a tracer event log"));
    let mut corrupt = join(&events[..3]);
    corrupt.push_str("{\"type\":\"exit\",\"seq\":GARBAGE}\n");
    corrupt.push_str(&join(&events[3..]));
    check_bad_log("corrupt", corrupt.as_bytes(), Expect::Error(":4:"));
    let future = fixture_header().replacen("\"schema\":1", "\"schema\":999", 1);
    assert!(future.contains("999"));
    check_bad_log(
        "future",
        format!("{future}\n").as_bytes(),
        Expect::Error("newer"),
    );
    check_bad_log(
        "no-header",
        join(&events[1..]).as_bytes(),
        Expect::Error("header"),
    );
    // Cut mid-line, as a SIGKILL between write(2)s can leave it.
    let full = join(&events);
    let cut = &full[..full.len() - 40];
    check_bad_log("truncated", cut.as_bytes(), Expect::Truncated);
    check_bad_log(
        "header-only",
        format!("{}\n", fixture_header()).as_bytes(),
        Expect::Truncated,
    );
    // An event of an unknown type in the middle (a last line that does not parse
    // is taken for a cut and dropped: that case is "truncated" above).
    let mut unknown = join(&events[..2]);
    unknown.push_str("{\"type\":\"teleport\",\"seq\":2}\n");
    unknown.push_str(&join(&events[2..]));
    check_bad_log(
        "unknown-type",
        unknown.as_bytes(),
        Expect::Error("not a tracer event log"),
    );
    // A directory, and a path that does not exist.
    let tmp = tempfile::tempdir().unwrap();
    for (name, path) in [
        ("directory", tmp.path().to_path_buf()),
        ("missing", tmp.path().join("nope.ndjson")),
    ] {
        let out = report_cmd(&path, &tmp.path().join("out"));
        let stderr = no_panic(&out);
        assert_ne!(out.status.code(), Some(0), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
    }
}

// ---------------------------------------------------------------------------
// privileges and hooks

/// Round 3, finding 5: one line over the reader's 64 MiB limit (a snapshot
/// of 48 processes sharing a 1.5 MB argv, as older tracers wrote it) lost
/// every report of the run. It is skipped and counted; the rest is read.
#[test]
fn a_line_over_the_limit_is_skipped_and_counted() {
    let lines = fixture_lines();
    let max = tracer_user::eventlog::MAX_LINE_BYTES;
    let huge = format!(
        "{{\"type\":\"snapshot\",\"seq\":2,\"reason\":\"timeout\",\"pad\":\"{}\"}}",
        "x".repeat(max + 10)
    );
    let mut log = String::with_capacity(max + (1 << 20));
    for (i, l) in lines.iter().enumerate() {
        log.push_str(l);
        log.push('\n');
        if i == 1 {
            log.push_str(&huge);
            log.push('\n');
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("events.ndjson");
    fs::write(&path, &log).unwrap();
    let clean = tmp.path().join("clean.ndjson");
    fs::write(
        &clean,
        lines.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let out = report_cmd(&path, &tmp.path().join("out"));
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let rep: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(tmp.path().join("out/report.json")).unwrap())
            .unwrap();
    assert_eq!(rep["log"]["lines_skipped"], 1);
    assert_eq!(rep["log"]["complete"], false);
    let md = fs::read_to_string(tmp.path().join("out/report.md")).unwrap();
    assert!(
        md.contains("1 line over the 64 MiB line limit skipped"),
        "{md}"
    );
    assert!(
        stderr.contains("1 line over the 64 MiB line limit skipped"),
        "{stderr}"
    );
    // Everything else is read: the same deaths as without the line.
    let out = report_cmd(&clean, &tmp.path().join("clean-out"));
    assert_eq!(out.status.code(), Some(0));
    let want: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(tmp.path().join("clean-out/report.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rep["certificates"], want["certificates"]);
    assert!(!want["certificates"].as_array().unwrap().is_empty());

    // Before any header, nothing says the file is a log at all.
    fs::write(&path, format!("{huge}\n{}\n", lines.join("\n"))).unwrap();
    let out = report_cmd(&path, &tmp.path().join("out2"));
    let stderr = no_panic(&out);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("before any header"), "{stderr}");
}
