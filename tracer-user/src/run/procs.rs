//! /proc lookups about a process of the run, always checked against its
//! identity (pid and start time): a recycled pid is not the same process.
use crate::eventlog::ProcKey;
pub use crate::resources::same_start;

/// Is `key` still this very process? (Its pid alive with the same start
/// time: a recycled pid is not.) Cheap: one /proc stat read.
pub fn alive(key: ProcKey) -> bool {
    procfs::process::Process::new(key.pid as i32)
        .and_then(|p| p.stat())
        .is_ok_and(|s| same_start(s.starttime, key.start))
}

/// Already on its way out: exiting, or a SIGKILL is pending (e.g. the last
/// member of a group the command just killed). Not a leak: its exit is
/// moments away.
pub fn dying(key: ProcKey) -> bool {
    const PF_EXITING: u32 = 0x4;
    const SIGKILL_BIT: u64 = 1 << 8;
    let Ok(proc) = procfs::process::Process::new(key.pid as i32) else {
        return false;
    };
    let exiting = proc
        .stat()
        .is_ok_and(|s| s.flags & PF_EXITING != 0 || matches!(s.state, 'Z' | 'X'));
    let killed = proc
        .status()
        .is_ok_and(|s| (s.sigpnd | s.shdpnd) & SIGKILL_BIT != 0);
    exiting || killed
}

/// The argv of `key` if it is still alive and has one, cut as an exec's
/// is (and whether it was cut).
pub fn argv_of(key: ProcKey) -> Option<(Vec<String>, bool)> {
    if !alive(key) {
        return None;
    }
    crate::snapshot::read_argv(key.pid)
        .ok()
        .filter(|(a, _)| !a.is_empty())
}

/// The argv of `key` as [`argv_of`] reads it, when its thread `tid` still
/// has the name `comm` (the sender's when it signalled) before and after
/// the read: a process that exec'd since (a script's `kill …; exec next`)
/// holds another image's argv, which must not name the sender. An exec of
/// the same name is not seen.
pub fn argv_of_named(key: ProcKey, tid: u32, comm: &str) -> Option<(Vec<String>, bool)> {
    let named = || {
        std::fs::read(format!("/proc/{}/task/{tid}/comm", key.pid))
            .is_ok_and(|n| n.strip_suffix(b"\n").unwrap_or(&n) == comm.as_bytes())
    };
    if !named() {
        return None;
    }
    let argv = argv_of(key)?;
    named().then_some(argv)
}

/// Most of an environment read to find the runners' variables: a CI job's
/// environment is a few KiB to ~100 KiB (GitHub Actions: ~10 KiB); the
/// kernel caps argv + environment at a quarter of the stack limit (2 MiB
/// at the usual 8 MiB). Past this the rest is not read.
const MAX_ENVIRON: u64 = 2 << 20;

/// The test runners' variables of `key`'s environment (and only those:
/// `labels::env::filter` drops the rest in this function, before anything
/// leaves it), read from /proc/PID/environ while it is this very process —
/// its identity checked before and after the read, so a recycled pid's
/// environment is never taken for it. Empty when it is already gone (a
/// `pkill` can be, by the time the ring is drained: docs/security.md
/// measures how often).
pub fn test_env_of(key: ProcKey) -> std::collections::BTreeMap<String, String> {
    use std::io::Read;
    if !alive(key) {
        return Default::default();
    }
    let Ok(file) = std::fs::File::open(format!("/proc/{}/environ", key.pid)) else {
        return Default::default();
    };
    let mut area = Vec::new();
    if file.take(MAX_ENVIRON).read_to_end(&mut area).is_err() || !alive(key) {
        return Default::default();
    }
    let kept = crate::labels::env::filter(&area);
    // The rest of the environment is not kept a moment longer than this.
    area.fill(0);
    std::hint::black_box(&area);
    kept
}
