//! The verdict tells the whole truth, over logs captured from the real
//! kernel with the real programs (tests/fixtures/real_truth_*.ndjson, each
//! recorded by `tracer record` running the scenario its test names): a
//! kill that left the run leads it, a pid namespace's end is not a kernel
//! mystery, a SIGKILL says which request to stop it followed, a shell's
//! cleanup is expected, a `pkill` of the tracer is no cancellation, ^C and
//! timers are named, and a missing interpreter is. No root needed.
use crate::records::Records;
use std::path::PathBuf;

use crate::common::{cert, fixture_report};
use tracer_user::{
    analysis::{CauseKind, Certificate, LinkEvidence, LinkVia, MechanismKind, Rank},
    eventlog::read_log,
    report::{build_report, render_markdown, Report, ReportOptions},
};

fn report(name: &str) -> Report {
    fixture_report(&format!("real_truth_{name}"))
}

fn mechanism(c: &Certificate) -> MechanismKind {
    c.cause
        .mechanism
        .as_ref()
        .unwrap_or_else(|| panic!("no mechanism: {}", c.headline))
        .kind
}

/// `sleep 300 & tracer record -- sh -c "kill -9 $!"`: the run killed a
/// process outside it. Line 1 says so, never "No unexpected deaths." alone.
#[test]
fn a_kill_that_left_the_run_leads_the_verdict() {
    let r = report("kill_outside");
    let f = r
        .analysis
        .foreign_signals
        .iter()
        .find(|f| f.outbound_kill)
        .expect("the outbound SIGKILL");
    assert_eq!(f.signal.sig_name, "SIGKILL");
    assert!(!f.target_is_tracer);
    assert_eq!(
        r.verdict,
        format!(
            "`sh -c sleep .2; kill -9 {t}; sleep .2` (pid {s}) in the run sent SIGKILL to \
             `[sleep]` (pid {t}), outside the run, via kill({t}, SIGKILL). Inside the run: no \
             unexpected deaths.",
            t = f.target.pid,
            s = f.sender.pid
        )
    );
    assert_eq!(render_markdown(&r).lines().next().unwrap(), r.verdict);
}

/// `unshare --pid --fork sh -c 'sleep 100 & sleep 0.3; exit 0'`: the init
/// exits 0 and the kernel kills the sleep it left.
#[test]
fn a_pid_namespace_teardown_after_a_normal_end_is_expected() {
    let r = report("ns_teardown_ok");
    let c = cert(&r, &["sleep", "100"]);
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::PidNamespaceTeardown, Rank::Expected)
    );
    assert_eq!(mechanism(c), MechanismKind::PidNamespaceTeardown);
    let init = c
        .cause
        .mechanism
        .as_ref()
        .unwrap()
        .process
        .as_ref()
        .unwrap();
    assert_eq!(init.ns_pid.map(|n| n.pid), Some(1));
    assert!(
        c.headline.contains(&format!(
            "still running when its pid namespace's init `sh -c sleep 100 & sleep 0.3; exit 0` \
             (pid {}, pid 1 in its namespace) exited with code 0",
            init.pid
        )),
        "{}",
        c.headline
    );
    assert!(!c.headline.contains("from the kernel"), "{}", c.headline);
    assert_eq!(r.verdict, "No unexpected deaths.");
}

/// The same with `exit 3`: the init's failure is the root, the teardown
/// and unshare's exit 3 follow from it.
#[test]
fn a_pid_namespace_teardown_after_a_failure_follows_from_it() {
    let r = report("ns_teardown_fail");
    let init = cert(&r, &["sh", "-c"]);
    let sleep = cert(&r, &["sleep", "100"]);
    let unshare = cert(&r, &["unshare"]);
    assert_eq!(init.rank, Rank::NonzeroExit);
    for c in [sleep, unshare] {
        assert_eq!(c.rank, Rank::Consequence, "{}", c.headline);
        assert_eq!(c.consequence_of.as_ref().unwrap().of, init.id);
    }
    let l = sleep.consequence_of.as_ref().unwrap();
    assert_eq!(
        (l.via, l.evidence),
        (LinkVia::NamespaceInit, LinkEvidence::PidNamespace)
    );
    assert_eq!(r.analysis.counts.unexpected, 0);
    assert!(
        r.verdict.starts_with(&format!(
            "No unexpected deaths; 1 non-zero exit: {}",
            init.headline
        )),
        "{}",
        r.verdict
    );
}

