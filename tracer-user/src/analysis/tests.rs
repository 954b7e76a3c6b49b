//! The analysis against logs captured from a real kernel (6.18) by the
//! capture side, copied into tests/fixtures/real_*.ndjson.
use std::path::Path;

use super::*;
use crate::eventlog::read_log;

fn real(name: &str) -> Analysis {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    analyze(&read_log(&path).unwrap(), &AnalysisOptions::default()).1
}

fn only(a: &Analysis, rank: Rank) -> Vec<&Certificate> {
    a.certificates.iter().filter(|c| c.rank == rank).collect()
}

#[test]
fn real_process_group_kill_of_a_sibling() {
    let a = real("real_pgroup_kill.ndjson");
    let un = only(&a, Rank::Unexpected);
    assert_eq!(un.len(), 1);
    let k = un[0].killer.as_ref().unwrap();
    assert_eq!(k.relation, Relation::Sibling);
    assert_eq!(k.target_arg, Some(-i64::from(un[0].victim.process.pid)));
    assert!(
        un[0].headline.contains("a process-group kill of group"),
        "{}",
        un[0].headline
    );
    assert_eq!(a.near_misses.len(), 1);
    assert_eq!(
        (
            a.near_misses[0].target_arg,
            a.near_misses[0].errno.as_deref()
        ),
        (424242, Some("ESRCH"))
    );
    // The pyenv shim exec'd the root several times; all execs are kept. Its
    // exit 1, 23 ms after its worker was killed, follows from that kill.
    let root = a
        .certificates
        .iter()
        .find(|c| c.rank == Rank::Consequence)
        .unwrap();
    assert_eq!(root.consequence_of.as_ref().map(|l| l.of), Some(un[0].id));
    assert!(root.victim.execs.len() >= 5, "{}", root.victim.execs.len());
    assert_eq!(
        root.victim.process.argv.last().map(String::as_str),
        Some("/tmp/seed0.py")
    );
}

#[test]
fn real_memcg_oom_where_the_victim_was_allocating() {
    let a = real("real_memcg_oom.ndjson");
    let c = only(&a, Rank::Unexpected)[0];
    assert_eq!(c.cause.kind, CauseKind::Oom);
    let o = c.oom.as_ref().unwrap();
    assert!(o.trigger_is_victim);
    assert_eq!(o.limit_bytes, Some(64 << 20));
    assert_eq!(c.victim.process.argv[0], "dd");
    assert!(c.killer.is_none());
}

/// A tracer in a pid namespace logs OOM victims as tid 0 (the kernel names
/// them by host pid): the kernel's SIGKILL alone must still name the victim.
#[test]
fn oom_victim_unnamed_by_pid_is_paired_by_its_sigkill() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_memcg_oom.ndjson");
    let mut log = read_log(&path).unwrap();
    for e in &mut log.events {
        if let crate::eventlog::Record::Oom(o) = e {
            o.victim_tid = 0;
        }
    }
    let a = analyze(&log, &AnalysisOptions::default()).1;
    let c = only(&a, Rank::Unexpected)[0];
    assert_eq!(c.cause.kind, CauseKind::Oom);
    assert_eq!(c.victim.process.argv[0], "dd");
}

#[test]
fn real_shell_stopping_its_child_is_expected() {
    let a = real("real_sigterm_exit3.ndjson");
    let child = only(&a, Rank::Expected)[0];
    assert_eq!(child.killer.as_ref().unwrap().relation, Relation::Parent);
    assert!(
        child.victim.process.argv_inherited,
        "killed before it could exec sleep"
    );
    assert!(
        child.headline.contains("a fork that never exec'd"),
        "{}",
        child.headline
    );
    assert_eq!(
        a.counts,
        DeathCounts {
            unexpected: 0,
            nonzero_exit: 1,
            consequence: 0,
            expected: 1
        }
    );
}

#[test]
fn real_segv_sent_by_kill_is_not_a_fault() {
    let a = real("real_segv.ndjson");
    let kinds: Vec<CauseKind> = only(&a, Rank::Unexpected)
        .iter()
        .map(|c| c.cause.kind)
        .collect();
    assert_eq!(kinds, [CauseKind::SelfInflicted, CauseKind::Fault]);
}

fn cert_where(a: &Analysis, kind: CauseKind) -> &Certificate {
    let found: Vec<&Certificate> = a
        .certificates
        .iter()
        .filter(|c| c.cause.kind == kind)
        .collect();
    assert_eq!(found.len(), 1, "one {kind:?} certificate");
    found[0]
}

