//! The wait for the wrapped command: pump events, forward the signals a user
//! or CI runner sends, enforce `--timeout`, take snapshots when the run hangs
//! or is cancelled, and reap orphans (the tracer is a child subreaper).
use std::{
    process::Child,
    time::{Duration, Instant},
};

use nix::{
    sys::{
        signal::{killpg, Signal as NixSignal},
        wait::{waitpid, WaitPidFlag, WaitStatus},
    },
    unistd::Pid,
};
use signal_hook::{
    consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1},
    iterator::{exfiltrator::WithOrigin, SignalsInfo},
};

use crate::{
    error::TracerError,
    eventlog::ExitStatus,
    run::{
        leaks,
        session::Session,
        terminal::{self, Foreground},
    },
};

pub const WATCHED_SIGNALS: [i32; 5] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1];

pub struct Limits {
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL when the timeout expires.
    pub kill_grace: Duration,
}

pub struct Outcome {
    pub status: ExitStatus,
    pub timed_out: bool,
}

enum Timeout {
    Armed(Instant),
    Terminating(Instant),
    Done,
}

pub fn supervise(
    session: &mut Session,
    child: Child,
    mut signals: SignalsInfo<WithOrigin>,
    limits: &Limits,
) -> Result<Outcome, TracerError> {
    let pid = Pid::from_raw(child.id() as i32);
    let mut timeout = match limits.timeout {
        Some(d) => Timeout::Armed(Instant::now() + d),
        None => Timeout::Done,
    };
    let mut timed_out = false;
    let mut cancel_snapshot_taken = false;
    loop {
        session.pump(Duration::from_millis(50))?;
        for origin in signals.pending() {
            if origin.signal == SIGUSR1 {
                snapshot(session, "requested")?;
                continue;
            }
            // A terminal's own signal (SI_KERNEL) already reached the command's
            // group if the command holds the terminal; don't send it twice.
            if terminal::is_from_terminal(&origin) && Foreground::held_by_child() {
                continue;
            }
            // A CI cancellation: record what everything was doing, then pass it on.
            if !cancel_snapshot_taken {
                cancel_snapshot_taken = true;
                snapshot(session, "cancelled")?;
            }
            if let Ok(sig) = NixSignal::try_from(origin.signal) {
                log::info!("forwarding {sig} to process group {pid}");
                let _ = killpg(pid, sig);
            }
        }
        timeout = match timeout {
            Timeout::Armed(at) if Instant::now() >= at => {
                timed_out = true;
                eprintln!("tracer: --timeout expired: snapshot taken, sending SIGTERM to every process of the run");
                snapshot(session, "timeout")?;
                leaks::signal_all(&session.tracked()?, NixSignal::SIGTERM);
                Timeout::Terminating(Instant::now() + limits.kill_grace)
            }
            Timeout::Terminating(at) if Instant::now() >= at => {
                eprintln!("tracer: still running after the grace period: sending SIGKILL");
                leaks::signal_all(&session.tracked()?, NixSignal::SIGKILL);
                Timeout::Done
            }
            other => other,
        };
        if let Some(status) = reap(pid)? {
            Foreground::restore();
            return Ok(Outcome { status, timed_out });
        }
    }
}

fn snapshot(session: &mut Session, reason: &str) -> Result<(), TracerError> {
    let s = session.log_snapshot(reason)?;
    eprintln!(
        "tracer: snapshot ({reason}) of {} process(es)",
        s.processes.len()
    );
    for f in &s.findings {
        let t = crate::text::terminal::line;
        eprintln!("tracer:   {}: {}", t(&f.kind), t(&f.detail));
    }
    Ok(())
}

/// Reap everything that has exited; the command's status if it was among them.
fn reap(command: Pid) -> Result<Option<ExitStatus>, TracerError> {
    loop {
        return Ok(Some(match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return Ok(None),
            Ok(WaitStatus::Exited(p, code)) if p == command => ExitStatus::Exited { code },
            Ok(WaitStatus::Signaled(p, sig, core_dumped)) if p == command => ExitStatus::Signaled {
                signal: sig as i32,
                name: sig.as_str().into(),
                core_dumped,
            },
            Ok(_) => continue, // an orphan of the run, inherited and reaped
            Err(e) => return Err(TracerError::Wait(e)),
        }));
    }
}
