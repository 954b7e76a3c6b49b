//! Reliability: the tracer killed or cancelled mid-run, fork bombs, a ring
//! buffer too small, broken event logs, missing privileges and hooks. Each
//! test asserts what a CI user can rely on; none is timed.
use std::{
    fs,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Stdio},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::common::*;
use nix::{
    sys::signal::{kill, killpg, Signal},
    unistd::Pid,
};
use tracer_user::eventlog::{read_log, Record};

// ---------------------------------------------------------------------------
// helpers

/// `tracer record --output DIR [extra] -- cmd`, returned once the command
/// said `ready` on its stdout; stderr to DIR/../tracer.stderr.
fn spawn_tracer(dir: &Path, extra: &[&str], cmd: &[&str]) -> Child {
    require_root();
    let err = fs::File::create(dir.with_extension("stderr")).unwrap();
    let mut tracer = record_command(dir, extra, cmd);
    tracer.stderr(err);
    spawn_ready(tracer).0
}

fn wait_gone(pid: i32, limit: Duration) -> bool {
    let alive = || proc::alive(pid as u32);
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if !alive() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !alive()
}

/// The pid of the run's root (the tracer's fork of the command), from a log
/// that may be truncated.
fn root_pid(path: &Path) -> i32 {
    let log = read_log(path).expect("readable log");
    let pid = log
        .events
        .iter()
        .forks()
        .find(|f| f.parent.pid == log.header.tracer_pid)
        .map(|f| f.child.pid as i32)
        .expect("the root fork is in the log");
    pid
}

/// A unique cgroup with a pids limit (v1 `pids` controller, else cgroup v2),
/// removed on drop.
struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    fn new(max: u32) -> PidsCgroup {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("tracer-test-pids-{}-{nanos}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/pids");
        let root = if v1.join("cgroup.procs").exists() {
            v1.to_path_buf()
        } else {
            let v2 = Path::new("/sys/fs/cgroup");
            let ctrl = fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap_or_default();
            assert!(
                ctrl.contains("pids"),
                "no pids cgroup controller (v1 or v2) on this machine"
            );
            v2.to_path_buf()
        };
        let dir = root.join(name);
        fs::create_dir(&dir).unwrap();
        fs::write(dir.join("pids.max"), max.to_string()).unwrap();
        PidsCgroup { dir }
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        for _ in 0..100 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("warning: could not remove {}", self.dir.display());
    }
}

// ---------------------------------------------------------------------------
// the tracer dies

/// The tracer SIGKILLed mid-run: the log is a valid prefix, `tracer report`
/// renders it flagged as truncated, and the wrapped command does not run on
/// silently as an orphan (intended: it gets SIGTERM when the tracer dies).
#[test]
fn sigkilled_tracer_leaves_a_readable_log_and_no_silent_orphan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let marker = tmp.path().join("got-sigterm");
    let script = format!(
        "trap 'echo term > {}; exit 0' TERM; for i in 1 2 3 4 5 6 7 8; do /bin/true; done; \
         echo ready; while :; do sleep 0.05; done",
        marker.display()
    );
    let mut tracer = spawn_tracer(&dir, &[], &["sh", "-c", &script]);
    std::thread::sleep(Duration::from_millis(300)); // let the tracer flush
    kill(Pid::from_raw(tracer.id() as i32), Signal::SIGKILL).unwrap();
    let status = tracer.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );

    let log_path = dir.join("events.ndjson");
    // Every complete line is JSON; only a last, unterminated one may not be.
    let text = fs::read(&log_path).unwrap();
    let complete = match text.iter().rposition(|&b| b == b'\n') {
        Some(i) => &text[..=i],
        None => &text[..0],
    };
    for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        serde_json::from_slice::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("line {} is not JSON: {e}", i + 1));
    }
    let log = read_log(&log_path).expect("a killed tracer's log is readable");
    assert!(log.truncated, "no trailer: flagged truncated");
    let execs = log
        .events
        .iter()
        .filter(|e| matches!(e, Record::Exec(x) if x.filename == "/bin/true"))
        .count();
    assert_eq!(execs, 8, "events before the kill were flushed");

    let cmd_pid = root_pid(&log_path);
    let out_dir = tmp.path().join("rerender");
    let out = report_cmd(&log_path, &out_dir);
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains("trailer"),
        "{stderr}"
    );
    let md = fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("truncated"), "report.md flags it:\n{md}");
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(out_dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["log"]["truncated"], true);

    // What happened to the wrapped command?
    let gone = wait_gone(cmd_pid, Duration::from_secs(3));
    let got_term = marker.exists();
    // Hermetic clean-up: the command's process group is ours (setpgid by the tracer).
    let _ = killpg(Pid::from_raw(cmd_pid), Signal::SIGKILL);
    assert!(
        gone && got_term,
        "the wrapped command (pid {cmd_pid}) outlived the SIGKILLed tracer: alive after 3 s = {}, \
         got SIGTERM = {got_term}. tracer's watchdog (src/watchdog.rs) should have sent SIGTERM \
         to the run when tracer died, so a killed tracer leaves no job running as an orphan",
        !gone
    );
}

