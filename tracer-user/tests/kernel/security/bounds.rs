//! Hole 8: hostile input must not blow up what tracer writes or reads. A
//! deep process tree once repeated every ancestry chain in full (a 400-deep
//! bash recursion: a 50 MB report.json from a 714 KB log), and `tracer
//! summarize` followed directory symlinks, so a loop planted among the runs'
//! files made it walk until ELOOP and drop every report; it also read a
//! report.json of any size into memory (round 3, finding 11).
use std::{
    path::Path,
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;
use tracer_user::{
    eventlog::read_log,
    report::{build_report, render_json, ReportOptions},
};

use crate::common::*;

/// Each level runs the next as a child bash and then exits 3: a worker
/// with a child that exits non-zero, so every level but the last gets a
/// death certificate whose ancestry is every level above it.
const RECURSE: &str = r#"n=$1; if [ "$n" -gt 0 ]; then bash -c "$0" "$0" $((n - 1)); fi; exit 3"#;

struct Sizes {
    json: u64,
    md: u64,
    html: u64,
    log: u64,
}

fn size(r: &Recorded, file: &str) -> u64 {
    std::fs::metadata(r.path(file))
        .unwrap_or_else(|e| panic!("{file}: {e}; tracer stderr:\n{}", r.stderr()))
        .len()
}

fn recurse(depth: usize) -> (Recorded, Sizes) {
    let d = depth.to_string();
    let r = record(&[], &["bash", "-c", RECURSE, RECURSE, &d]);
    assert_eq!(
        r.code(),
        Some(3),
        "the root's status passes through: {}",
        r.stderr()
    );
    assert_no_loss(&r);
    let s = Sizes {
        json: size(&r, "report.json"),
        md: size(&r, "report.md"),
        html: size(&r, "report.html"),
        log: size(&r, "events.ndjson"),
    };
    (r, s)
}

/// The chain from an `ancestry_id`, followed through `parent_id`.
fn chain_len(rep: &Value, id: &Value) -> usize {
    let table = rep["ancestors"].as_array().expect("ancestors table");
    let mut n = 0;
    let mut next = id.as_u64();
    while let Some(i) = next {
        let e = &table[i as usize];
        assert_eq!(e["id"].as_u64(), Some(i));
        n += 1;
        next = e["parent_id"].as_u64();
        assert!(next.is_none_or(|p| p < i), "parent ids lead upwards");
    }
    n
}

#[test]
fn deep_recursion_gives_a_report_linear_in_processes() {
    let (deep, big) = recurse(400);
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(deep.path("report.json")).unwrap()).unwrap();
    let certs = rep["certificates"].as_array().unwrap();
    assert!(certs.len() >= 400, "one per level: {}", certs.len());
    // Nothing is cut from the machine-readable report: the deepest victim's
    // chain still names every level above it, up to the run root.
    let longest = certs
        .iter()
        .map(|c| chain_len(&rep, &c["victim"]["ancestry_id"]))
        .max()
        .unwrap();
    assert!(longest >= 399, "longest chain {longest}");
    // Shared tails are stored once: about one entry per level.
    let entries = rep["ancestors"].as_array().unwrap().len();
    assert!(
        entries <= 2 * 402,
        "{entries} ancestor entries for 401 levels"
    );

    // Bounded: the old shape took 50 MB here (400 chains of up to 400).
    assert!(big.json < 2 << 20, "report.json is {} bytes", big.json);
    assert!(
        big.json < 4 * big.log,
        "report.json {} bytes against a {}-byte log",
        big.json,
        big.log
    );
    // What people read repeats a chain only in part.
    let md = std::fs::read_to_string(deep.path("report.md")).unwrap();
    assert!(md.contains(" more ← "), "the chain is cut with a count");
    assert!(big.md < 1 << 20, "report.md is {} bytes", big.md);
    assert!(big.html < 2 << 20, "report.html is {} bytes", big.html);

    // Linear: half the depth, about half the size (quadratic would be a
    // quarter). The margin absorbs the fixed part of each report.
    let (_shallow, small) = recurse(200);
    for (what, b, s) in [
        ("report.json", big.json, small.json),
        ("report.md", big.md, small.md),
        ("report.html", big.html, small.html),
    ] {
        assert!(
            b * 10 < s * 26,
            "{what}: {b} bytes at depth 400 against {s} at depth 200: not linear"
        );
    }
}

