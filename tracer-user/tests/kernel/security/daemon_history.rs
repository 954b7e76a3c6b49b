//! Round 4, finding 2: in a daemon directory the job can write (a CI
//! workspace), the job forces a rotation with a burst of records and renames
//! the live `events.ndjson` away. The daemon kept writing into it by fd and
//! never put it back, so root's `tracer report DIR --fail-on
//! unexpected-death` (what daemon-stop.sh ran) read only the rotated
//! segments and exited 0 over a death the daemon's own summary named. Now
//! the stop writes tracer's own copy back (never over a file the job put
//! there), ends the series with a trailer naming its segments, and `report`
//! refuses to judge a series without that trailer or missing a segment.
use std::{
    fs,
    io::{BufRead, BufReader, Write},
    os::unix::{
        fs::{MetadataExt, PermissionsExt},
        process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use crate::common::*;

const NOBODY: u32 = 65534;

/// The job, as `nobody` in its own output directory: forks until the
/// daemon has rotated once, renames the live log away (retrying across
/// the instant between the rotation's rename and the new file), then a
/// sibling's SIGSEGV kills a child: an unexpected death, logged in the
/// file it moved. `$THEN` runs last (a planted file, or nothing).
const JOB: &str = r#"cd "$OUT" || exit 99
    read go
    while [ ! -e events-0000.ndjson ]; do /bin/true; done
    until mv events.ndjson moved.ndjson 2>/dev/null; do :; done
    sleep 5 & kill -SEGV $!; wait
    eval "$THEN"
    exit 0"#;

struct Run {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    daemon_status: Option<i32>,
    daemon_stderr: String,
}

/// A daemon on the job's shell, the job run to its end, the daemon stopped.
fn daemon_over_the_job(then: &str) -> Run {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o711)).unwrap();
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    std::os::unix::fs::chown(&out, Some(NOBODY), Some(NOBODY)).unwrap();
    let mut job = Command::new("bash")
        .args(["-c", JOB])
        .env("OUT", &out)
        .env("THEN", then)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut daemon = tracer()
        .args(["daemon", "--root-pid", &job.id().to_string(), "--output"])
        .arg(&out)
        .args(["--rotate-size", "65536", "--fail-on", "unexpected-death"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(daemon.stderr.take().unwrap()).lines();
    let mut said = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        said += &line;
        said.push('\n');
        if line.starts_with("tracer: daemon watching") {
            break;
        }
    }
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    job.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let job_status = job.wait().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let status = daemon.wait().unwrap();
    said += &rest.join().unwrap().join("\n");
    assert!(
        job_status.success(),
        "the job failed ({job_status:?}): {said}"
    );
    assert!(!said.contains("panicked"), "{said}");
    Run {
        _tmp: tmp,
        out,
        daemon_status: status.code(),
        daemon_stderr: said,
    }
}

/// `tracer report DIR` as root (as daemon-stop.sh ran it), into a
/// directory of its own.
fn judge(dir: &Path, fail_on: bool) -> (Output, String) {
    let into = tempfile::tempdir().unwrap();
    let mut cmd = tracer();
    cmd.arg("report").arg(dir).arg("--output").arg(into.path());
    if fail_on {
        cmd.args(["--fail-on", "unexpected-death"]);
    }
    let out = cmd.output().expect("run tracer report");
    let stderr = no_panic(&out);
    let json = fs::read_to_string(into.path().join("report.json")).unwrap_or_default();
    (out, stderr + &json)
}

fn as_nobody(script: &str, dir: &Path) {
    let ok = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .uid(NOBODY)
        .gid(NOBODY)
        .status()
        .unwrap()
        .success();
    assert!(ok, "{script}");
}

#[test]
fn renaming_the_live_log_away_cannot_rewrite_the_daemons_verdict() {
    let run = daemon_over_the_job("");
    let said = &run.daemon_stderr;
    // The daemon's own verdict named the death.
    assert_eq!(run.daemon_status, Some(86), "{said}");
    // Root's re-judgement of the directory sees the death (it exited 0).
    let (out, text) = judge(&run.out, true);
    assert_eq!(out.status.code(), Some(86), "{text}");
    assert!(
        text.contains("--fail-on unexpected-death: 1 found"),
        "{text}"
    );
    assert!(
        said.contains("events.ndjson was moved away or removed during the run; the daemon wrote its own copy back"),
        "{said}"
    );
    // Its copy is back under the live name, root's, and the job's file is
    // where the job put it.
    let live = fs::metadata(run.out.join("events.ndjson")).unwrap();
    assert_eq!((live.uid(), live.nlink()), (0, 1));
    assert!(run.out.join("moved.ndjson").exists());

    // The job moves the live file away again, after the stop: the series
    // no longer ends with the stop's trailer. Refused under --fail-on (70,
    // one clear line), a warning on every surface otherwise.
    as_nobody("mv events.ndjson again.ndjson", &run.out);
    let (out, text) = judge(&run.out, true);
    assert_eq!(out.status.code(), Some(70), "{text}");
    assert!(
        text.contains("--fail-on: cannot judge")
            && text.contains("does not end with the trailer its stop writes"),
        "{text}"
    );
    let (out, text) = judge(&run.out, false);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("tracer: warning:") && text.contains("\"not the daemon's whole log: "),
        "not said on stderr and in report.json: {text}"
    );

    // The live file back, its first segment removed instead: a segment
    // the stop named is missing (not pruned: --keep-segments kept it).
    as_nobody(
        "mv again.ndjson events.ndjson && rm events-0000.ndjson",
        &run.out,
    );
    let (out, text) = judge(&run.out, true);
    assert_eq!(out.status.code(), Some(70), "{text}");
    assert!(
        text.contains("missing or were replaced: events-0000.ndjson"),
        "{text}"
    );
}

#[test]
fn a_file_the_job_plants_under_the_live_name_is_never_overwritten() {
    // After moving the live file away, the job puts its own under the name.
    let run = daemon_over_the_job("echo planted > events.ndjson");
    let said = &run.daemon_stderr;
    assert_eq!(run.daemon_status, Some(86), "{said}");
    assert_eq!(
        fs::read_to_string(run.out.join("events.ndjson")).unwrap(),
        "planted\n",
        "the job's file was overwritten"
    );
    // The daemon's own last file is the segment of its own number, root's.
    assert!(
        said.contains("the daemon's own is events-0001.ndjson"),
        "{said}"
    );
    let own = fs::metadata(run.out.join("events-0001.ndjson")).unwrap();
    assert_eq!(own.uid(), 0);
    // Root never judges a directory whose live log is the job's.
    let (out, text) = judge(&run.out, true);
    assert_eq!(out.status.code(), Some(70), "{text}");
    assert!(text.contains("neither root nor this user"), "{text}");
}
