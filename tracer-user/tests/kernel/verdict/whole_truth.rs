//! The verdict tells the whole truth, on the real kernel with the real
//! programs: a kill that leaves the run leads it, a pid namespace's end is
//! named, a SIGKILL says which SIGTERM it followed, a shell's `trap 'kill 0'
//! EXIT` is cleanup, a `pkill` of the tracer from inside is no cancellation,
//! ^C is the terminal's, a timer is the victim's own, and a missing
//! interpreter is named. Every signal goes to a process the test spawned.
use crate::common::*;
use tracer_user::{
    analysis::{CauseKind, Rank},
    report::{build_report, render_markdown, ReportOptions},
};

#[test]
fn a_sigkill_to_a_process_outside_the_run_leads_the_verdict() {
    // The stranger: started by the test, outside the traced run.
    let mut stranger = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let pid = stranger.id();
    let r = record(&[], &["sh", "-c", &format!("kill -9 {pid}")]);
    let _ = stranger.kill();
    let _ = stranger.wait();
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let rep = default_report(&r);
    assert!(
        rep.verdict.contains(&format!(
            "in the run sent SIGKILL to `[sleep]` (pid {pid}), outside the run, via kill({pid}, \
             SIGKILL). Inside the run: no unexpected deaths."
        )),
        "{}",
        rep.verdict
    );
    assert_ne!(rep.verdict, "No unexpected deaths.");
    // The stderr summary leads with it too.
    assert!(
        r.stderr()
            .contains(&format!("in the run sent SIGKILL to `[sleep]` (pid {pid})")),
        "{}",
        r.stderr()
    );
}

#[test]
fn a_pid_namespace_teardown_is_named_and_ranked_with_the_inits_end() {
    let r = record(
        &["--fail-on", "unexpected-death"],
        &[
            "unshare",
            "--pid",
            "--fork",
            "sh",
            "-c",
            "sleep 101 & sleep 0.3; exit 0",
        ],
    );
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(0), "no unexpected death: {}", r.stderr());
    let rep = default_report(&r);
    let c = cert_by_argv(&rep, &["sleep", "101"]);
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::PidNamespaceTeardown, Rank::Expected),
        "{}",
        c.headline
    );
    assert!(
        c.headline.contains(
            "still running when its pid namespace's init `sh -c sleep 101 & sleep 0.3; exit 0`"
        ) && c
            .headline
            .contains("pid 1 in its namespace) exited with code 0"),
        "{}",
        c.headline
    );
}

#[test]
fn a_pid_namespace_whose_init_failed_goes_down_as_its_consequence() {
    let r = record(
        &[],
        &[
            "unshare",
            "--pid",
            "--fork",
            "sh",
            "-c",
            "sleep 102 & sleep 0.3; exit 3",
        ],
    );
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(3));
    let rep = default_report(&r);
    let init = cert_by_argv(&rep, &["sh", "-c"]);
    let sleep = cert_by_argv(&rep, &["sleep", "102"]);
    assert_eq!(init.rank, Rank::NonzeroExit);
    assert_eq!(sleep.rank, Rank::Consequence, "{}", sleep.headline);
    assert_eq!(sleep.consequence_of.as_ref().unwrap().of, init.id);
    assert_eq!(rep.analysis.counts.unexpected, 0, "{}", rep.verdict);
}

#[test]
fn a_sigkill_after_a_caught_sigterm_says_it_was_survived() {
    let r = record(
        &[],
        &[
            "bash",
            "-c",
            // The SIGTERM waits for the handler (a file the victim writes
            // once it is set): through pyenv's shims under load, python
            // took more than a fixed half second to get there.
            "d=$(mktemp -d); python3 -c 'import signal,sys,time; signal.signal(15, lambda *a: None); \
             open(sys.argv[1] + \"/ready\", \"w\").close(); time.sleep(30)' \"$d\" & \
             v=$!; sh -c \"while [ ! -e $d/ready ]; do sleep .05; done; kill -TERM $v; sleep 1; kill -9 $v\"; \
             wait $v; s=$?; rm -rf \"$d\"; exit $s",
        ],
    );
    assert_no_loss(&r);
    let rep = default_report(&r);
    let c = cert_by_argv(&rep, &["python3", "-c"]);
    let k = c.killer.as_ref().unwrap();
    assert!(
        c.headline.ends_with(&format!(
            "1.0 s after a SIGTERM from pid {} that it caught and survived",
            k.process.pid
        )),
        "{}",
        c.headline
    );
}

