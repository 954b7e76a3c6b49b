//! Processes that outlive the command: reported (and the tracer returns), or
//! removed with `--leaks kill`.
use crate::common::*;
use tracer_user::{
    eventlog::{ExitStatus, Leak, Record},
    run::leaks,
};

/// A daemon that double-forks out of the run's session and never exits.
const DAEMONIZE: &str = "(setsid sleep 300 >/dev/null 2>&1 &); sleep 0.2; exit 0";

fn leaks_of(r: &Recorded) -> Vec<&Leak> {
    r.events().leaks().collect()
}

#[test]
fn leaked_daemon_is_reported_and_tracer_returns() {
    let r = record(&[], &["sh", "-c", DAEMONIZE]);
    let found = leaks_of(&r);
    // Clean up first: the daemon is ours (the test's own command spawned it),
    // and its identity is checked against its start time before the kill.
    for l in &found {
        if leaks::inspect(l.task.key(), 0, None).is_some() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(l.task.pid as i32),
                nix::sys::signal::SIGKILL,
            );
        }
    }
    assert_eq!(r.code(), Some(0));
    assert_eq!(found.len(), 1, "{found:?}");
    let l = found[0];
    assert_eq!(l.argv, ["sleep", "300"]);
    assert!(l.detached, "setsid left the run's session");
    assert!(l.reparented, "its parent died: it belongs to the subreaper");
    assert!(l.fds.iter().any(|f| f == "1: /dev/null"), "{:?}", l.fds);
}

#[test]
fn leaks_kill_removes_them() {
    let r = record(
        &["--leaks", "kill", "--leak-grace", "5s"],
        &["sh", "-c", DAEMONIZE],
    );
    assert_eq!(r.code(), Some(0));
    let found = leaks_of(&r);
    assert_eq!(found.len(), 1);
    let key = found[0].task.key();
    assert!(
        leaks::inspect(key, 0, None).is_none(),
        "the leaked daemon is gone"
    );
    let death = r
        .events()
        .exits()
        .find(|x| x.group_dead && x.task.key() == key)
        .map(|x| x.status.clone());
    assert_eq!(
        death,
        Some(ExitStatus::Signaled {
            signal: 15,
            name: "SIGTERM".into(),
            core_dumped: false
        })
    );
    let by_tracer = r.events().any(|e| {
        matches!(e, Record::Signal(s) if s.target.key() == key && s.sender.pid == r.log.header.tracer_pid)
    });
    assert!(by_tracer);
}
