//! The kernel-cause and hang rules on logs captured from the real kernel
//! (tests/fixtures/real_field_*.ndjson, recorded by the scenarios of the
//! kernel tests' kernel_causes and hangs::explained): no root needed, so every
//! rule is checked on every machine.
use std::path::PathBuf;

use tracer_user::{
    analysis::{CauseKind, Certificate, LinkEvidence, LinkVia, MechanismKind, Rank},
    eventlog::read_log,
    report::{build_report, Report, ReportOptions},
};

fn report(name: &str) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("real_field_{name}.ndjson"));
    build_report(&read_log(&path).unwrap(), &ReportOptions::default())
}

/// The certificate of the process whose argv[0] ends with `program`.
fn cert<'a>(r: &'a Report, program: &str) -> &'a Certificate {
    r.analysis
        .certificates
        .iter()
        .find(|c| {
            c.victim
                .process
                .argv
                .first()
                .is_some_and(|a| a.ends_with(program))
        })
        .unwrap_or_else(|| panic!("no certificate for {program}: {}", r.verdict))
}

fn mech(c: &Certificate) -> (MechanismKind, &tracer_user::analysis::Mechanism) {
    let m = c.cause.mechanism.as_ref().expect("a mechanism");
    (m.kind, m)
}

#[test]
fn sigpipe_of_yes_head_is_expected_with_head_as_reader() {
    let r = report("sigpipe_head");
    let c = cert(&r, "yes");
    assert_eq!((c.cause.kind, c.rank), (CauseKind::Sigpipe, Rank::Expected));
    let (kind, m) = mech(c);
    assert_eq!(kind, MechanismKind::PipeReaderGone);
    assert_eq!(m.process.as_ref().unwrap().argv, ["head", "-1"]);
    assert!(c.evidence.len() >= 4, "the reader's exit is evidence too");
    assert_eq!(r.verdict, "No unexpected deaths.");
}

#[test]
fn sigpipe_after_the_reader_died_follows_from_the_reader() {
    let r = report("sigpipe_reader_died");
    let c = cert(&r, "yes");
    // The reader's crash is the root cause (counted once); the writer's
    // SIGPIPE follows from it.
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::Sigpipe, Rank::Consequence)
    );
    let reader = cert(&r, "python3");
    assert_eq!(reader.rank, Rank::Unexpected);
    let link = c.consequence_of.as_ref().expect("linked to the reader");
    assert_eq!(
        (link.of, link.via, link.evidence),
        (reader.id, LinkVia::PipeReader, LinkEvidence::PipeReader)
    );
    assert_eq!(r.analysis.counts.unexpected, 1, "{}", r.verdict);
    assert!(
        mech(c).1.process.as_ref().unwrap().argv[0].ends_with("python3"),
        "the sibling reader, not the parent shell"
    );
    assert!(
        c.headline.contains("was killed by SIGABRT"),
        "{}",
        c.headline
    );
}

#[test]
fn timeout_fired_ranks_with_non_zero_exits_and_its_victim_is_expected() {
    let r = report("timeout");
    let t = cert(&r, "timeout");
    assert_eq!(
        (t.cause.kind, t.rank),
        (CauseKind::TimeoutFired, Rank::NonzeroExit)
    );
    assert!(
        t.headline.ends_with("its time limit fired after 502 ms and stopped its command `sleep 10` (pid 10635) with SIGTERM"),
        "{}",
        t.headline
    );
    let s = cert(&r, "sleep");
    assert_eq!(s.rank, Rank::Expected);
    assert_eq!(mech(s).0, MechanismKind::Timeout);
    assert!(r.verdict.contains("its time limit fired"), "{}", r.verdict);

    let k = report("timeout_kill");
    let t = cert(&k, "timeout");
    assert_eq!(t.cause.kind, CauseKind::TimeoutFired);
    assert!(
        t.headline.contains("from its own kill(0, SIGKILL)"),
        "{}",
        t.headline
    );
    assert_eq!(k.analysis.counts.unexpected, 0);
}

