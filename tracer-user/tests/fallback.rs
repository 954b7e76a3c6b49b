//! The kill-syscall hook's fallback: raw_syscalls filtered in the kernel gives
//! the same events as the per-syscall tracepoints.
mod common;

use common::*;
use tracer_user::eventlog::Record;

#[test]
fn raw_syscalls_fallback_sees_kill_calls() {
    let r = record(
        &["--disable-hook", "kill_syscalls:tracepoint"],
        &[
            "sh",
            "-c",
            "sleep 30 & kill -TERM $!; wait; kill -TERM 2000000000; exit 0",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let hook = hook(&r.log, "kill_syscalls");
    assert!(hook.attached);
    assert_eq!(hook.via.as_deref(), Some("raw_syscalls"));
    let calls: Vec<_> = r
        .events()
        .filter_map(|e| match e {
            Record::KillCall(k) => Some((k.syscall.clone(), k.sig, k.ret, k.deliveries)),
            _ => None,
        })
        .collect();
    assert!(calls.contains(&("kill".into(), 15, 0, 1)), "{calls:?}");
    assert!(calls.contains(&("kill".into(), 15, -3, 0)), "{calls:?}");
    let joined = r.events().any(|e| {
        matches!(e, Record::Signal(s) if s.sig == 15 && s.call.as_ref().is_some_and(|c| c.syscall == "kill"))
    });
    assert!(joined, "the SIGTERM delivery is joined to its kill()");
}
