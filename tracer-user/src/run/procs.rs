//! /proc lookups about a process of the run, always checked against its
//! identity (pid and start time): a recycled pid is not the same process.
use crate::eventlog::ProcKey;

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

/// /proc's start time is in clock ticks since boot; ours in ns.
pub fn same_start(ticks: u64, start_ns: u64) -> bool {
    let tps = procfs::ticks_per_second();
    let ns_per_tick = 1_000_000_000 / tps;
    start_ns / ns_per_tick == ticks || (start_ns / ns_per_tick).abs_diff(ticks) <= 1
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