#[test]
fn real_rust_segfault_dies_of_the_second_sigsegv() {
    // Rust's stack-overflow handler catches the first SIGSEGV, finds no
    // guard-page hit, restores the default action and returns: the access
    // faults again and that second SIGSEGV kills.
    let a = real("real_rust_segv.ndjson");
    let c = cert_where(&a, CauseKind::Fault);
    assert_eq!(c.rank, Rank::Unexpected);
    let hist: Vec<(&str, &str, bool)> = c
        .history
        .iter()
        .map(|h| {
            (
                h.signal.sig_name.as_str(),
                h.signal.code_name.as_str(),
                h.fatal,
            )
        })
        .collect();
    assert_eq!(
        hist,
        [
            ("SIGSEGV", "SEGV_MAPERR", false),
            ("SIGSEGV", "SEGV_MAPERR", true)
        ]
    );
    assert_eq!(
        c.cause.signal.as_ref().unwrap().seq,
        c.history[1].signal.seq
    );
    assert!(c.killer.is_none());
}

#[test]
fn real_tgkill_at_a_thread_ends_the_process() {
    let a = real("real_tgkill.ndjson");
    let c = cert_where(&a, CauseKind::KilledInRun);
    let k = c.killer.as_ref().unwrap();
    let sig = c.cause.signal.as_ref().unwrap();
    let (pid, tid) = (c.victim.process.pid, sig.target_tid);
    assert_ne!(pid, tid, "aimed at a non-leader thread");
    assert!(!sig.group);
    assert_eq!(sig.code_name, "SI_TKILL");
    assert_eq!(k.relation, Relation::Sibling);
    assert_eq!(
        (k.syscall.as_deref(), k.target_arg, k.tid_arg),
        (Some("tgkill"), Some(i64::from(pid)), Some(i64::from(tid)))
    );
    assert!(
        c.headline.ends_with(&format!(
            "via tgkill({pid}, {tid}, SIGKILL) — aimed at thread {tid}, which took the whole \
             process down"
        )),
        "{}",
        c.headline
    );
    assert_eq!(c.victim.threads, 3);
}

#[test]
fn real_last_words_are_quoted_when_no_signal_is_involved() {
    let a = real("real_last_words.ndjson");
    let c = cert_where(&a, CauseKind::NonzeroExit);
    let lw = c.last_words.as_ref().expect("last words");
    let error = "TypeError: Cannot read properties of undefined (reading 'port')";
    assert_eq!(lw.line.as_deref(), Some(error));
    assert_eq!(lw.text.lines().count(), 26);
    assert!(!lw.truncated);
    assert!(c.evidence.contains(&lw.seq));
    assert!(
        c.headline
            .ends_with(&format!("no signal involved — last words: `{error}`")),
        "{}",
        c.headline
    );
}

#[test]
fn real_outside_kill_names_the_outsider() {
    let a = real("real_outside_kill.ndjson");
    let c = cert_where(&a, CauseKind::KilledOutsideRun);
    assert_eq!(c.rank, Rank::Unexpected);
    let k = c.killer.as_ref().unwrap();
    assert_eq!(k.relation, Relation::OutsideRun);
    assert!(!k.process.in_run);
    assert_eq!(k.syscall.as_deref(), Some("kill"));
    assert_eq!(a.foreign_signals.len(), 1);
    assert_eq!(a.foreign_signals[0].direction, Direction::OutsideToRun);
}

#[test]
fn real_oom_triggered_by_another_task_blames_neither() {
    // SIGKILL (SI_KERNEL) precedes oom:mark_victim, and its "sender" is the
    // allocating task, which survives: it must not be named a killer.
    let a = real("real_oom_trigger.ndjson");
    let c = cert_where(&a, CauseKind::Oom);
    let o = c.oom.as_ref().unwrap();
    assert!(!o.trigger_is_victim);
    assert_ne!(o.trigger.pid, c.victim.process.pid);
    assert_eq!(o.oom_score_adj, Some(1000));
    assert!(c.killer.is_none());
    assert_eq!(
        a.certificates.len(),
        1,
        "the trigger exited 0: no certificate"
    );
    let h = &c.history[0];
    assert!(h.raised_by_kernel && h.relation.is_none() && h.fatal);
}

#[test]
fn real_leak_is_traced_to_its_spawner_and_its_removal_named() {
    let a = real("real_leak_kill.ndjson");
    assert_eq!(a.leftovers.len(), 1);
    let l = &a.leftovers[0];
    let leak = l.leak.as_ref().expect("leak facts");
    assert!(leak.detached && leak.reparented && l.orphaned);
    assert_eq!(leak.argv, ["sleep", "300"]);
    assert!(leak.fds.iter().any(|f| f == "1: /dev/null"));
    let by = l.spawned_by.as_ref().expect("spawner");
    assert!(by.argv_inherited, "the `( ... &)` subshell, a fork of sh");
    assert_eq!(chain(&a.ancestors, l.ancestry).next().unwrap().pid, by.pid);
    assert!(l.ended_at.is_some(), "--leaks kill ended it later");
    // The tracer's SIGTERM is the leak policy at work, an expected stop.
    let c = cert_where(&a, CauseKind::Tracer);
    assert_eq!(c.rank, Rank::Expected);
    assert!(
        c.headline
            .ends_with("it outlived the command and `--leaks kill` removed it"),
        "{}",
        c.headline
    );
}