/// The init SIGKILLed by `pkill -9 -P`: the kill is the root; what was in
/// its namespace went down with it.
#[test]
fn a_killed_init_takes_its_namespace_down_as_consequences() {
    let r = report("ns_init_killed");
    let init = cert(&r, &["sh", "-c", "sleep 100 & sleep 30"]);
    assert_eq!(init.rank, Rank::Unexpected);
    for argv in [["sleep", "100"], ["sleep", "30"]] {
        let c = cert(&r, &argv);
        assert_eq!(
            (c.cause.kind, c.rank),
            (CauseKind::PidNamespaceTeardown, Rank::Consequence),
            "{}",
            c.headline
        );
        assert_eq!(c.consequence_of.as_ref().unwrap().root, init.id);
    }
    assert_eq!(r.analysis.counts.unexpected, 1, "{}", r.verdict);
}

/// A SIGTERM caught (a Python handler) and, 2 s later, the same sender's
/// SIGKILL: the headline says the SIGKILL followed a survived SIGTERM.
#[test]
fn a_sigkill_after_a_caught_sigterm_says_so() {
    let r = report("sigkill_after_term_caught");
    let c = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.rank == Rank::Unexpected)
        .unwrap();
    let k = c.killer.as_ref().unwrap();
    assert!(
        c.headline.ends_with(&format!(
            "via kill({}, SIGKILL), 2.0 s after a SIGTERM from pid {} that it caught and survived",
            c.victim.process.pid, k.process.pid
        )),
        "{}",
        c.headline
    );
}

/// The same with the SIGTERM ignored (`trap "" TERM` before exec).
#[test]
fn a_sigkill_after_an_ignored_sigterm_says_so() {
    let r = report("sigkill_after_term_ignored");
    let c = cert(&r, &["sleep", "30.5"]);
    assert!(
        c.headline.contains("2.0 s after a SIGTERM from pid ")
            && c.headline.ends_with("that it ignored"),
        "{}",
        c.headline
    );
}

/// `bash -c "trap 'kill 0' EXIT; sleep 30.1 & sleep 0.3"`: bash's own group
/// kill reaches it, it catches it while the trap runs and re-raises it.
/// Cleanup, not "killed by itself".
#[test]
fn trap_kill_0_exit_is_a_shells_cleanup() {
    let r = report("trap_kill0");
    let bash = cert(&r, &["bash", "-c"]);
    assert_eq!(
        (bash.cause.kind, bash.rank),
        (CauseKind::OwnGroupKill, Rank::Expected)
    );
    assert_eq!(bash.killer.as_ref().unwrap().call, "kill(0, SIGTERM)");
    assert!(
        bash.cause.reraised.is_some(),
        "the re-raise is kept: {:?}",
        bash.cause
    );
    assert!(
        bash.headline.contains("from its own kill(0, SIGTERM)")
            && bash.headline.contains("the shell's cleanup of its jobs")
            && !bash.headline.contains("abort"),
        "{}",
        bash.headline
    );
    assert_eq!(cert(&r, &["sleep", "30.1"]).rank, Rank::Expected);
    assert_eq!(r.verdict, "No unexpected deaths.");
}

/// `trap 'kill $(jobs -p)' EXIT` with a subshell job: the job is stopped
/// by its parent, nobody by itself.
#[test]
fn trap_kill_jobs_exit_is_an_orderly_stop() {
    let r = report("trap_kill_jobs");
    assert_eq!(r.analysis.counts.unexpected, 0, "{}", r.verdict);
    for c in &r.analysis.certificates {
        assert_eq!(c.rank, Rank::Expected, "{}", c.headline);
        assert!(!c.headline.contains("by itself"), "{}", c.headline);
    }
}

