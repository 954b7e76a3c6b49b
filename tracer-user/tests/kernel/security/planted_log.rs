//! The job plants log segments in the output directory it can write (the
//! documented CI flows make it the job's): a garbage `events-NNNN.ndjson`
//! used to lose every report and skip `--fail-on` (exit 0 where 86 was due),
//! and one with a hand-written header supplied the run's facts and the
//! tracer's pid. Root tracer reads only the log it wrote: `record` its own
//! file through its own descriptor, the daemon the segments it rotated (or,
//! on a restart, root's daemon segments), and says what it ignored.
use std::{
    fs,
    io::{BufRead, BufReader},
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

use crate::common::*;

const NOBODY: u32 = 65534;

/// A work directory `nobody` owns, holding the output directory (theirs
/// too), and a forged log `nobody` can copy in: a real recorded log of
/// another run (another tracer pid, other deaths).
struct Stage {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    forged: PathBuf,
}

fn stage(forged_from: &str) -> Stage {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o711)).unwrap();
    let work = tmp.path().join("work");
    let out = work.join("out");
    fs::create_dir_all(&out).unwrap();
    let forged = work.join("forged.ndjson");
    fs::copy(fixture(forged_from), &forged).unwrap();
    for p in [&work, &out, &forged] {
        std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    Stage {
        _tmp: tmp,
        out,
        forged,
    }
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn report_json(dir: &Path) -> serde_json::Value {
    let text = fs::read_to_string(dir.join("report.json")).expect("report.json was written");
    serde_json::from_str(&text).unwrap()
}

/// The planting, as the job does it: a forged segment first in the series,
/// a garbage one after it, one whose number no u32 holds; then a death
/// `--fail-on unexpected-death` must catch, and success.
const PLANT_THEN_CRASH: &str = r#"cd "$OUT" || exit 99
    cp "$FORGED" events-0000.ndjson || exit 98
    printf 'not a log line\n' > events-0001.ndjson
    printf 'not a log line\n' > events-99999999999.ndjson
    sleep 5 & kill -SEGV $!; wait
    exit 0"#;

#[test]
fn a_segment_planted_by_the_job_never_feeds_its_record_report() {
    let s = stage("real_pgroup_kill.ndjson");
    let out = tracer()
        .args(["record", "--user", &NOBODY.to_string(), "--output"])
        .arg(&s.out)
        .args(["--fail-on", "unexpected-death"])
        .args(["--", "bash", "-c", PLANT_THEN_CRASH])
        .env("OUT", &s.out)
        .env("FORGED", &s.forged)
        .output()
        .expect("run tracer");
    let stderr = no_panic(&out);
    // Judged on the run's own log: the SIGSEGV counts, the step fails.
    assert_eq!(out.status.code(), Some(86), "{stderr}");
    assert!(
        stderr.contains("--fail-on unexpected-death: 1 found"),
        "{stderr}"
    );
    // The report's facts are this run's: its tracer, its events only.
    let own = tracer_user::eventlog::read_log(&s.out.join("events.ndjson")).unwrap();
    let report = report_json(&s.out);
    assert_eq!(
        report["run"]["tracer_pid"].as_u64(),
        Some(own.header.tracer_pid as u64),
        "the forged segment's header became the run's"
    );
    assert_eq!(report["run"]["mode"], "record");
    assert_eq!(
        report["log"]["events"].as_u64(),
        Some(own.events.len() as u64)
    );
    // The job's files are left as they were: not read, not removed.
    assert_eq!(
        fs::read(s.out.join("events-0000.ndjson")).unwrap(),
        fs::read(&s.forged).unwrap()
    );
    // Root re-reading the directory (`tracer report DIR`) reads nothing
    // the job owns: the log itself, handed to the job's user, is refused
    // by name; given as a file, it is read alone, as the user asked.
    let again = tempfile::tempdir().unwrap();
    let rendered = report_cmd(&s.out, again.path());
    assert_eq!(rendered.status.code(), Some(70), "{}", no_panic(&rendered));
    assert!(
        no_panic(&rendered).contains("owned by uid 65534, neither root nor this user"),
        "{}",
        no_panic(&rendered)
    );
    let rendered = report_cmd(&s.out.join("events.ndjson"), again.path());
    assert!(rendered.status.success(), "{}", no_panic(&rendered));
    assert_eq!(
        report_json(again.path())["log"]["events"].as_u64(),
        Some(own.events.len() as u64)
    );
}

/// A shell of the test's own to watch: it crashes a child of its own when
/// told to, then waits for its stdin to close.
fn crashing_shell() -> Child {
    Command::new("sh")
        .args([
            "-c",
            "read go; sleep 5 & kill -SEGV $!; wait; read end; exit 0",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap()
}

struct Daemon(Option<Child>);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut d) = self.0.take() {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

#[test]
fn a_daemon_reads_only_the_segments_it_wrote() {
    use std::io::Write;
    let s = stage("daemon.ndjson");
    // Planted before the daemon starts (a rerun reusing a handed-over
    // directory), as the job's user, under the names it would adopt.
    let plant = |name: &str, bytes: &[u8]| {
        let p = s.out.join(name);
        fs::write(&p, bytes).unwrap();
        std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY)).unwrap();
    };
    plant("events-0000.ndjson", &fs::read(&s.forged).unwrap());
    plant("events-0001.ndjson", b"not a log line\n");
    plant("events-99999999999.ndjson", b"not a log line\n");
    plant("events.ndjson", &fs::read(&s.forged).unwrap());
    let mut sh = crashing_shell();
    let mut d = Daemon(Some(
        tracer()
            .args(["daemon", "--root-pid", &sh.id().to_string(), "--output"])
            .arg(&s.out)
            // Rotation and pruning run over the planted names.
            .args(["--rotate-size", "1500", "--keep-segments", "1"])
            .args(["--fail-on", "unexpected-death"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    let me = d.0.as_ref().unwrap().id();
    // Ready on its own word (its log cannot say: rotation prunes the
    // segments a line was in); the rest of its stderr read meanwhile.
    let said = BufReader::new(d.0.as_mut().unwrap().stderr.take().unwrap());
    let mut lines = said.lines();
    let mut early = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        early.push_str(&line);
        early.push('\n');
        if line.starts_with("tracer: daemon watching") {
            break;
        }
    }
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let mut stdin = sh.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    drop(stdin);
    // The crash is over when the shell is: its records are in the kernel's
    // ring or the log, and the daemon drains the ring before it stops.
    assert!(sh.wait().unwrap().success());
    let mut child = d.0.take().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(me as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let stderr = early + &rest.join().unwrap().join("\n");
    assert!(!stderr.contains("panicked"), "{stderr}");
    // The daemon's own judgement: the crash counts, the planted ones do not
    // hide it, and it still writes every report.
    assert_eq!(status.code(), Some(86), "{stderr}");
    for name in [
        "events-0000.ndjson: owned by uid 65534",
        "events-0001.ndjson: owned by uid 65534",
        "events-99999999999.ndjson: not a segment name",
        "events.ndjson of an earlier run: owned by uid 65534",
    ] {
        assert!(stderr.contains(name), "{name}: not said: {stderr}");
    }
    let report = report_json(&s.out);
    assert_eq!(report["run"]["tracer_pid"].as_u64(), Some(me as u64));
    let warnings = report["log"]["warnings"].to_string();
    assert!(
        warnings.contains("events-0000.ndjson: owned by uid 65534"),
        "{warnings}"
    );
    // Pruning removed only the daemon's own segments: the job's are there.
    for name in ["events-0000.ndjson", "events-0001.ndjson"] {
        let m = fs::metadata(s.out.join(name)).unwrap();
        assert_eq!(m.uid(), NOBODY, "{name} was replaced or removed");
    }
    // Every event of the report is the daemon's own: none of the forged
    // log's processes (`node agent.js`).
    assert!(
        !fs::read_to_string(s.out.join("report.json"))
            .unwrap()
            .contains("agent.js"),
        "the forged log's processes reached the report"
    );
}
