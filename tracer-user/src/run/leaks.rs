//! What the run left behind: processes of the run still alive when the
//! wrapped command exited. The kernel's tracked-process map is exactly that
//! set; /proc adds what each one is and holds.
use std::time::Duration;

use tokio::time::{sleep_until, Instant};

use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};

use crate::{
    error::TracerError,
    eventlog::{Leak, ProcKey, Task},
    run::{
        pidfd::{any_exited, reap_orphans_except, PidFd},
        procs::{self, alive, same_start},
        session::Session,
    },
    snapshot::MAX_FDS_SHOWN,
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
    // The lowest fds, as a snapshot reads them; the rest only counted.
    let mut fds: Vec<(i32, String)> = proc
        .fd()
        .map(|fds| {
            fds.flatten()
                .take(MAX_FDS_SHOWN)
                .map(|fd| (fd.fd, format!("{}: {}", fd.fd, describe(&fd.target))))
                .collect()
        })
        .unwrap_or_default();
    fds.sort_by_key(|(n, _)| *n);
    let fds_left_out = match fds.len() < MAX_FDS_SHOWN {
        true => 0,
        false => crate::snapshot::count_fds(key.pid).saturating_sub(fds.len()) as u32,
    };
    let (argv, argv_truncated) = crate::snapshot::read_argv(key.pid).unwrap_or_default();
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
        argv,
        argv_truncated,
        exe: proc.exe().ok().map(|p| p.display().to_string()),
        reparented: stat.ppid == 1 || stat.ppid as u32 == tracer_pid,
        detached: root_sid.is_some_and(|s| s != stat.session),
        fds: fds.into_iter().map(|(_, f)| f).collect(),
        fds_left_out,
        withheld: None,
    })
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

/// After the command exited: let the exits it caused land, log every
/// process of the run still alive, then apply `--leaks`.
pub async fn settle(
    session: &mut Session,
    policy: LeakPolicy,
    grace: Duration,
    tracer_pid: u32,
    root_sid: Option<i32>,
    viewer: Option<crate::snapshot::Viewer>,
) -> Result<(), TracerError> {
    // Processes the command killed on its way out may not have finished
    // exiting yet: let their exits land in the log first (bounded).
    let dying: Vec<ProcKey> = session
        .tracked()?
        .into_iter()
        .filter(|k| procs::dying(*k))
        .collect();
    wait_gone(session, &dying, Duration::from_secs(2)).await?;
    let mut leaked = Vec::new();
    for key in session.tracked()? {
        // Credentials before and after: a setuid exec in between counts.
        let before = crate::snapshot::creds_of(key.pid);
        if let Some(mut leak) = inspect(key, tracer_pid, root_sid) {
            if let Some(v) = viewer {
                let after = crate::snapshot::creds_of(key.pid);
                let why = crate::snapshot::foreign(before.as_ref(), &v)
                    .or_else(|| crate::snapshot::foreign(after.as_ref(), &v));
                if let Some(why) = why {
                    withhold(&mut leak, why);
                }
            }
            session.log_leak(leak)?;
            leaked.push(key);
        }
    }
    if !leaked.is_empty() {
        crate::say!(
            "tracer: {} process(es) of the run outlived the command",
            leaked.len()
        );
    }
    enforce(policy, &leaked, grace, session).await
}

/// Apply the policy to the leaked processes, logging events meanwhile so
/// their deaths land in the log.
pub async fn enforce(
    policy: LeakPolicy,
    leaks: &[ProcKey],
    grace: Duration,
    session: &mut Session,
) -> Result<(), TracerError> {
    if policy == LeakPolicy::Report || leaks.is_empty() {
        return Ok(());
    }
    if policy == LeakPolicy::Kill {
        signal_all(leaks, Signal::SIGTERM);
    }
    wait_gone(session, leaks, grace).await?;
    if policy == LeakPolicy::Kill {
        let left: Vec<ProcKey> = leaks.iter().copied().filter(|k| alive(*k)).collect();
        signal_all(&left, Signal::SIGKILL);
        wait_gone(session, &left, Duration::from_secs(5)).await?;
    }
    Ok(())
}

/// Wait (at most `within`) until every process of `keys` has exited,
/// writing events as they come and reaping the orphans among them. Each
/// process is watched through a pidfd: no polling.
pub async fn wait_gone(
    session: &mut Session,
    keys: &[ProcKey],
    within: Duration,
) -> Result<(), TracerError> {
    let deadline = Instant::now() + within;
    let mut left: Vec<PidFd> = keys.iter().filter_map(|k| PidFd::of(*k)).collect();
    while !left.is_empty() {
        tokio::select! {
            ready = session.ready() => {
                ready?;
                session.drain()?;
            }
            i = any_exited(&left) => {
                left.swap_remove(i);
                reap_orphans_except(None);
            }
            () = sleep_until(deadline) => break,
        }
    }
    reap_orphans_except(None);
    session.drain()?;
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

/// A leaked process of another user: its executable and open files go the
/// way of a snapshot's (`snapshot::withhold`).
fn withhold(leak: &mut Leak, why: String) {
    leak.exe = None;
    leak.fds.clear();
    leak.fds_left_out = 0;
    leak.withheld = Some(format!("{why}: its executable and open files are withheld"));
}