/// `daemon --all`: the shell that runs the job started before the daemon and
/// neither execs nor exits while watched; only its forks show it was watched.
/// What it spawns is in the run all the same (the CI pod sidecar's case).
#[test]
fn real_daemon_all_counts_children_of_a_process_older_than_the_daemon() {
    let a = real("real_daemon_all.ndjson");
    let un = only(&a, Rank::Unexpected);
    assert_eq!(un.len(), 1, "{:?}", a.certificates);
    assert_eq!(un[0].victim.process.pid, 2945);
    assert_eq!(
        un[0].killer.as_ref().unwrap().relation,
        Relation::Sibling,
        "{}",
        un[0].headline
    );
}

#[test]
fn a_short_non_zero_exit_that_said_something_is_certified() {
    // `sh -c 'kill -KILL 2; kill -TERM 77'` lived under a millisecond and
    // exited 1 after printing `kill: No such process`: certified, not
    // grouped with the silent helpers.
    let a = real("real_pidns_kill.ndjson");
    let c = a
        .certificates
        .iter()
        .find(|c| c.victim.process.command.starts_with("sh -c kill -KILL 2"))
        .expect("certified");
    assert!(c.victim.lifetime_ns < 1_000_000_000 && c.victim.children == 0);
    assert_eq!(c.rank, Rank::NonzeroExit);
    assert!(
        c.headline
            .ends_with("— last words: `sh: 1: kill: No such process`"),
        "{}",
        c.headline
    );
    assert!(a.other_exits.is_empty(), "{:?}", a.other_exits);
}

#[test]
fn real_command_not_found_still_gets_its_certificate() {
    let a = real("real_not_run.ndjson");
    assert_eq!(a.certificates.len(), 1);
    let c = &a.certificates[0];
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::NotRun, Rank::NonzeroExit)
    );
    assert_eq!(c.victim.process.argv, ["/nonexistent"]);
    assert!(c.victim.process.argv_inherited, "the fork never exec'd");
    assert!(
        c.headline.ends_with(
            "could not be run: executing `/nonexistent` failed with No such file or directory \
             (os error 2); tracer exited 127, as a shell does for a command not found"
        ),
        "{}",
        c.headline
    );
    assert!(a.other_exits.is_empty());
}

#[test]
fn a_leak_that_execs_after_the_leak_record_is_named_by_its_exec() {
    // A real `--leaks kill -- sh -c 'sleep 300 & exit 0'` capture, edited so
    // the fork's exec lands after the leak record (the race when the command
    // exits between its child's fork and exec).
    let a = real("leak_exec_after.ndjson");
    assert_eq!(a.leftovers.len(), 1);
    let l = &a.leftovers[0];
    assert_eq!(l.process.argv, ["sleep", "300"]);
    assert!(!l.process.argv_inherited);
    assert_eq!(
        l.leak.as_ref().unwrap().argv,
        ["sh", "-c", "sleep 300 & exit 0"]
    );
    let c = &a.certificates[0];
    assert_eq!(
        c.victim.process.command, l.process.command,
        "one name for one process"
    );
}

/// `si_syscall` is in the traced machine's numbering (the header's `arch`):
/// the same getpid forbidden on arm64 (172) is named as getpid, and 39 there
/// is umount2, not x86-64's getpid. A log without `arch` is x86-64's.
#[test]
fn seccomp_syscall_is_named_in_the_logs_architecture() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_field_seccomp.ndjson");
    let named = |arch: Option<&str>, nr: i64| {
        let mut log = read_log(&path).unwrap();
        log.header.arch = arch.map(str::to_string);
        for e in &mut log.events {
            if let crate::eventlog::Record::Signal(s) = e {
                if s.seccomp_syscall.is_some() {
                    s.seccomp_syscall = Some(nr);
                }
            }
        }
        let a = analyze(&log, &AnalysisOptions::default()).1;
        let c = cert_where(&a, CauseKind::Seccomp);
        let m = c.cause.mechanism.as_ref().unwrap();
        (m.syscall.clone(), c.cause.summary.clone())
    };
    assert_eq!(named(None, 39).0.as_deref(), Some("getpid"));
    assert_eq!(named(Some("x86_64"), 39).0.as_deref(), Some("getpid"));
    let (name, summary) = named(Some("aarch64"), 172);
    assert_eq!(name.as_deref(), Some("getpid"));
    assert!(summary.contains("getpid (172)"), "{summary}");
    assert_eq!(named(Some("aarch64"), 39).0.as_deref(), Some("umount2"));
}
