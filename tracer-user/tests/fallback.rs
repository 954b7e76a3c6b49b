//! The kill-syscall hook's fallback chain — fentry/fexit, then raw_syscalls
//! filtered in the kernel, then the per-syscall tracepoints: each rung, forced
//! with `--disable-hook kill_syscalls:<via>`, gives the same events.
mod common;

use common::*;
use tracer_user::eventlog::Record;

const SCENARIO: &str = "sleep 30 & kill -TERM $!; wait; kill -TERM 2000000000; exit 0";

/// Runs the scenario with `disabled` rungs; `Err(detail)` if the hook did not attach
/// (with its detail), else asserts the kill calls and returns the via.
fn kill_calls_with(disabled: &[&str]) -> Result<String, String> {
    let mut args = Vec::new();
    for d in disabled {
        args.extend(["--disable-hook", d]);
    }
    let r = record(&args, &["sh", "-c", SCENARIO]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let hook = hook(&r.log, "kill_syscalls");
    if !hook.attached {
        return Err(hook.detail.clone().unwrap_or_default());
    }
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
    Ok(hook.via.clone().expect("attached hooks say how"))
}

#[test]
fn raw_syscalls_rung_sees_kill_calls() {
    let via = kill_calls_with(&["kill_syscalls:fentry"]).expect("raw_syscalls attaches");
    assert_eq!(via, "raw_syscalls");
}

#[test]
fn tracepoint_rung_sees_kill_calls() {
    let via = kill_calls_with(&["kill_syscalls:fentry", "kill_syscalls:raw_syscalls"])
        .expect("the syscall tracepoints attach");
    assert_eq!(via, "tracepoint");
}

/// fentry is refused on the farm's Firecracker kernels (`-fc-` releases,
/// DESIGN.md "kernel facts"): there the test checks the refusal is reported,
/// anywhere else (the VM matrix's distribution kernels) fentry must attach
/// and see the calls.
#[test]
fn fentry_rung_sees_kill_calls() {
    match kill_calls_with(&["kill_syscalls:raw_syscalls", "kill_syscalls:tracepoint"]) {
        Ok(via) => assert_eq!(via, "fentry"),
        Err(detail) => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            assert!(
                release.contains("-fc-") && detail.starts_with("fentry: load fentry "),
                "fentry refused on {release}: {detail}"
            );
        }
    }
}

#[test]
fn default_chain_avoids_classic_tracepoints() {
    let via = kill_calls_with(&[]).expect("some rung attaches");
    assert_ne!(via, "tracepoint", "a rung without teardown cost attaches");
}