#[test]
fn trap_kill_0_on_exit_is_cleanup_not_a_suicide() {
    let r = record(
        &[],
        &["bash", "-c", "trap 'kill 0' EXIT; sleep 31 & sleep 0.3"],
    );
    assert_no_loss(&r);
    let rep = default_report(&r);
    let bash = cert_by_argv(&rep, &["bash", "-c"]);
    assert_eq!(
        (bash.cause.kind, bash.rank),
        (CauseKind::OwnGroupKill, Rank::Expected),
        "{}",
        bash.headline
    );
    assert!(!bash.headline.contains("abort"), "{}", bash.headline);
    assert_eq!(rep.analysis.counts.unexpected, 0, "{}", rep.verdict);
}

#[test]
fn trap_kill_jobs_on_exit_stops_the_jobs_in_order() {
    let r = record(
        &[],
        &[
            "bash",
            "-c",
            "trap 'kill $(jobs -p)' EXIT; sleep 32 & (sleep 33) & sleep 0.3",
        ],
    );
    assert_no_loss(&r);
    let rep = default_report(&r);
    assert_eq!(rep.analysis.counts.unexpected, 0, "{}", rep.verdict);
    assert!(rep
        .analysis
        .certificates
        .iter()
        .all(|c| !c.headline.contains("by itself")));
}

#[test]
fn a_pkill_of_the_tracer_from_inside_the_run_names_its_sender() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pk");
    // `[r]` keeps the pattern from matching the shell whose argv holds it.
    let pattern = format!("[r]ecord --output {}", out.display());
    let script = format!("sleep 34 & sleep .3; pkill -TERM -f '{pattern}'; wait");
    let output = tracer()
        .arg("record")
        .arg("--output")
        .arg(&out)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let log = tracer_user::eventlog::read_log(&out.join("events.ndjson")).unwrap();
    let rep = build_report(&log, &ReportOptions::default());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let f = rep
        .analysis
        .foreign_signals
        .iter()
        .find(|f| f.target_is_tracer)
        .unwrap_or_else(|| panic!("pkill's SIGTERM to the tracer: {stderr}"));
    assert_eq!(f.sender.argv[0], "pkill");
    // The verdict's 300 characters may shorten the long pattern; the
    // finding keeps it whole (asserted on `f` above).
    assert!(
        rep.verdict.starts_with("`pkill -TERM -f [r]ecord")
            && rep
                .verdict
                .contains(&format!("(pid {}) in the run", f.sender.pid)),
        "{}",
        rep.verdict
    );
    assert!(!rep.verdict.contains("Cancelled"), "{}", rep.verdict);
    let sleep = cert_by_argv(&rep, &["sleep", "34"]);
    assert_eq!(sleep.rank, Rank::Unexpected, "{}", sleep.headline);
    assert_eq!(
        sleep.cause.forwarded_from.as_ref().map(|p| p.pid),
        Some(f.sender.pid)
    );
}

#[test]
fn ctrl_c_at_a_pty_is_the_terminal_sending_sigint() {
    // script(1) gives `sleep` a pty and copies its stdin to it: a ^C
    // written there is typed at the terminal.
    let r = record(
        &[],
        &[
            "sh",
            "-c",
            "(sleep 1; printf '\\003'; sleep 1) | script -qec 'sleep 35' /dev/null",
        ],
    );
    assert_no_loss(&r);
    let rep = default_report(&r);
    let sleep = cert_by_argv(&rep, &["sleep", "35"]);
    assert_eq!(
        (sleep.cause.kind, sleep.rank),
        (CauseKind::TerminalInterrupt, Rank::Expected),
        "{}",
        sleep.headline
    );
    assert!(
        sleep
            .headline
            .contains("the terminal sent SIGINT (^C) to its foreground process group"),
        "{}",
        sleep.headline
    );
    assert!(render_markdown(&rep).contains("| its terminal (^C) |"));
}