/// A CI cancellation (SIGTERM to the tracer): the command gets it, and the
/// tracer still writes a complete log and both reports.
#[test]
fn sigtermed_tracer_forwards_and_writes_full_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let marker = tmp.path().join("got-sigterm");
    let script = format!(
        "trap 'echo term > {}; exit 42' TERM; echo ready; while :; do sleep 0.05; done",
        marker.display()
    );
    let mut tracer = spawn_tracer(&dir, &[], &["sh", "-c", &script]);
    kill(Pid::from_raw(tracer.id() as i32), Signal::SIGTERM).unwrap();
    let status = tracer.wait().unwrap();
    assert_eq!(status.code(), Some(42), "the command's own status");
    assert!(
        marker.exists(),
        "the command received the forwarded SIGTERM"
    );

    let log = read_log(&dir.join("events.ndjson")).unwrap();
    assert!(!log.truncated, "the trailer was written");
    let trailer = log.trailer.as_ref().unwrap();
    assert_eq!(trailer.lost.total(), 0);
    assert!(
        log.events.iter().any(|e| matches!(e, Record::Signal(s)
            if s.sig == 15 && s.sender.pid == log.header.tracer_pid)),
        "the forwarded SIGTERM is in the log"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["log"]["truncated"], false);
    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("Loss"), "{md}");
}

// ---------------------------------------------------------------------------
// pressure

const BOMB_PIDS_MAX: u32 = 40;

/// Fork `width` children per level down to `depth`, each holding its pid a
/// moment; forks the pids limit refuses are simply skipped. Only
/// async-signal-safe calls after fork.
fn bomb(depth: u32, width: usize) -> ! {
    let mut kids = [0 as libc::pid_t; 8];
    if depth > 0 {
        for slot in kids.iter_mut().take(width) {
            // SAFETY: the child only forks, sleeps, waits and _exits.
            match unsafe { libc::fork() } {
                0 => bomb(depth - 1, width),
                p => *slot = p,
            }
        }
    }
    // SAFETY: usleep takes a plain integer.
    unsafe { libc::usleep(20_000) };
    for &k in kids.iter().filter(|&&k| k > 0) {
        // SAFETY: waitpid on our own child, with no status pointer.
        unsafe { libc::waitpid(k, std::ptr::null_mut(), 0) };
    }
    // SAFETY: _exit ends the forked child without running the test harness's code.
    unsafe { libc::_exit(0) }
}

/// A bounded fork bomb in a pids-limited cgroup: the tracer survives, its
/// memory stays bounded, every process of the run is accounted for, and any
/// map overflow is in the trailer and report.md.
#[test]
fn fork_bomb_in_pids_cgroup() {
    let sc = scenario(|| {
        let procs = std::env::var("TRACER_TEST_CGROUP_PROCS").unwrap();
        fs::write(procs, std::process::id().to_string()).unwrap();
        // SAFETY: see bomb().
        match unsafe { libc::fork() } {
            0 => bomb(6, 4), // up to 5461 processes, at most 40 at once
            // SAFETY: waitpid on our own child, with no status pointer.
            p => unsafe { libc::waitpid(p, std::ptr::null_mut(), 0) },
        };
    });
    require_root();
    let cg = PidsCgroup::new(BOMB_PIDS_MAX);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("out");
    let err = fs::File::create(tmp.path().join("tracer.stderr")).unwrap();
    let mut cmd = sc.command(&dir, &[]);
    cmd.env(
        "TRACER_TEST_CGROUP_PROCS",
        cg.dir.join("cgroup.procs").as_os_str(),
    );
    let (mut cmd, peak) = crate::common::rss::with_peak_rss(&cmd);
    let status = cmd.stdout(Stdio::null()).stderr(err).status().unwrap();
    let rss_kb = peak.kib();
    let stderr = fs::read_to_string(tmp.path().join("tracer.stderr")).unwrap();
    assert_eq!(status.code(), Some(0), "tracer survived: {stderr}");
    assert!(
        rss_kb < 256 * 1024,
        "tracer peak RSS {rss_kb} KiB over a fork bomb"
    );

    let log = read_log(&dir.join("events.ndjson")).unwrap();
    assert!(!log.truncated);
    let forks = log
        .events
        .iter()
        .filter(|e| matches!(e, Record::Fork(f) if !f.thread))
        .count();
    let deaths = log
        .events
        .iter()
        .filter(|e| matches!(e, Record::Exit(x) if x.group_dead))
        .count();
    let trailer = log.trailer.as_ref().unwrap();
    let lost = &trailer.lost;
    // It ran into the cgroup's limit (its first process and the limit's own
    // accounting leave a little slack); how far beyond depends on timing.
    assert!(
        forks + 3 >= BOMB_PIDS_MAX as usize,
        "the bomb reached the pids limit ({forks} forks)"
    );
    // Every process the log saw born, it saw die -- or the loss says why not.
    assert!(
        deaths + lost.total() as usize >= forks,
        "{forks} forks, {deaths} deaths, lost {lost:?}"
    );
    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        json["log"]["lost"]["tracked_map_full"],
        lost.tracked_map_full
    );
    assert!(md.contains("Loss"), "{md}");
    if lost.tracked_map_full > 0 {
        assert!(
            md.contains("tracked"),
            "map overflow shown in report.md:\n{md}"
        );
    }
    drop(cg);
}

