//! `tracer summarize` end to end: the binary on a directory of report.json
//! files rendered from the NDJSON fixtures. Two runs of the seed-000 group
//! kill with different pids must fold into one signature; a broken report is
//! skipped, not fatal.
use std::{path::Path, process::Command};

use tracer_user::{
    eventlog::read_log,
    report::{build_report, render_json, ReportOptions},
};

fn report_json(fixture: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(fixture);
    render_json(&build_report(
        &read_log(&path).unwrap(),
        &ReportOptions::default(),
    ))
}

fn put(dir: &Path, run: &str, json: &str) {
    let d = dir.join(run);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("report.json"), json).unwrap();
}

/// Four runs: the group kill twice (pids and start time differ, as they do
/// between CI runs), an OOM kill, and a report that is not JSON.
fn corpus() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let seed = report_json("seed000_group_kill.ndjson");
    put(dir.path(), "run-1001", &seed);
    let again = seed
        .replace("4242", "5353")
        .replace("4243", "5354")
        .replace("4100", "6100")
        .replace("4141", "7171")
        .replace("2026-08-18T17:27", "2026-08-19T09:00");
    put(dir.path(), "run-1002", &again);
    put(dir.path(), "run-0900", &report_json("oom.ndjson"));
    put(dir.path(), "broken", "{ not json");
    dir
}

