//! "What to do next" (report/next_step.rs, docs/report.md) on real
//! captures: each class tracer recognises with certainty gives its line
//! under the verdict in report.json, report.md, report.html and the stderr
//! summary; an ordinary crash, a shell's own cleanup, an OOM without
//! samples and a hang on a pipe give none.
use std::path::Path;

use tracer_user::report::{
    html::{self, Context},
    next_step::{Advice, NextStep},
    summary, Report,
};

use crate::common::fixture_report;

/// The fixture's advice, checked to reach every renderer.
fn next(name: &str) -> (Report, NextStep) {
    let r = fixture_report(name);
    let n = r
        .next_step
        .clone()
        .unwrap_or_else(|| panic!("{name}: no next step under: {}", r.verdict));
    let md = tracer_user::report::render_markdown(&r);
    let md_line = md
        .lines()
        .find(|l| l.starts_with("**Next:** "))
        .unwrap_or_else(|| panic!("{name}: no Next line in report.md:\n{md}"));
    let before: Vec<&str> = md.split("**Next:** ").next().unwrap().lines().collect();
    assert!(
        before.iter().all(|l| !l.starts_with("**Run:**")),
        "{name}: the line is right under the verdict:\n{md}"
    );
    assert_eq!(
        md_line,
        format!("**Next:** {}", tracer_user::text::markdown::inline(&n.line)),
        "{name}"
    );
    let page = html::render(&r, &Context::default());
    let want = format!(
        "<p class=\"next-step\"><strong>Next:</strong> {}</p>",
        tracer_user::text::html::inline(&n.line)
    );
    assert!(page.contains(&want), "{name}: report.html");
    let text = summary(&r, Path::new("out/report.md"), Path::new("out/report.json"));
    assert_eq!(
        text.lines().nth(1).map(|l| l.starts_with("tracer: next: ")),
        Some(true),
        "{name}: the summary's second line:\n{text}"
    );
    (r, n)
}

fn none(name: &str) {
    let r = fixture_report(name);
    assert_eq!(r.next_step, None, "{name}: {}", r.verdict);
    let md = tracer_user::report::render_markdown(&r);
    assert!(!md.contains("**Next:**"), "{name}:\n{md}");
}

/// The seed: a test signals 4242 (a sibling fork's group), 4343 (outside
/// the run) and 4141, which did not exist.
#[test]
fn a_test_signalling_pids_it_never_spawned_is_told_to_mock_the_kill() {
    let (r, n) = next("seed000_group_kill");
    let Advice::UnspawnedPids {
        sender,
        hit,
        missing,
        certificates,
        evidence,
    } = &n.advice
    else {
        panic!("{n:?}")
    };
    assert_eq!(sender.argv, ["node", "runner-session.test"]);
    assert_eq!(
        (hit.as_slice(), missing.as_slice()),
        ([-4242, 4343].as_slice(), [4141].as_slice())
    );
    let first = &r.analysis.certificates[0];
    assert_eq!(certificates.first(), Some(&first.id));
    assert!(!evidence.is_empty());
    assert!(
        n.line.starts_with("`node runner-session.test` (pid 4100) signals pids it never spawned: it killed process group 4242 (a sibling) and pid 4343 (outside the run); pid 4141 did not exist"),
        "{}",
        n.line
    );
    assert!(n
        .line
        .ends_with("mock the kill, or signal only pids you spawned"));
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["next_step"]["advice"]["kind"], "unspawned_pids");
}

/// A kill by a pid the sender did get from a process it knew (no call of
/// it ever found no process) is not the class: a parent's kill, or one
/// aimed at a sibling by a pid that always existed.
#[test]
fn a_kill_without_a_missing_pid_is_no_unspawned_pid() {
    for name in ["real_outside_kill", "real_truth_kill_outside"] {
        none(name);
    }
}

#[test]
fn a_pkill_f_that_matched_a_sibling_is_told_to_anchor_its_pattern() {
    let (r, n) = next("real_caught_pkill_node");
    let Advice::PkillPattern {
        pkill,
        pattern,
        certificates,
        ..
    } = &n.advice
    else {
        panic!("{n:?}")
    };
    assert_eq!(pkill.argv, ["pkill", "-TERM", "-f", "pkill-target-h1x"]);
    assert_eq!(pattern, "pkill-target-h1x");
    assert_eq!(certificates, &[r.analysis.certificates[0].id]);
    assert!(n.line.contains("a sibling: its pattern `pkill-target-h1x` matched that command line — anchor the pattern, or kill by pid"), "{}", n.line);
}