/// `sh -c 'sleep 30.3 & …; pkill -TERM -f "debug/[t]racer record …"'`: the
/// run SIGTERMed the tracer, which forwarded it as it does a cancellation.
/// Not a CI cancellation: the sender is named, the verdict leads with it,
/// the forwarded kills are unexpected.
#[test]
fn a_pkill_of_the_tracer_from_inside_is_no_cancellation() {
    let r = report("pkill_tracer");
    let to_tracer = r
        .analysis
        .foreign_signals
        .iter()
        .find(|f| f.target_is_tracer)
        .expect("pkill's SIGTERM to the tracer");
    assert!(to_tracer.outbound_kill);
    assert_eq!(to_tracer.sender.argv[0], "pkill");
    assert!(
        r.verdict.starts_with(&format!(
            "`pkill -TERM -f debug/[t]racer record --output out/pkilltrac…` (pid{}",
            // Clipped to fit 300 characters: its pid may be the cut.
            if r.verdict
                .contains(&format!("(pid {}", to_tracer.sender.pid))
            {
                format!(" {}", to_tracer.sender.pid)
            } else {
                "…".to_string()
            }
        )),
        "{}",
        r.verdict
    );
    assert!(
        r.verdict.contains("no CI cancellation") && !r.verdict.contains("Cancelled"),
        "{}",
        r.verdict
    );
    let sleep = cert(&r, &["sleep", "30.3"]);
    assert_eq!(
        (sleep.cause.kind, sleep.rank),
        (CauseKind::Tracer, Rank::Unexpected)
    );
    assert!(!sleep.cause.cancelled);
    assert_eq!(
        sleep.cause.forwarded_from.as_ref().map(|p| p.pid),
        Some(to_tracer.sender.pid)
    );
    assert!(
        sleep
            .headline
            .contains("a process of the run, sent to the tracer (no CI cancellation)"),
        "{}",
        sleep.headline
    );
}

/// `script -qec "sleep 30.4"` fed a ^C: the tty sends SIGINT from a
/// kworker; the terminal is named, the kworker never is.
#[test]
fn ctrl_c_at_a_terminal_is_the_terminal_sending_sigint() {
    let r = report("ctrl_c");
    let sleep = cert(&r, &["sleep", "30.4"]);
    assert_eq!(
        (sleep.cause.kind, sleep.rank),
        (CauseKind::TerminalInterrupt, Rank::Expected)
    );
    assert!(
        sleep.headline.contains(
            "killed by SIGINT: the terminal sent SIGINT (^C) to its foreground process group"
        ),
        "{}",
        sleep.headline
    );
    assert!(!sleep.headline.contains("kworker"), "{}", sleep.headline);
    let md = render_markdown(&r);
    assert!(md.contains("| its terminal (^C) |"), "{md}");
    // script passes the 130 on: linked to the ^C, reported as the failure.
    let script = cert(&r, &["script"]);
    assert_eq!(script.rank, Rank::NonzeroExit);
    assert_eq!(script.consequence_of.as_ref().unwrap().of, sleep.id);
}

/// alarm(1) while a busy loop (another process) held the CPU: the kernel
/// fired the timer from a bystander, which the certificate never names.
#[test]
fn alarm_is_the_victims_own_timer_never_the_task_on_the_cpu() {
    let r = report("alarm");
    let c = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.cause.kind == CauseKind::OwnTimer)
        .expect("the alarm's victim");
    assert_eq!(c.rank, Rank::NonzeroExit);
    assert_eq!(mechanism(c), MechanismKind::Timer);
    assert!(
        c.headline.contains(
            "killed by SIGALRM: its own timer fired (alarm(2) or setitimer(ITIMER_REAL))"
        ),
        "{}",
        c.headline
    );
    let fatal = c.history.iter().find(|h| h.fatal).unwrap();
    assert_eq!(fatal.sender.pid, c.victim.process.pid, "its own timer");
    // The log's sender was somebody else entirely.
    let log = read_log(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_truth_alarm.ndjson"),
    )
    .unwrap();
    let logged = log
        .events
        .iter()
        .signals()
        .find(|s| s.sig == 14)
        .map(|s| s.sender.pid);
    assert_ne!(logged, Some(c.victim.process.pid));
    assert!(render_markdown(&r).contains("| its own timer (alarm(2) or setitimer(ITIMER_REAL)) |"));
}

#[test]
fn itimer_prof_and_a_posix_timer_are_own_timers() {
    for (name, sig, which) in [
        ("itimer_prof", "SIGPROF", "setitimer(ITIMER_PROF)"),
        ("posix_timer", "SIGALRM", "a POSIX timer, timer_create(2)"),
    ] {
        let r = report(name);
        let c = &r.analysis.certificates[0];
        assert_eq!(c.cause.kind, CauseKind::OwnTimer, "{name}: {}", c.headline);
        assert!(
            c.headline
                .contains(&format!("killed by {sig}: its own timer fired ({which})")),
            "{name}: {}",
            c.headline
        );
        let fatal = c.history.iter().find(|h| h.fatal).unwrap();
        assert_eq!(fatal.sender.pid, c.victim.process.pid, "{name}");
    }
}