fn summarize(dir: &Path, format: &str) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .args(["summarize", "--format", format])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "summarize failed: {out:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_same_group_kill_in_two_runs_is_one_signature() {
    let dir = corpus();
    let (json, stderr) = summarize(dir.path(), "json");
    assert!(
        stderr.contains("skipped") && stderr.contains("broken"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["summarize_schema"], 2);
    assert_eq!(v["runs"].as_array().unwrap().len(), 3);
    assert_eq!(v["skipped"].as_array().unwrap().len(), 1);
    let first = &v["signatures"][0];
    assert_eq!(first["rank"], "unexpected");
    assert_eq!(first["victim_shape"], "node worker.js");
    assert_eq!(first["cause"], "killed_in_run");
    assert_eq!(first["killer_shape"], "node runner-session.test");
    assert_eq!(first["runs"], 2, "{first}");
    assert_eq!(
        first["run_ids"],
        serde_json::json!(["run-1001", "run-1002"])
    );
    assert_eq!(first["first_seen"], "2026-08-18T17:27:00Z");
    assert_eq!(first["last_seen"], "2026-08-19T09:00:00Z");
    assert_eq!(first["calls"], serde_json::json!(["kill(-<pid>, SIGKILL)"]));
    // Unexpected signatures all come before the non-zero exits, then the
    // consequences (the runners' exits after their workers died).
    let ranks: Vec<&str> = v["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["rank"].as_str().unwrap())
        .collect();
    let mut sorted = ranks.clone();
    sorted.sort_by_key(|r| match *r {
        "unexpected" => 0,
        "nonzero_exit" => 1,
        "consequence" => 2,
        _ => 3,
    });
    assert_eq!(ranks, sorted);
    assert!(ranks.contains(&"unexpected") && ranks.contains(&"consequence"));
    // The OOM kill is its own signature, with no killer.
    let oom = v["signatures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["cause"] == "oom")
        .expect("an oom signature");
    assert!(oom.get("killer_shape").is_none());
    // The near miss of both runs folds too.
    let miss = &v["near_misses"][0];
    assert_eq!(miss["call_shape"], "kill(<pid>)");
    assert_eq!(miss["errno"], "ESRCH");
    assert_eq!(miss["sender_shape"], "node runner-session.test");
    assert_eq!(miss["runs"], 2);
}

#[test]
fn markdown_leads_with_the_unexpected_signature_and_is_deterministic() {
    let dir = corpus();
    let (md, _) = summarize(dir.path(), "md");
    assert!(md.starts_with("# Death signatures across 3 runs\n"), "{md}");
    let first_row = md
        .lines()
        .find(|l| l.starts_with("| 1 |"))
        .expect("a first signature row");
    assert!(
        first_row.contains("**unexpected** | 2 | 4 | `node worker.js`"),
        "{first_row}"
    );
    assert!(md.contains("`kill(<pid>)` → ESRCH | `node runner-session.test`"));
    assert_eq!(md, summarize(dir.path(), "md").0, "byte-identical output");
}

#[test]
fn no_report_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .arg("summarize")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no readable report.json"));
}

/// A schema-1 report (every ancestry chain and near-miss sender inline) of
/// the same run as a current one (chains and senders by id in
/// `ancestors`): both shapes fold the same.
fn as_schema_1(json: &str) -> String {
    use serde_json::Value;
    let mut v: Value = serde_json::from_str(json).unwrap();
    let table = v["ancestors"].as_array().unwrap().clone();
    let chain = |id: Option<&Value>| -> Value {
        let mut out = Vec::new();
        let mut next = id.and_then(Value::as_u64);
        while let Some(i) = next {
            let mut e = table[i as usize].clone();
            next = e["parent_id"].as_u64();
            let o = e.as_object_mut().unwrap();
            o.remove("id");
            o.remove("parent_id");
            out.push(e);
        }
        Value::Array(out)
    };
    let inline = |o: &mut Value| {
        let c = chain(o.get("ancestry_id"));
        let o = o.as_object_mut().unwrap();
        o.remove("ancestry_id");
        o.insert("ancestry".into(), c);
    };
    for c in v["certificates"].as_array_mut().unwrap() {
        inline(&mut c["victim"]);
        if c.get("killer").is_some() {
            inline(&mut c["killer"]);
        }
    }
    for l in v["leftovers"].as_array_mut().unwrap() {
        inline(l);
    }
    // Near misses one per call, each naming its sender in place.
    for n in v["near_misses"].as_array_mut().unwrap() {
        let id = n["sender_id"].as_u64().unwrap() as usize;
        let mut sender = table[id].clone();
        let s = sender.as_object_mut().unwrap();
        s.remove("id");
        s.remove("parent_id");
        let o = n.as_object_mut().unwrap();
        assert_eq!(o["count"], 1, "one call each");
        for k in ["sender_id", "count", "last_seq", "last_time"] {
            o.remove(k);
        }
        o.insert("sender".into(), sender);
    }
    let o = v.as_object_mut().unwrap();
    o.remove("ancestors");
    o.insert("report_schema".into(), 1.into());
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn reports_of_schema_1_and_3_fold_alike() {
    let new = report_json("seed000_group_kill.ndjson");
    assert!(new.contains("\"ancestry_id\""), "the fixture cites chains");
    let old = as_schema_1(&new);
    assert!(old.contains("\"ancestry\": [") && !old.contains("ancestors"));
    let fold = |json: &str| {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "run-1001", json);
        let (out, _) = summarize(dir.path(), "json");
        let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v.as_object_mut().unwrap().remove("runs"); // paths differ
        v
    };
    assert_eq!(fold(&old), fold(&new));
}

/// Two runs whose cleanup test pkills another test's sleeper
/// (real_labels_cargo_test.ndjson, the pids moved in the second): one
/// signature, keyed by the killer's test, so a flaky killer test shows up
/// across runs.
#[test]
fn a_signature_is_keyed_by_the_killers_test() {
    let dir = tempfile::tempdir().unwrap();
    let one = report_json("real_labels_cargo_test.ndjson");
    put(dir.path(), "run-1", &one);
    put(
        dir.path(),
        "run-2",
        &one.replace("21548", "31548").replace("21554", "31554"),
    );
    // Another killer test in a third run is another signature.
    put(
        dir.path(),
        "run-3",
        &one.replace("\"tests::cleanup_\"", "\"tests::other_cl\""),
    );
    let (json, _) = summarize(dir.path(), "json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let sigs = v["signatures"].as_array().unwrap();
    let shapes: Vec<(&str, u64)> = sigs
        .iter()
        .filter(|s| s["rank"] == "unexpected")
        .map(|s| {
            (
                s["killer_shape"].as_str().unwrap(),
                s["runs"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shapes,
        [
            ("pkill -KILL -f ^tn-marker-<n>, test tests::cleanup_", 2),
            ("pkill -KILL -f ^tn-marker-<n>, test tests::other_cl", 1)
        ],
        "{json}"
    );
}