/// `pkill -f` from inside the run matching the tracer's own command line.
#[test]
fn a_pkill_f_that_matched_the_tracer_is_told_to_anchor_its_pattern() {
    let (_, n) = next("real_truth_pkill_tracer");
    assert!(matches!(n.advice, Advice::PkillPattern { .. }), "{n:?}");
    assert!(
        n.line.contains(
            "signalled `[tracer]` (pid 5974) and `[tracer-watchdog]` (pid 5979), outside the run"
        ),
        "{}",
        n.line
    );
}

/// `bash -c 'sleep 30.5 & python3 -c "…os.kill(0, signal.SIGTERM)"; wait'`:
/// Python's kill(0) kills itself, its sibling and the shell above it.
#[test]
fn a_kill_of_the_callers_own_group_is_told_to_use_a_group_of_its_own() {
    let (r, n) = next("real_nextstep_own_group_kill");
    let Advice::OwnGroupKill {
        sender,
        call,
        certificates,
        evidence,
    } = &n.advice
    else {
        panic!("{n:?}")
    };
    assert!(sender.argv[0].ends_with("python3"), "{:?}", sender.argv);
    assert_eq!(call, "kill(0, SIGTERM)");
    assert_eq!(certificates.len(), 3, "python3, sleep and bash");
    assert_eq!(r.analysis.counts.unexpected, 3);
    assert_eq!(evidence.len(), 1);
    assert!(
        n.line.contains(
            "signalled its own process group with kill(0, SIGTERM), which killed `sleep 30.5`"
        ),
        "{}",
        n.line
    );
}

/// A shell's `kill 0` (its `trap 'kill 0' EXIT` cleanup) kills only what
/// it owns and is expected: no advice.
#[test]
fn a_shells_own_cleanup_gets_no_advice() {
    for name in ["real_field_kill0", "real_truth_trap_kill0"] {
        none(name);
    }
}

#[test]
fn a_leaked_daemon_holding_the_socket_is_told_to_be_stopped_in_teardown() {
    let (_, n) = next("real_field_hang_socket_daemon");
    let Advice::LeakedDaemon {
        daemon_pid,
        waiter_pid,
        fd,
        socket,
        syscall,
        ..
    } = &n.advice
    else {
        panic!("{n:?}")
    };
    assert_eq!(
        (
            *daemon_pid,
            *waiter_pid,
            *fd,
            socket.as_str(),
            syscall.as_str()
        ),
        (30869, 30827, 3, "unix socket", "recvfrom")
    );
    assert!(
        n.line.starts_with("stop `python3 sockhang.py /tmp/rc/sc/d.sock` (pid 30869) in the teardown of the test that started it"),
        "{}",
        n.line
    );
}

/// A reader held by a leaked writer of a pipe is a hang, but not a daemon
/// holding a socket: its class is not this one.
#[test]
fn a_pipe_held_by_a_leaked_writer_is_not_a_daemon() {
    none("real_field_hang_leaked_writer");
}

#[test]
fn an_oom_kill_with_its_largest_process_is_told_to_raise_the_limit_or_cut_it() {
    let (r, n) = next("real_resources_leak");
    let Advice::OomTopConsumer {
        certificate,
        limit_bytes,
        pid,
        comm,
        ..
    } = &n.advice
    else {
        panic!("{n:?}")
    };
    assert_eq!(*certificate, r.analysis.certificates[0].id);
    assert_eq!(
        (*limit_bytes, *pid, comm.as_str()),
        (96 << 20, 29284, "python3")
    );
    assert!(
        n.line.starts_with("raise the memory limit of `v1:/manual-5002` (96 MiB), or cut the memory of `python3` (pid 29284)"),
        "{}",
        n.line
    );
    // The growth from the leaker's first sample to the last (the RSS it
    // names), not over the window to the kill (5.3 s).
    assert!(
        n.line.ends_with("(101.2 MiB, +99.9 MiB in 5.2 s)"),
        "{}",
        n.line
    );
}

/// An OOM kill with no samples of the run's memory: the largest process is
/// not known, so no advice names one.
#[test]
fn an_oom_kill_without_samples_gets_no_advice() {
    for name in ["real_memcg_oom", "oom"] {
        none(name);
    }
}

/// An ordinary crash and a non-zero exit have no remedy tracer knows.
#[test]
fn an_ordinary_crash_gets_no_advice() {
    for name in ["real_segv", "crashes", "real_sigterm_exit3", "exits"] {
        none(name);
    }
}