#[test]
fn kill_zero_is_a_kill_of_its_own_group() {
    let r = report("kill0");
    let c = cert(&r, "bash");
    assert_eq!(c.cause.kind, CauseKind::OwnGroupKill);
    assert_eq!(c.killer.as_ref().unwrap().call, "kill(0, SIGTERM)");
    assert!(!c.headline.contains("abort"), "{}", c.headline);
}

#[test]
fn cgroup_kill_is_named_not_an_uncaptured_call_nor_a_parent_death_signal() {
    let r = report("cgroup_kill");
    let c = cert(&r, "sleep");
    assert_eq!(c.cause.kind, CauseKind::KilledInRun, "{}", c.headline);
    assert_eq!(mech(c).0, MechanismKind::CgroupKill);
    assert_eq!(
        c.killer.as_ref().unwrap().call,
        "a write to cgroup.kill (no kill syscall)"
    );
    assert_eq!(c.rank, Rank::Expected, "its parent's SIGKILL");
}

/// On a log that lost events the same signal could have come from a
/// missed syscall: the report must say so instead of naming cgroup.kill.
#[test]
fn cgroup_kill_is_not_claimed_on_a_lossy_log() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/real_field_cgroup_kill.ndjson");
    let mut log = read_log(&path).unwrap();
    log.trailer.as_mut().unwrap().lost.inflight_map_full = 1;
    let r = build_report(&log, &ReportOptions::default());
    let c = cert(&r, "sleep");
    // Still not a parent-death signal: that is a thread-group signal.
    assert_eq!(c.cause.kind, CauseKind::KilledInRun);
    assert!(c.cause.mechanism.is_none(), "{:?}", c.cause.mechanism);
    assert!(
        c.killer
            .as_ref()
            .unwrap()
            .call
            .starts_with("an uncaptured call"),
        "{}",
        c.headline
    );
}

#[test]
fn rlimits_are_named() {
    let r = report("rlimit_fsize");
    let c = cert(&r, "head");
    assert_eq!(c.cause.kind, CauseKind::Rlimit);
    assert_eq!(mech(c).1.limit.as_deref(), Some("RLIMIT_FSIZE"));
    assert!(c.killer.is_none(), "no process to blame: {}", c.headline);

    let r = report("rlimit_cpu");
    let c = cert(&r, "python3");
    assert_eq!(c.cause.kind, CauseKind::Rlimit);
    assert_eq!(mech(c).1.limit.as_deref(), Some("RLIMIT_CPU"));
    assert!(
        c.headline.contains("after SIGXCPU at the soft limit"),
        "{}",
        c.headline
    );
}

#[test]
fn seccomp_names_the_syscall_and_strict_mode_the_kernel_exit() {
    let r = report("seccomp");
    let c = cert(&r, "python3");
    assert_eq!(c.cause.kind, CauseKind::Seccomp);
    assert_eq!(mech(c).1.syscall.as_deref(), Some("getpid"));
    assert_eq!(c.cause.signal.as_ref().unwrap().code_name, "SYS_SECCOMP");

    let r = report("seccomp_strict");
    let c = cert(&r, "python3");
    assert_eq!(c.cause.kind, CauseKind::KernelExit);
    assert_eq!(mech(c).0, MechanismKind::NoSignal);
    assert!(r.log.complete, "the rule holds only on a complete log");
}

#[test]
fn terminal_hangup_names_the_closer() {
    let r = report("tty_hangup");
    let c = cert(&r, "sleep");
    assert_eq!(c.cause.kind, CauseKind::TerminalHangup);
    assert!(mech(c).1.process.as_ref().unwrap().argv[0].ends_with("python3"));
    assert_eq!(c.rank, Rank::Expected);
}

