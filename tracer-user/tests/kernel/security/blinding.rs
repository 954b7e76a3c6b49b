//! A job that blinds tracer so that `--fail-on` passes over a death it
//! hid (issue: "Security, round 4", finding 1): loss fails closed (exit 87,
//! "cannot certify"), failed kill-family calls are folded in the kernel,
//! and the crash-stack parse child is neither on the drain path nor
//! reachable by the job's signals.
//!
//! Hermetic: every script signals only processes it forked, pids no
//! process can have (above the kernel's `PID_MAX_LIMIT`, 2^22), and (the
//! attack) the parse child the tracer this test started spawned.
use crate::common::*;
use tracer_user::eventlog::Record;

/// `flood.py N`: forks a child that ignores SIGUSR1, sends it N SIGUSR1
/// (every one logged under `--all-signals`), then exits `EXIT` (argv 2).
const IGNORED_FLOOD: &str = r#"
import os, signal, sys
N = int(sys.argv[1]); EXIT = int(sys.argv[2])
r, w = os.pipe()
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    os.close(w)
    os.write(ready_w, b'r')
    os.read(r, 1)
    os._exit(0)
os.close(r)
assert os.read(ready_r, 1) == b'r'
for _ in range(N):
    os.kill(pid, signal.SIGUSR1)
os.close(w)
os.waitpid(pid, 0)
sys.exit(EXIT)
"#;

/// A one-page ring and every delivery logged: a flood of 50,000 signals
/// (100,000 records) overflows it whatever the machine's load.
fn lossy(extra: &[&str], exit: &str) -> Recorded {
    let mut args = vec!["--ring-buffer-size", "4096", "--all-signals"];
    args.extend_from_slice(extra);
    let r = record(
        &args,
        &["/usr/bin/python3", "-c", IGNORED_FLOOD, "50000", exit],
    );
    let lost = lost(&r);
    assert!(
        lost > 0,
        "the flood was meant to overflow the ring: {}",
        r.stderr()
    );
    r
}

fn lost(r: &Recorded) -> u64 {
    r.log.trailer.as_ref().expect("a trailer").lost.total()
}

fn read(r: &Recorded, file: &str) -> String {
    std::fs::read_to_string(r.path(file)).unwrap()
}

