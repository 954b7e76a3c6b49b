//! What the run left behind: processes of the run still alive when the
//! wrapped command exited. The kernel's tracked-process map is exactly that
//! set; /proc adds what each one is and holds.
use std::time::{Duration, Instant};

use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};

use crate::{
    eventlog::{Leak, ProcKey, Task},
    run::session::Session,
};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LeakPolicy {
    /// List them and return at once, leaving them running.
    #[default]
    Report,
    /// SIGTERM, then SIGKILL after the grace period.
    Kill,
    /// Wait up to the grace period for them to exit on their own.
    Wait,
}

/// Facts about a live process, or `None` if `key` is no longer alive (the
/// start time guards against a recycled pid).
pub fn inspect(key: ProcKey, tracer_pid: u32, root_sid: Option<i32>) -> Option<Leak> {
    let proc = procfs::process::Process::new(key.pid as i32).ok()?;
    let stat = proc.stat().ok()?;
    if !same_start(stat.starttime, key.start) {
        return None;
    }
    let mut fds: Vec<String> = proc
        .fd()
        .map(|fds| {
            fds.flatten()
                .map(|fd| format!("{}: {}", fd.fd, describe(&fd.target)))
                .collect()
        })
        .unwrap_or_default();
    fds.sort_by_key(|l| l.split(':').next().and_then(|n| n.parse::<i32>().ok()));
    Some(Leak {
        at: Default::default(),
        task: Task {
            pid: key.pid,
            tid: key.pid,
            start: key.start,
            comm: Some(stat.comm.clone()),
        },
        ppid: stat.ppid as u32,
        pgid: stat.pgrp as u32,
        sid: stat.session as u32,
        argv: proc.cmdline().unwrap_or_default(),
        exe: proc.exe().ok().map(|p| p.display().to_string()),
        reparented: stat.ppid == 1 || stat.ppid as u32 == tracer_pid,
        detached: root_sid.is_some_and(|s| s != stat.session),
        fds,
        withheld: None,
    })
}

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
fn same_start(ticks: u64, start_ns: u64) -> bool {
    let tps = procfs::ticks_per_second();
    let ns_per_tick = 1_000_000_000 / tps;
    start_ns / ns_per_tick == ticks || (start_ns / ns_per_tick).abs_diff(ticks) <= 1
}

fn describe(t: &procfs::process::FDTarget) -> String {
    use procfs::process::FDTarget::*;
    match t {
        Path(p) => p.display().to_string(),
        Socket(i) => format!("socket:[{i}]"),
        Net(i) => format!("net:[{i}]"),
        Pipe(i) => format!("pipe:[{i}]"),
        AnonInode(s) => format!("anon_inode:{s}"),
        MemFD(s) => format!("memfd:{s}"),
        Other(s, i) => format!("{s}:[{i}]"),
        Unknown(a, b) => format!("{a}:{b}"),
    }
}

/// Apply the policy to the leaked processes, pumping events meanwhile so
/// their deaths land in the log.
pub fn enforce(
    policy: LeakPolicy,
    leaks: &[ProcKey],
    grace: Duration,
    session: &mut Session,
) -> Result<(), crate::error::TracerError> {
    if policy == LeakPolicy::Report || leaks.is_empty() {
        return Ok(());
    }
    let still_here = |k: &ProcKey| alive(*k);
    if policy == LeakPolicy::Kill {
        signal_all(leaks, Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && leaks.iter().any(still_here) {
        session.pump(Duration::from_millis(50))?;
        reap_orphans();
    }
    if policy == LeakPolicy::Kill {
        signal_all(
            &leaks.iter().copied().filter(still_here).collect::<Vec<_>>(),
            Signal::SIGKILL,
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && leaks.iter().any(still_here) {
            session.pump(Duration::from_millis(20))?;
            reap_orphans();
        }
    }
    Ok(())
}

/// Only processes verified to be the run's (pid and start time) are signalled.
pub fn signal_all(leaks: &[ProcKey], sig: Signal) {
    for k in leaks {
        if alive(*k) {
            let _ = kill(Pid::from_raw(k.pid as i32), sig);
        }
    }
}

/// As a child subreaper the tracer inherits orphans: collect their zombies.
pub fn reap_orphans() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    while let Ok(s) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if s == WaitStatus::StillAlive {
            break;
        }
    }
}