#[test]
fn alarm_is_the_victims_own_timer_whoever_held_the_cpu() {
    // A busy loop shares the CPU with the sleeper when its alarm fires: the
    // kernel fires the timer from whichever of them is running.
    let r = record(
        &[],
        &[
            "sh",
            "-c",
            "taskset -c 0 sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done' & \
             taskset -c 0 python3 -c 'import signal,time; signal.alarm(1); time.sleep(30)'; wait",
        ],
    );
    assert_no_loss(&r);
    let rep = default_report(&r);
    let c = rep
        .analysis
        .certificates
        .iter()
        .find(|c| c.cause.kind == CauseKind::OwnTimer)
        .unwrap_or_else(|| panic!("no own-timer death: {}", rep.verdict));
    assert!(
        c.headline.contains(
            "killed by SIGALRM: its own timer fired (alarm(2) or setitimer(ITIMER_REAL))"
        ),
        "{}",
        c.headline
    );
    let fatal = c.history.iter().find(|h| h.fatal).unwrap();
    assert_eq!(fatal.sender.pid, c.victim.process.pid);
    assert!(!c.headline.contains("from the kernel"), "{}", c.headline);
}

#[test]
fn setitimer_prof_and_a_posix_timer_are_own_timers() {
    let dir = tempfile::tempdir().unwrap();
    let py = dir.path().join("ptimer.py");
    std::fs::write(
        &py,
        r#"
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]
class itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", timespec), ("it_value", timespec)]
tid = ctypes.c_void_p()
assert libc.timer_create(0, None, ctypes.byref(tid)) == 0
assert libc.timer_settime(tid, 0, ctypes.byref(itimerspec(timespec(0, 0), timespec(0, 300_000_000))), None) == 0
time.sleep(30)
"#,
    )
    .unwrap();
    let py = py.to_str().unwrap();
    for (cmd, sig, which) in [
        (
            vec![
                "python3",
                "-c",
                "import signal\nsignal.setitimer(signal.ITIMER_PROF, 0.3)\nwhile True: pass",
            ],
            "SIGPROF",
            "setitimer(ITIMER_PROF)",
        ),
        (
            vec!["python3", py],
            "SIGALRM",
            "a POSIX timer, timer_create(2)",
        ),
    ] {
        let r = record(&[], &cmd);
        assert_no_loss(&r);
        let rep = default_report(&r);
        let c = rep
            .analysis
            .certificates
            .iter()
            .find(|c| c.cause.kind == CauseKind::OwnTimer)
            .unwrap_or_else(|| panic!("{cmd:?}: {}", rep.verdict));
        assert!(
            c.headline
                .contains(&format!("killed by {sig}: its own timer fired ({which})")),
            "{}",
            c.headline
        );
    }
}

#[test]
fn a_script_whose_interpreter_is_missing_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.py");
    std::fs::write(&script, "#!/nonexistent/python\nprint(1)\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let r = record(&[], &[script.to_str().unwrap()]);
    // As bash and dash exit for it (`bash -c ./bad.py; echo $?` says 127).
    assert_eq!(r.code(), Some(127), "{}", r.stderr());
    assert!(
        r.stderr()
            .contains("its interpreter /nonexistent/python (the script's `#!` line) was not found"),
        "{}",
        r.stderr()
    );
    let rep = default_report(&r);
    let c = &rep.analysis.certificates[0];
    assert_eq!(c.cause.kind, CauseKind::NotRun);
    assert!(
        c.headline.contains(
            "failed: its interpreter /nonexistent/python (the script's `#!` line) was not found; \
             tracer exited 127, as a shell does for a script whose interpreter is missing"
        ),
        "{}",
        c.headline
    );
}