/// A ring buffer too small for the storm: losses are counted, exactly enough
/// to cover every exec that is missing, and shown in both reports.
#[test]
fn tiny_ring_buffer_counts_every_loss() {
    const N: usize = 300;
    // Exec records are cut to their argv: a 4000-byte argument makes each
    // larger than the whole ring, so every exec is lost whatever the pace
    // of the reader, and the small fork and exit records still get through.
    let script = format!("a=$(printf '%4000s' x); for i in $(seq {N}); do /bin/true \"$a\"; done");
    let r = record(&["--ring-buffer-size", "4096"], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let lost = &r.log.trailer.as_ref().expect("trailer").lost;
    assert!(lost.ringbuf_full > 0, "a 4 KiB ring overflows: {lost:?}");
    let execs = r
        .events()
        .filter(|e| matches!(e, Record::Exec(x) if x.filename == "/bin/true"))
        .count();
    assert!(
        execs + lost.ringbuf_full as usize >= N,
        "{execs} execs seen + {} lost < {N} generated",
        lost.ringbuf_full
    );
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(r.path("report.json")).unwrap()).unwrap();
    assert_eq!(json["log"]["lost"]["ringbuf_full"], lost.ringbuf_full);
    assert_eq!(json["log"]["complete"], false);
    let md = fs::read_to_string(r.path("report.md")).unwrap();
    let loss_line = md
        .lines()
        .find(|l| l.contains("**Loss"))
        .expect("a loss line");
    assert!(
        loss_line.contains(&lost.total().to_string()) && loss_line.contains("ring buffer full"),
        "{loss_line}"
    );
}

// ---------------------------------------------------------------------------
// broken logs

/// Without root, `record` is one clear line (exit 70) and `report` works:
/// reading a log needs no privilege.
#[test]
fn unprivileged_record_fails_clearly_and_report_works() {
    require_root(); // to drop privileges we must have them
    let tmp = tempfile::tempdir().unwrap();
    // 65534 (nobody) must be able to write there.
    fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let out = record_command(&tmp.path().join("rec"), &[], &["true"])
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    no_panic(&out);
    let stderr = one_line_failure(&out);
    assert!(stderr.contains("root"), "{stderr}");

    let log = tmp.path().join("log.ndjson");
    fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_segv.ndjson"),
        &log,
    )
    .unwrap();
    let out = tracer()
        .arg("report")
        .arg(&log)
        .arg("--output")
        .arg(tmp.path().join("rep"))
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(tmp.path().join("rep/report.md").exists());
}

/// Without the kill-syscall hook a kill is still certified from
/// signal_generate, and the reports name the missing hook.
#[test]
fn missing_kill_hook_degrades_and_is_named() {
    let r = record(
        &["--disable-hook", "kill_syscalls"],
        &["sh", "-c", "sleep 5 & kill -TERM $!; wait; exit 0"],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let hook = hook(&r.log, "kill_syscalls");
    assert!(!hook.attached);
    assert!(
        !r.events().any(|e| matches!(e, Record::KillCall(_))),
        "no kill_call without the hook"
    );
    assert!(
        r.events()
            .any(|e| matches!(e, Record::Signal(s) if s.sig == 15)),
        "the SIGTERM itself is still seen (signal_generate)"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&fs::read(r.path("report.json")).unwrap()).unwrap();
    let missing = json["run"]["hooks_missing"].as_array().unwrap();
    assert!(missing.iter().any(|h| h == "kill_syscalls"), "{missing:?}");
    let md = fs::read_to_string(r.path("report.md")).unwrap();
    assert!(
        md.contains("kill_syscalls"),
        "report.md names the hook:\n{md}"
    );
    assert!(
        md.contains("SIGTERM"),
        "the sleep's death by SIGTERM is still reported:\n{md}"
    );
}
