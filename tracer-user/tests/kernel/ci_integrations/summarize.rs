//! `tracer summarize` over several CI runs: a flaky-death dashboard's input.
use std::process::Command;

use super::both;
use crate::common::*;

/// A flaky-death dashboard's input: the same scenario in three CI runs,
/// each a test that signals a pid written into it (above pid_max here, so
/// it can only fail: ESRCH, whoever runs it). `tracer summarize` keeps the
/// literal pid and flags it, and lists each run with the CI context that
/// `record` read from the CI's environment into the log header.
#[test]
fn summarize_flags_a_hard_coded_pid_across_ci_runs() {
    require_root();
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = (max + 4242).to_string();
    let tmp = tempfile::tempdir().unwrap();
    for attempt in 1..=3 {
        let dir = tmp.path().join(format!("run-{attempt}"));
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .args(["record", "--output"])
            .arg(&dir)
            .args(["--", "sh", "-c", "kill -TERM \"$0\" 2>/dev/null; exit 0"])
            .arg(&pid)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_SERVER_URL", "https://github.example")
            .env("GITHUB_REPOSITORY", "team/app")
            .env("GITHUB_RUN_ID", "7001")
            .env("GITHUB_RUN_ATTEMPT", attempt.to_string())
            .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
            .env("GITHUB_REF_NAME", "main")
            .env("GITHUB_HEAD_REF", "")
            .env("GITHUB_JOB", "test")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
    }
    let summarize = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .args(["summarize", "--format", format])
            .arg(tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&summarize("json")).unwrap();
    let miss = v["near_misses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["errno"] == "ESRCH")
        .unwrap_or_else(|| panic!("no ESRCH near miss: {v:#}"));
    assert_eq!(miss["call_shape"], "kill(<pid>)");
    assert_eq!(
        miss["repeated_targets"],
        serde_json::json!([{ "call": format!("kill({pid})"), "runs": 3, "of": 3 }])
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for (i, r) in runs.iter().enumerate() {
        let ci = &r["ci"];
        assert_eq!(ci["commit"], "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(ci["branch"], "main");
        assert_eq!(ci["job"], "test");
        assert_eq!(ci["attempt"], (i + 1).to_string());
        assert_eq!(
            ci["run_url"],
            format!(
                "https://github.example/team/app/actions/runs/7001/attempts/{}",
                i + 1
            )
        );
        // A date to the second, not the log's nanoseconds.
        let at = r["started_at"].as_str().unwrap();
        assert!(at.len() == 20 && at.ends_with('Z'), "{at}");
    }
    let md = summarize("md");
    assert!(
        md.contains(&format!("kill({pid}) in 3/3 runs: a hard-coded pid?")),
        "{md}"
    );
    assert!(
        md.contains("[run-1](https://github.example/team/app/actions/runs/7001/attempts/1)"),
        "{md}"
    );
}