/// `tracer summarize`, bounded in time: a walk that loops would not return.
fn summarize(args: &[&Path]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .args(["summarize", "--format", "json"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            // Our own child, by its handle.
            let _ = child.kill();
            panic!("tracer summarize did not return within 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn summarize_follows_no_symlink_out_of_or_around_the_tree() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oom.ndjson");
    let report = render_json(&build_report(
        &read_log(&fixture).unwrap(),
        &ReportOptions::default(),
    ));
    let top = tempfile::tempdir().unwrap();
    let runs = top.path().join("runs");
    std::fs::create_dir_all(runs.join("run-1")).unwrap();
    std::fs::write(runs.join("run-1/report.json"), &report).unwrap();
    // A loop back up the tree, and a link out of it to a report that must
    // not be read (it would count as a second run).
    std::os::unix::fs::symlink("..", runs.join("run-1/again")).unwrap();
    let outside = top.path().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("report.json"), &report).unwrap();
    std::os::unix::fs::symlink(&outside, runs.join("run-2")).unwrap();
    std::fs::create_dir_all(runs.join("run-3")).unwrap();
    std::os::unix::fs::symlink(outside.join("report.json"), runs.join("run-3/report.json"))
        .unwrap();

    let out = summarize(&[&runs]);
    let stderr = no_panic(&out);
    assert!(out.status.success(), "{stderr}");
    let sum: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ran: Vec<&str> = sum["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(ran, [runs.join("run-1/report.json").to_str().unwrap()]);
    let skipped: Vec<&str> = sum["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    for link in ["run-1/again", "run-2", "run-3/report.json"] {
        assert!(
            skipped.contains(&runs.join(link).to_str().unwrap()),
            "{link} is named as skipped: {skipped:?}"
        );
    }
    assert!(stderr.contains("a symlink: not followed"), "{stderr}");

    // A path given on the command line is the user's choice: followed.
    let out = summarize(&[&runs.join("run-3/report.json")]);
    assert!(out.status.success(), "{}", no_panic(&out));
}

/// Round 3, finding 11: `tracer summarize` read a report.json of any size into memory:
/// a 1 GiB sparse file (no disk used) cost 1 GiB of RSS, for a file that
/// then failed to parse anyway. Found by the walk or named on the command
/// line, such a file is now listed as skipped, with the bound, unread; the
/// other runs are summarized as before.
#[test]
fn summarize_skips_a_report_over_its_size_bound_unread() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/oom.ndjson");
    let report = render_json(&build_report(
        &read_log(&fixture).unwrap(),
        &ReportOptions::default(),
    ));
    let top = tempfile::tempdir().unwrap();
    let runs = top.path().join("runs");
    std::fs::create_dir_all(runs.join("run-1")).unwrap();
    std::fs::write(runs.join("run-1/report.json"), &report).unwrap();
    std::fs::create_dir_all(runs.join("huge")).unwrap();
    let huge = runs.join("huge/report.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();

    let run1 = runs.join("run-1");
    // Found by the walk, and named on the command line.
    for args in [vec![runs.as_path()], vec![run1.as_path(), huge.as_path()]] {
        let (out, max_rss_kib) = summarize_measured(top.path(), &args);
        let stderr = no_panic(&out);
        assert!(out.status.success(), "{stderr}");
        eprintln!("tracer summarize {args:?}: peak RSS {max_rss_kib} KiB");
        // The binary alone is a few MiB; reading the file was 1 GiB.
        assert!(
            max_rss_kib < 64 << 10,
            "tracer summarize peaked at {max_rss_kib} KiB on a 1 GiB report.json"
        );
        let sum: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(sum["runs"].as_array().unwrap().len(), 1, "{sum}");
        let skipped = sum["skipped"].as_array().unwrap();
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        assert_eq!(skipped[0]["path"], huge.to_str().unwrap());
        let why = skipped[0]["error"].as_str().unwrap();
        assert!(why.contains("larger than 64 MiB"), "{why}");
        assert!(
            stderr.contains("skipped") && stderr.contains("larger than 64 MiB"),
            "{stderr}"
        );
    }
}

/// `tracer summarize` with its own peak RSS in KiB (common::rss: not this
/// test binary's memory, which a forked child starts with).
fn summarize_measured(scratch: &Path, args: &[&Path]) -> (Output, u64) {
    let (so, se) = (scratch.join("stdout"), scratch.join("stderr"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tracer"));
    cmd.args(["summarize", "--format", "json"]).args(args);
    let (mut cmd, peak) = crate::common::rss::with_peak_rss(&cmd);
    let status = cmd
        .stdout(std::fs::File::create(&so).unwrap())
        .stderr(std::fs::File::create(&se).unwrap())
        .status()
        .unwrap();
    let out = Output {
        status,
        stdout: std::fs::read(&so).unwrap(),
        stderr: std::fs::read(&se).unwrap(),
    };
    (out, peak.kib())
}

/// Round 3, finding 6: a job calling `kill(tracer, SIGTERM)` in a loop (as
/// `nobody`, so each fails with EPERM) got one near miss per call, each with
/// its sender in full: 200,000 of them cost 376 MiB and a 164 MB
/// report.json. Identical calls are one entry with a count now, and the
/// sender is named once, in the ancestors table.
#[test]
fn a_flood_of_failed_kills_of_the_tracer_is_one_entry() {
    const CALLS: u64 = 50_000;
    let script = format!(
        r#"import os, sys
tracer, failed = os.getppid(), 0
for _ in range({CALLS}):
    try:
        os.kill(tracer, 15)
    except PermissionError:
        failed += 1
sys.exit(0 if failed == {CALLS} else 9)
"#
    );
    let r = record(&["--user", "nobody"], &["python3", "-c", &script]);
    assert_eq!(r.code(), Some(0), "every kill failed: {}", r.stderr());
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let misses = rep["near_misses"].as_array().unwrap();
    assert_eq!(misses.len(), 1, "one entry for the identical calls");
    let n = &misses[0];
    assert_eq!(n["target_arg"], r.log.header.tracer_pid);
    assert_eq!(
        (&n["errno"], &n["sig_name"]),
        (&"EPERM".into(), &"SIGTERM".into())
    );
    let lost = rep["log"]["lost_total"].as_u64().unwrap();
    let count = n["count"].as_u64().unwrap();
    assert!(
        count <= CALLS && count + lost >= CALLS,
        "{count} calls folded, {lost} events lost, of {CALLS}"
    );
    let sender = &rep["ancestors"][n["sender_id"].as_u64().unwrap() as usize];
    assert_eq!(sender["argv"][0], "python3");
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(md.contains(&format!("| {count} |")), "{md}");
    let json = size(&r, "report.json");
    assert!(json < 256 << 10, "report.json is {json} bytes");
}

/// A Python child that sleeps with `MB` MB of argv: 12 arguments of 125 KiB
/// (one argument may be at most 128 KiB), as a Java classpath can be.
const BIG_ARGV_CHILD: &str = r#"
import subprocess, sys, time
n, leak = int(sys.argv[1]), sys.argv[2] == "leak"
args = ["python3", "-c", "import time; time.sleep(120)"]
args += [("cp%02d:" % i) + "j" * (125 * 1024) for i in range(12)]
kids = [subprocess.Popen(args, start_new_session=leak) for _ in range(n)]
time.sleep(0.5)
if not leak:
    time.sleep(120)
"#;

/// The bytes of a cut argv, as /proc lays them out (NUL-separated).
fn argv_bytes(argv: &[String]) -> usize {
    argv.iter().map(|a| a.len() + 1).sum::<usize>() - 1
}

/// Round 3, finding 5: /proc argv was read whole. 48 processes sharing a
/// 1.5 MB argv made a `--timeout` snapshot one 72 MB line, over the
/// reader's 64 MiB limit: every report of the run was lost. argv is read
/// from /proc as an exec's is captured now (4 KiB, flagged cut), and every
/// line tracer writes fits 16 MiB.
#[test]
fn a_timeout_snapshot_of_processes_with_huge_argvs_stays_readable() {
    let r = record(
        // 30 s: 48 children with 1.5 MB of argv each start in ~2 s idle, but a
        // CI run under load had none of them started at 10 s.
        &["--user", "nobody", "--timeout", "30s", "--kill-grace", "2s"],
        &["python3", "-c", BIG_ARGV_CHILD, "48", "hang"],
    );
    let snap = r
        .events()
        .snapshots()
        .next()
        .unwrap_or_else(|| panic!("a snapshot; tracer stderr:\n{}", r.stderr()));
    let big: Vec<_> = snap
        .snapshot
        .processes
        .iter()
        .filter(|p| p.argv.iter().any(|a| a.starts_with("cp00:")))
        .collect();
    assert_eq!(
        big.len(),
        48,
        "every child is in the snapshot: {:?}",
        snap.snapshot.notes
    );
    for p in big {
        assert!(p.argv_truncated, "pid {} flagged cut", p.pid);
        assert!(
            argv_bytes(&p.argv) <= tracer_common::ARGV_LEN,
            "{}",
            argv_bytes(&p.argv)
        );
    }
    let log = std::fs::read(r.path("events.ndjson")).unwrap();
    let longest = log.split(|&b| b == b'\n').map(<[u8]>::len).max().unwrap();
    assert!(
        longest <= tracer_user::eventlog::MAX_RECORD_BYTES,
        "{longest}"
    );
    // The reports were written, and name the hang.
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    assert!(
        rep["verdict"].as_str().unwrap().starts_with("Timed out"),
        "{}",
        rep["verdict"]
    );
    assert!(size(&r, "report.json") < 8 << 20);
}

/// The same argv on processes that outlive the command: each leak record
/// read it whole (80 such leaks cost 375 MiB). Read as an exec's now.
#[test]
fn leaked_processes_with_huge_argvs_are_recorded_cut() {
    let r = record(
        &["--user", "nobody", "--leaks", "kill", "--leak-grace", "1s"],
        &["python3", "-c", BIG_ARGV_CHILD, "8", "leak"],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let leaks: Vec<_> = r
        .events()
        .leaks()
        .filter(|l| l.argv.iter().any(|a| a.starts_with("cp00:")))
        .collect();
    assert_eq!(leaks.len(), 8, "{}", r.stderr());
    for l in &leaks {
        assert!(l.argv_truncated);
        assert!(argv_bytes(&l.argv) <= tracer_common::ARGV_LEN);
    }
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let listed = rep["leftovers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["leak"]["argv_truncated"] == true)
        .count();
    assert_eq!(listed, 8);
}
