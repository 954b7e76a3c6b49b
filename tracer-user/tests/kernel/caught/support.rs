//! Helpers of the caught-then-re-raised scenarios (reraised.rs,
//! cancelled.rs): /proc waits, and the chain every re-raise certificate
//! shows.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::{sys::signal::Signal, unistd::Pid};
use serde_json::Value;

use crate::certificates::support::s;

/// Every child naps at most this long, so a failed test leaves nothing for long.
pub(crate) const NODE_NAP: &str = "setTimeout(() => {}, 60000)";

pub(crate) fn unique(what: &str) -> String {
    let nonce = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("h1-{what}-{}-{nonce}", std::process::id())
}

/// Waits (bounded) until `pid` sleeps in wait(): a shell waiting for its
/// foreground child, the moment its SIGINT handling is the cooperative one.
pub(crate) fn wait_in_do_wait(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(format!("/proc/{pid}/wchan")).unwrap_or_default() != "do_wait" {
        assert!(Instant::now() < deadline, "pid {pid} never waited");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits (bounded) until `parent`'s only child runs `comm`: a shell's
/// child that printed `ready` may not have exec'd yet.
pub(crate) fn wait_child_runs(parent: u32, comm: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let children = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
            .unwrap_or_default();
        let runs = children.split_whitespace().any(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == comm)
        });
        if runs {
            return;
        }
        assert!(Instant::now() < deadline, "no child of {parent} ran {comm}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub(crate) fn kill(pid: u32, sig: Signal) {
    nix::sys::signal::kill(Pid::from_raw(pid as i32), sig).unwrap();
}

/// The chain every caught-then-re-raised certificate shows.
pub(crate) fn assert_reraised(c: &Value, sig: &str, code: &str) {
    let re = &c["cause"]["reraised"];
    assert_eq!(
        (s(&re["sig_name"]), s(&re["code_name"])),
        (sig, code),
        "{c:#}"
    );
    assert_eq!(c["cause"]["signal"]["sig_name"], sig);
    assert!(c["cause"]["signal"]["seq"].as_u64() < re["seq"].as_u64());
    let evidence = c["evidence"].as_array().unwrap();
    assert!(
        evidence.contains(&re["seq"]),
        "the re-raise stays in the evidence"
    );
    let h = s(&c["headline"]);
    assert!(h.contains(&format!("caught {sig} from ")), "{h}");
    assert!(h.contains("and re-raised it on itself via "), "{h}");
    assert!(!h.contains("sent by itself"), "{h}");
}
