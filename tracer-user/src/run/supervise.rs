//! The wait for the wrapped command, one event loop: events from the ring
//! buffer, the signals a user or CI runner sends (forwarded), the command's
//! exit (its pidfd), orphans to reap (SIGCHLD; the tracer is a child
//! subreaper), and the `--timeout` timers; snapshots when the run hangs or
//! is cancelled; and the resources sampler's timer (`resources/`: once a
//! second, finer near the memory limit). Nothing wakes it but one of these.
use std::{future::pending, process::Child, time::Duration};

use nix::{
    sys::signal::{killpg, Signal as NixSignal},
    unistd::Pid,
};
use signal_hook::consts::{SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1};
use tokio::time::{sleep_until, Instant};

use crate::{
    error::TracerError,
    eventlog::ExitStatus,
    resources::{Follow, Sampler},
    run::{
        leaks,
        pidfd::{reap_orphans_except, PidFd},
        session::Session,
        signals::Signals,
        terminal::{self, Foreground},
    },
};

/// Forwarded to the command (SIGUSR1: a snapshot instead), and SIGCHLD for
/// reaping orphans.
pub const WATCHED_SIGNALS: [i32; 6] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGCHLD];

pub struct Limits {
    pub timeout: Option<Duration>,
    /// Between SIGTERM and SIGKILL when the timeout expires.
    pub kill_grace: Duration,
    /// Sample the run's resources (not `--no-resources`).
    pub resources: bool,
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

impl Timeout {
    async fn fires(&self) {
        match self {
            Timeout::Armed(at) | Timeout::Terminating(at) => sleep_until(*at).await,
            Timeout::Done => pending().await,
        }
    }
}

pub async fn supervise(
    session: &mut Session,
    child: Child,
    signals: &mut Signals,
    limits: &Limits,
) -> Result<Outcome, TracerError> {
    let pid = Pid::from_raw(child.id() as i32);
    let command = PidFd::open(child.id()).map_err(TracerError::WaitIo)?;
    let mut timeout = match limits.timeout {
        Some(d) => Timeout::Armed(Instant::now() + d),
        None => Timeout::Done,
    };
    let mut timed_out = false;
    let mut cancel_snapshot_taken = false;
    // The command's own cgroups, followed if it moves (a job joining a
    // limited memcg): the run's is where its memory is charged.
    let mut sampler = limits
        .resources
        .then(|| Sampler::new(Follow::Process(child.id())));
    let mut next_sample = Instant::now();
    loop {
        tokio::select! {
            // Events first: what happened before the exit is logged before it.
            biased;
            ready = session.ready() => {
                ready?;
                session.drain()?;
            }
            got = signals.recv() => {
                for origin in got.map_err(TracerError::Signals)? {
                    if origin.signal == SIGCHLD {
                        reap_orphans_except(Some(pid));
                        continue;
                    }
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
            }
            () = sample_due(sampler.as_ref(), next_sample) => {
                next_sample = Instant::now() + sample(session, &mut sampler)?;
            }
            () = timeout.fires() => {
                timeout = match timeout {
                    Timeout::Armed(_) => {
                        timed_out = true;
                        // The curve up to the moment the snapshot is taken.
                        sample(session, &mut sampler)?;
                        crate::say!("tracer: --timeout expired: snapshot taken, sending SIGTERM to every process of the run");
                        snapshot(session, "timeout")?;
                        leaks::signal_all(&session.tracked()?, NixSignal::SIGTERM);
                        Timeout::Terminating(Instant::now() + limits.kill_grace)
                    }
                    Timeout::Terminating(_) => {
                        crate::say!("tracer: still running after the grace period: sending SIGKILL");
                        leaks::signal_all(&session.tracked()?, NixSignal::SIGKILL);
                        Timeout::Done
                    }
                    Timeout::Done => Timeout::Done,
                };
            }
            status = command.status() => {
                let status = status?;
                if let Some(s) = &mut sampler {
                    s.gone();
                }
                sample(session, &mut sampler)?;
                reap_orphans_except(None);
                Foreground::restore();
                return Ok(Outcome { status, timed_out });
            }
        }
    }
}

/// When the next sample is due (never without a sampler).
async fn sample_due(sampler: Option<&Sampler>, at: Instant) {
    match sampler {
        Some(_) => sleep_until(at).await,
        None => pending().await,
    }
}

/// One sample of the run's resources into the log; the wait until the next.
fn sample(session: &mut Session, sampler: &mut Option<Sampler>) -> Result<Duration, TracerError> {
    let Some(s) = sampler else {
        return Ok(crate::resources::sampler::EVERY);
    };
    let tracked = session.tracked()?;
    session.log_resources(s.sample(&tracked))?;
    Ok(s.interval())
}

fn snapshot(session: &mut Session, reason: &str) -> Result<(), TracerError> {
    let s = session.log_snapshot(reason)?;
    crate::say!(
        "tracer: snapshot ({reason}) of {} process(es)",
        s.processes.len()
    );
    for f in &s.findings {
        let t = crate::text::terminal::line;
        crate::say!("tracer:   {}: {}", t(&f.kind), t(&f.detail));
    }
    Ok(())
}