/// `tracer record -- ./bad.py` with `#!/nonexistent/python`: the script
/// exists, its interpreter does not, and the certificate says which.
#[test]
fn a_missing_interpreter_is_named() {
    let r = report("bad_interpreter");
    let c = &r.analysis.certificates[0];
    assert_eq!(c.cause.kind, CauseKind::NotRun);
    assert!(
        c.headline.contains(
            "could not be run: executing `./bad.py` failed: its interpreter /nonexistent/python \
             (the script's `#!` line) was not found; tracer exited 126"
        ),
        "{}",
        c.headline
    );
    assert!(!c.headline.contains("No such file"), "{}", c.headline);
}

/// A daemon is stopped by the job it watches (ci/scripts/daemon-stop.sh's
/// `kill -TERM`): the same signal to the tracer is then no kill leaving the
/// run and no cancellation from inside it.
#[test]
fn a_signal_that_stops_a_daemon_is_neither_an_outbound_kill_nor_a_cancellation() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real_truth_pkill_tracer.ndjson");
    let mut log = read_log(&path).unwrap();
    log.header.mode = "daemon".into();
    let r = build_report(&log, &ReportOptions::default());
    assert!(
        r.analysis
            .foreign_signals
            .iter()
            .all(|f| !(f.target_is_tracer && f.outbound_kill)),
        "{:?}",
        r.analysis.foreign_signals
    );
    assert!(!r.verdict.contains("no CI cancellation"), "{}", r.verdict);
    let sleep = cert(&r, &["sleep", "30.3"]);
    assert!(sleep.cause.forwarded_from.is_none(), "{}", sleep.headline);
}

/// Every argv of a log made `extra` characters longer (each element).
fn long_argv(text: &str, extra: usize) -> String {
    fn walk(v: &mut serde_json::Value, pad: &str) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    if k == "argv" {
                        if let serde_json::Value::Array(a) = x {
                            for e in a.iter_mut() {
                                if let serde_json::Value::String(s) = e {
                                    s.push_str(pad);
                                }
                            }
                        }
                    } else {
                        walk(x, pad);
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(x, pad)),
            _ => {}
        }
    }
    let pad = format!(" {}", "y".repeat(extra));
    text.lines()
        .map(|l| match serde_json::from_str::<serde_json::Value>(l) {
            Ok(mut v) => {
                walk(&mut v, &pad);
                v.to_string() + "\n"
            }
            // A cut line (truncated.ndjson) stays as it is.
            Err(_) => l.to_string() + "\n",
        })
        .collect()
}

/// report.md's first line is the verdict alone, at most 300 characters,
/// over every fixture as captured and with every argv 2,000 characters
/// longer (issue 25: a step summary shows line 1 whole).
#[test]
fn every_verdict_fits_a_step_summary_line() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let tmp = tempfile::tempdir().unwrap();
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    names.sort();
    assert!(names.len() > 50, "{} fixtures", names.len());
    let (mut longest, mut longest_long) = (0, 0);
    for path in &names {
        let text = std::fs::read_to_string(path).unwrap();
        let long = tmp.path().join(path.file_name().unwrap());
        std::fs::write(&long, long_argv(&text, 2000)).unwrap();
        for (p, max) in [(path, &mut longest), (&long, &mut longest_long)] {
            let r = build_report(&read_log(p).unwrap(), &ReportOptions::default());
            let md = render_markdown(&r);
            let first = md.lines().next().unwrap();
            let n = first.chars().count();
            assert!(
                n <= tracer_user::text::MAX_VERDICT_CHARS,
                "{p:?}: {n}: {first}"
            );
            assert_eq!(
                md.lines().nth(1),
                Some(""),
                "{p:?}: the verdict is one line"
            );
            *max = (*max).max(n);
        }
    }
    eprintln!(
        "verdicts of {} fixtures: at most {longest} characters ({longest_long} with argv 2,000 longer)",
        names.len()
    );
}