#[test]
fn parent_death_signal_by_a_thread_says_the_parent_lived_on() {
    let r = report("pdeath_thread");
    let c = cert(&r, "sleep");
    assert_eq!(c.cause.kind, CauseKind::ParentDeathSignal);
    let (kind, m) = mech(c);
    assert_eq!(kind, MechanismKind::ParentThreadExit);
    assert_eq!(m.thread, Some(c.killer.as_ref().unwrap().tid));
    assert_eq!(c.rank, Rank::Unexpected);
    assert!(!c.headline.contains("as its parent"), "{}", c.headline);
}

fn finding<'a>(r: &'a Report, kind: &str) -> &'a tracer_user::snapshot::Finding {
    r.snapshots[0]
        .snapshot
        .findings
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {kind}: {:#?}", r.snapshots[0].snapshot.findings))
}

#[test]
fn hangs_explain_themselves_from_the_log() {
    let r = report("hang_leaked_writer");
    let f = finding(&r, "held_by_leaked");
    assert!(f.detail.contains("(sleep 100, fd 1;"), "{}", f.detail);
    let o = finding(&r, "orphaned");
    assert_eq!(o.pid, f.related_pids[0]);
    assert!(
        r.verdict.contains("held only by a leaked process"),
        "{}",
        r.verdict
    );

    let r = report("hang_stopped");
    let f = finding(&r, "stopped");
    assert!(
        f.detail.contains("stopped by SIGSTOP from `bash -c"),
        "{}",
        f.detail
    );
    assert!(r.verdict.contains("is stopped (state T)"), "{}", r.verdict);

    let r = report("hang_frozen");
    let f = finding(&r, "frozen");
    assert!(
        f.detail.contains("cgroup v2 /sys/fs/cgroup/unified/"),
        "{}",
        f.detail
    );
}

#[test]
fn pidfd_calls_are_resolved_when_they_delivered() {
    let r = report("pidfd");
    let c = cert(&r, "sleep");
    assert_eq!(
        c.killer.as_ref().unwrap().aimed_at,
        format!("pid {} through pidfd 3", c.victim.process.pid)
    );
    assert_eq!(r.analysis.near_misses[0].aimed_at, "pidfd 4 (unresolved)");
}

/// A client blocked on a unix socket whose other end a detached daemon
/// holds (recorded from the kernel tests' hangs::explained scenario): the
/// finding is derived from the log's snapshot and leads the verdict.
#[test]
fn a_socket_held_by_a_detached_daemon_explains_the_hang() {
    let r = report("hang_socket_daemon");
    let f = finding(&r, "held_by_leaked");
    assert!(
        f.detail.contains("reading a unix socket (fd 3) whose other end is held only by a leaked or detached process")
            // setsid, then a fork: the session is its exited parent's,
            // which the snapshot shows (sid 30868), not its own.
            && f.detail.contains("detached: session 30868, not the run's")
            && f.detail.contains(", in clock_nanosleep)"),
        "{}",
        f.detail
    );
    assert!(
        r.verdict.starts_with("Timed out while blocked: ") && r.verdict.contains("unix socket"),
        "{}",
        r.verdict
    );
}

/// `python3 gen.py | head -n 3` through pyenv's shim (bash execs pyenv,
/// pyenv-exec, then python3, running `pyenv-hooks` as children first),
/// captured on a loaded machine where the kernel reported head's exit just
/// after python3's SIGPIPE: the reader is head, not a shim helper that
/// ended before the writer became python3.
#[test]
fn a_pyenv_shims_helper_is_not_the_reader_of_what_python_wrote() {
    let r = report("sigpipe_pyenv_shim");
    let c = cert(&r, "python3");
    assert_eq!((c.cause.kind, c.rank), (CauseKind::Sigpipe, Rank::Expected));
    let (kind, m) = mech(c);
    assert_eq!(kind, MechanismKind::PipeReaderGone);
    assert_eq!(m.process.as_ref().unwrap().argv, ["head", "-n", "3"]);
}