#[test]
fn lost_events_fail_a_fail_on_run_closed() {
    let r = lossy(&["--fail-on", "unexpected-death"], "0");
    let n = lost(&r);
    let err = r.stderr();
    assert_eq!(r.code(), Some(87), "{err}");
    assert!(
        err.contains(&format!(
            "--fail-on cannot certify: {n} events lost (ring buffer full: "
        )),
        "{err}"
    );
    // The loss line stays on every surface.
    let said = format!("{n} events were lost");
    assert!(err.contains(&said), "the stderr summary: {err}");
    assert!(read(&r, "report.md").contains(&said), "report.md");
    assert!(read(&r, "report.html").contains(&said), "report.html");
    let json: serde_json::Value = serde_json::from_str(&read(&r, "report.json")).unwrap();
    assert_eq!(json["log"]["lost_total"], n);
    assert_eq!(json["log"]["complete"], false);

    // `report --fail-on` judges the log the same way, and `--allow-loss`
    // restores the old judgement there too.
    let out = tempfile::tempdir().unwrap();
    let judge = |extra: &[&str]| {
        tracer()
            .arg("report")
            .arg(r.path("events.ndjson"))
            .arg("--output")
            .arg(out.path())
            .args(["--fail-on", "unexpected-death"])
            .args(extra)
            .output()
            .unwrap()
    };
    let o = judge(&[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(87), "{err}");
    assert!(
        err.contains(&format!("cannot certify: {n} events lost")),
        "{err}"
    );
    let o = judge(&["--allow-loss"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("cannot certify"), "{err}");
}

#[test]
fn allow_loss_restores_the_old_judgement_and_the_command_status_passes() {
    let r = lossy(&["--fail-on", "unexpected-death", "--allow-loss"], "0");
    let err = r.stderr();
    assert_eq!(r.code(), Some(0), "{err}");
    assert!(!err.contains("cannot certify"), "{err}");
    assert!(err.contains("events were lost"), "still said: {err}");
    // Without --fail-on, loss changes nothing: the command's status.
    let r = lossy(&[], "3");
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    // A failing command keeps its own status under --fail-on too.
    let r = lossy(&["--fail-on", "unexpected-death"], "3");
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    assert!(r.stderr().contains("cannot certify"), "{}", r.stderr());
    assert!(!r.events().any(|e| matches!(e, Record::SignalSummary(_))));
}

/// A pid no process can have: above `PID_MAX_LIMIT` (2^22), so every
/// `kill(2)` at it fails with ESRCH and signals nobody.
const NO_SUCH_PID: i64 = (1 << 30) + 4242;

/// `esrch.py SECONDS`: `kill(NO_SUCH_PID, SIGTERM)` in a loop for SECONDS,
/// then prints how many calls failed (all of them).
const ESRCH_FLOOD: &str = r#"
import os, sys, time
BOGUS = (1 << 30) + 4242
end = time.monotonic() + float(sys.argv[1])
n = 0
while time.monotonic() < end:
    for _ in range(1000):
        try:
            os.kill(BOGUS, 15)
        except ProcessLookupError:
            n += 1
print(f'calls={n}', flush=True)
"#;

/// The issue's flood: seconds of failed `kill(2)` calls, one record each
/// before, filled the ring (1,903,250 events lost). Folded in the kernel,
/// they lose nothing and the report counts every call.
#[test]
fn a_flood_of_failed_kills_is_folded_in_the_kernel_and_counted() {
    let r = record(&[], &["/usr/bin/python3", "-c", ESRCH_FLOOD, "3"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let out = String::from_utf8_lossy(&r.output.stdout).into_owned();
    let calls: u64 = out
        .trim()
        .strip_prefix("calls=")
        .unwrap_or_else(|| panic!("{out:?}"))
        .parse()
        .unwrap();
    assert!(calls > 10_000, "the flood was a flood: {calls}");
    assert_no_loss(&r);
    let records: Vec<_> = r
        .events()
        .kill_calls()
        .filter(|k| k.target_arg == NO_SUCH_PID)
        .collect();
    let logged: u64 = records.iter().map(|k| k.count).sum();
    assert_eq!(logged, calls, "every call is logged or counted");
    assert!(
        records.len() <= 3,
        "the first call, then the count: {} records",
        records.len()
    );
    for k in &records {
        assert_eq!(k.errno.as_deref(), Some("ESRCH"), "{k:?}");
        assert_eq!(k.deliveries, 0);
    }
    let folded = records
        .iter()
        .find(|k| k.count > 1)
        .expect("a counted record");
    assert!(
        folded.first_t.is_some_and(|t| t <= folded.at.t),
        "{folded:?}"
    );
    // The fabricated-pid kill stays a certificate fact, with its count.
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let miss = rep["near_misses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["target_arg"] == NO_SUCH_PID)
        .unwrap_or_else(|| panic!("{:#}", rep["near_misses"]));
    assert_eq!(miss["count"], calls, "{miss:#}");
    assert_eq!(miss["errno"], "ESRCH");
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.contains(&format!("kill({NO_SUCH_PID}")))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains(&format!("| {calls} |")), "{row}");
}

/// The attack of finding 1, as the job performs it (run as nobody):
/// crash a process so that tracer starts its parse child, find that child
/// (tracer's child, `__parse-crash-stacks` on its command line) and
/// SIGSTOP it; then flood `kill(2)` at a pid no process has for 3 s while
/// a sibling SIGKILLs a worker. Before: the drain waited up to 10 s for
/// the stopped child, the flood filled the ring, the SIGKILL was never
/// recorded, and `--fail-on unexpected-death` exited 0.
const BLIND: &str = r#"
import ctypes, os, signal, sys, time
BOGUS = (1 << 30) + 4242
tracer = os.getppid()

def crash():
    pid = os.fork()
    if pid == 0:
        ctypes.string_at(0)
        os._exit(1)
    os.waitpid(pid, 0)

def is_parse_child(p):
    try:
        with open(f'/proc/{p}/status') as f:
            ppid = [l for l in f if l.startswith('PPid:')][0].split()[1]
        with open(f'/proc/{p}/cmdline', 'rb') as f:
            argv = f.read().split(b'\0')
    except (OSError, IndexError):
        return False
    # argv[1] exactly: tracer's own command line (its watchdog's) holds
    # this script, and so the word.
    return int(ppid) == tracer and len(argv) > 1 and argv[1] == b'__parse-crash-stacks'

def parse_child():
    for p in os.listdir('/proc'):
        if p.isdigit() and is_parse_child(p):
            return int(p)
    return None

worker = os.fork()
if worker == 0:
    time.sleep(120)
    os._exit(0)

stop = 'none'
for attempt in range(50):
    crash()
    end = time.monotonic() + 5
    child = None
    while child is None and time.monotonic() < end:
        child = parse_child()
    if child is None:
        continue
    # By a pidfd: never a pid another process may have by now.
    try:
        fd = os.pidfd_open(child)
    except OSError:
        continue
    if not is_parse_child(child):
        os.close(fd)
        continue
    # Until it has dropped to its user it is root: try again until it
    # stops, or is gone (at most 5 s).
    refused = False
    end = time.monotonic() + 5
    while stop == 'none' and time.monotonic() < end:
        try:
            signal.pidfd_send_signal(fd, signal.SIGSTOP)
            stop = 'stopped'
        except PermissionError:
            refused = True
        except ProcessLookupError:
            break
    os.close(fd)
    if stop == 'none' and refused:
        stop = 'EPERM'
    if stop != 'none':
        break

flooder = os.fork()
if flooder == 0:
    end = time.monotonic() + 3
    while time.monotonic() < end:
        for _ in range(1000):
            try:
                os.kill(BOGUS, signal.SIGTERM)
            except ProcessLookupError:
                pass
    os._exit(0)
killer = os.fork()
if killer == 0:
    time.sleep(1)
    os.kill(worker, signal.SIGKILL)
    os._exit(0)
for p in (flooder, killer, worker):
    os.waitpid(p, 0)
print(f'worker={worker} killer={killer} stop={stop}', flush=True)
"#;

#[test]
fn a_job_cannot_blind_fail_on_with_its_parse_child_and_a_kill_flood() {
    let r = record(
        &["--user", "nobody", "--fail-on", "unexpected-death"],
        &["/usr/bin/python3", "-c", BLIND],
    );
    let err = r.stderr();
    let out = String::from_utf8_lossy(&r.output.stdout).into_owned();
    let field = |k: &str| -> String {
        out.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .unwrap_or_else(|| panic!("{k} in {out:?}; tracer: {err}"))
            .to_string()
    };
    let (worker, killer): (u32, u32) = (
        field("worker=").parse().unwrap(),
        field("killer=").parse().unwrap(),
    );
    // Never 0: a death found (86), or nothing certified (87).
    assert_ne!(r.code(), Some(0), "{err}");
    // The flood was folded: nothing lost, so the death itself is found
    // (the crashes the job made to start the parse child are unexpected
    // deaths too: the worker's certificate is what matters).
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(86), "{err}");
    assert!(err.contains("--fail-on unexpected-death: "), "{err}");
    // The job found the parse child and could not stop it: it runs as an
    // identity the job does not have.
    assert_eq!(field("stop="), "EPERM", "{err}");
    let rep: serde_json::Value = serde_json::from_str(&read(&r, "report.json")).unwrap();
    let c = crate::certificates::support::cert(&rep, worker);
    assert_eq!(c["cause"]["kind"], "killed_in_run", "{c:#}");
    assert_eq!(c["killer"]["process"]["pid"], killer, "{c:#}");
    assert_eq!(c["cause"]["signal"]["sig_name"], "SIGKILL", "{c:#}");
}

/// The daemon judges its own log the same way: a job that overflows a
/// daemon's ring (here a one-page ring and every delivery logged) cannot
/// make its `--fail-on` stop pass, whatever the job hid in the loss: the
/// stop exits 87 and says so. `--allow-loss` restores the old judgement.
#[test]
fn a_daemon_that_lost_events_cannot_certify_its_stop() {
    require_root();
    for (extra, want) in [(None, 87), (Some("--allow-loss"), 0)] {
        let dir = tempfile::tempdir().unwrap();
        // The job waits for a line, so the daemon watches it from its start.
        let mut job = std::process::Command::new("bash")
            .args(["-c", "read go; exec /usr/bin/python3 -c \"$FLOOD\" 50000 0"])
            .env("FLOOD", IGNORED_FLOOD)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut daemon = tracer()
            .args(["daemon", "--root-pid", &job.id().to_string(), "--output"])
            .arg(dir.path())
            .args(["--ring-buffer-size", "4096", "--all-signals"])
            .args(["--fail-on", "unexpected-death"])
            .args(extra)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Killed if an assertion fails before it is reaped (never
        // orphaned: a pid the test got from its own child, not yet waited).
        let mut guard = KillUnreaped(daemon.id(), true);
        // Watching, in its own words (a one-page ring may lose even the
        // seeding's records on a busy machine: the log cannot say it).
        let mut lines =
            std::io::BufRead::lines(std::io::BufReader::new(daemon.stderr.take().unwrap()));
        let mut err = String::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            err += &line;
            err.push('\n');
            if line.starts_with("tracer: daemon watching") {
                break;
            }
        }
        std::io::Write::write_all(&mut job.stdin.take().unwrap(), b"go\n").unwrap();
        assert!(job.wait().unwrap().success());
        // Stopped at once: the loss is counted in the kernel, whatever the
        // drain had reached.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(daemon.id() as i32),
            nix::sys::signal::SIGTERM,
        )
        .unwrap();
        for line in lines.map_while(Result::ok) {
            err += &line;
            err.push('\n');
        }
        let status = daemon.wait().unwrap();
        guard.1 = false;
        let series = tracer_user::eventlog::read_series(dir.path()).unwrap();
        let lost = series.trailer.as_ref().expect("a trailer").lost.total();
        assert!(lost > 0, "the flood was meant to overflow the ring: {err}");
        assert_eq!(status.code(), Some(want), "{extra:?}: {err}");
        assert!(
            err.contains("events were lost"),
            "said on every stop: {err}"
        );
        assert_eq!(
            err.contains(&format!("cannot certify: {lost} events lost")),
            want == 87,
            "{err}"
        );
    }
}

/// SIGKILL to a child of the test's own on drop, unless it was reaped.
struct KillUnreaped(u32, bool);

impl Drop for KillUnreaped {
    fn drop(&mut self) {
        if self.1 {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.0 as i32),
                nix::sys::signal::SIGKILL,
            );
        }
    }
}
