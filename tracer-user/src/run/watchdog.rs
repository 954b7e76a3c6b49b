//! The run never outlives an unobserved tracer. Before the command starts,
//! tracer forks a watchdog: a root process in its own session (out of the
//! run's process group, session and cgroup, so neither a terminal's signals
//! nor an unprivileged run can reach it) that holds the read end of a pipe.
//! Only tracer holds the write end, so EOF means tracer is gone, however it
//! went (SIGKILL, OOM, a crash): no code of tracer's needs to run. The
//! watchdog then SIGTERMs every process of the run, and SIGKILLs what is left
//! after the grace period.
//!
//! "The run" is what the kernel knows, not a process group: the eBPF
//! tracked-process map (every descendant, whatever setsid or double fork it
//! did; the watchdog keeps the programs attached, so forks during the grace
//! period are tracked too) and the run's cgroup where one could be made
//! (`run_cgroup`), which also holds what the map could not (a full map).
//!
//! Limits: a command that runs as root (`--user root`, or no sudo) can kill
//! the watchdog first; a process of the run that moves itself out of the
//! cgroup (root, or a delegated cgroup) and is not in the map escapes.
use std::{
    collections::BTreeSet,
    os::fd::{AsRawFd, OwnedFd, RawFd},
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{kill, Signal},
    unistd::{fork, ForkResult, Pid},
};

use crate::{
    capture::Capture,
    error::TracerError,
    run::{procs, run_cgroup::RunCgroup},
};

pub struct Watchdog {
    pid: Pid,
    arm: OwnedFd,
}

/// The one byte that stands the watchdog down.
const DISARM: u8 = b'D';
/// SIGKILL rounds stop after this (a process stuck in D state cannot die).
const KILL_ROUNDS_FOR: Duration = Duration::from_secs(5);

impl Watchdog {
    /// Fork the watchdog. Call while tracer is single-threaded (it is until
    /// the command runs: nothing it loads starts a thread, the eBPF log is
    /// drained on the event loop; checked, never assumed), before the
    /// command is spawned, and not while children are being adopted.
    pub fn start(
        capture: &Capture,
        cgroup: Option<&RunCgroup>,
        grace: Duration,
    ) -> Result<Watchdog, TracerError> {
        single_threaded()?;
        let (rd, wr) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| TracerError::WatchdogPipe(e.into()))?;
        let tracer = std::process::id();
        // SAFETY: tracer is single-threaded here (checked just above: no
        // other thread can hold a lock the child would then wait on for
        // ever), so the child may allocate; it never returns into tracer's
        // code (_exit).
        match unsafe { fork() } {
            Ok(ForkResult::Child) => {
                drop(wr);
                let code = watch(rd, capture, cgroup, grace, tracer);
                // SAFETY: _exit ends the child at once, running nothing of
                // tracer's (no atexit handlers, no buffered stdio flushed twice).
                unsafe { libc::_exit(code) }
            }
            Ok(ForkResult::Parent { child }) => Ok(Watchdog {
                pid: child,
                arm: wr,
            }),
            Err(e) => Err(TracerError::WatchdogFork(e)),
        }
    }

    /// The run's fate is settled (the command exited, `--leaks` applied):
    /// stand the watchdog down. Dropping it without this arms it.
    pub fn disarm(self) {
        let _ = nix::unistd::write(&self.arm, &[DISARM]);
        drop(self.arm);
        // It exits at once. Bounded and WNOHANG: if it died earlier, tracer
        // reaped it already and its pid may be an adopted orphan's now.
        use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
        for _ in 0..100 {
            match waitpid(self.pid, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(10)),
                _ => return,
            }
        }
    }
}

/// The watchdog's whole life. Returns its exit status.
fn watch(
    rd: OwnedFd,
    capture: &Capture,
    cgroup: Option<&RunCgroup>,
    grace: Duration,
    tracer: u32,
) -> i32 {
    // SAFETY: setsid and prctl(PR_SET_NAME) take plain values (a static C
    // string); signal() installs SIG_IGN / SIG_DFL, no Rust handler, in a
    // process with one thread (the watchdog's fork checked it).
    unsafe {
        libc::setsid();
        libc::prctl(libc::PR_SET_NAME, c"tracer-watchdog".as_ptr());
        // A terminal's or a user's stray signals must not end it; SIGTERM
        // (an admin, systemd stopping the unit) still does.
        for sig in [
            libc::SIGINT,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGTSTP,
            libc::SIGTTIN,
            libc::SIGTTOU,
            libc::SIGPIPE,
        ] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
    }
    keep_only_bpf_fds(rd.as_raw_fd());
    let mut b = [0u8; 1];
    loop {
        match nix::unistd::read(&rd, &mut b) {
            Ok(1) if b[0] == DISARM => return 0,
            Ok(1) | Err(nix::errno::Errno::EINTR) => continue,
            _ => break, // EOF: tracer is gone
        }
    }
    end_run(capture, cgroup, grace, tracer);
    if let Some(cg) = cgroup {
        cg.remove();
    }
    0
}

/// SIGTERM every process of the run, SIGKILL what is left after `grace`.
fn end_run(capture: &Capture, cgroup: Option<&RunCgroup>, grace: Duration, tracer: u32) {
    let me = std::process::id();
    let run = || -> Vec<u32> {
        let mut pids: BTreeSet<u32> = capture
            .tracked()
            .unwrap_or_default()
            .into_iter()
            .filter(|k| procs::alive(*k))
            .map(|k| k.pid)
            .collect();
        pids.extend(cgroup.map(RunCgroup::members).unwrap_or_default());
        pids.retain(|&p| p != tracer && p != me && !dead(p));
        pids.into_iter().collect()
    };
    let left = run();
    if left.is_empty() {
        return;
    }
    say(&format!(
        "tracer (pid {tracer}) is gone and {} process(es) of its run are still running: SIGTERM now, SIGKILL in {}",
        left.len(),
        humantime::format_duration(grace)
    ));
    signal(&left, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    let mut left = left;
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = run();
    }
    if left.is_empty() {
        return;
    }
    say(&format!(
        "{} process(es) still running after the grace period: SIGKILL",
        left.len()
    ));
    let deadline = Instant::now() + KILL_ROUNDS_FOR;
    while !left.is_empty() && Instant::now() < deadline {
        // cgroup.kill also gets a fork racing with us; without it, frozen
        // members cannot fork while they are signalled (they die on thaw).
        // The map round covers what is outside the cgroup.
        let frozen = cgroup.is_some_and(|cg| !cg.kill() && cg.freeze(true));
        signal(&left, Signal::SIGKILL);
        if frozen {
            cgroup.map(|cg| cg.freeze(false));
        }
        std::thread::sleep(Duration::from_millis(20));
        left = run();
    }
    if !left.is_empty() {
        say(&format!(
            "{} process(es) would not die: {left:?}",
            left.len()
        ));
    }
}

fn signal(pids: &[u32], sig: Signal) {
    for &p in pids {
        let _ = kill(Pid::from_raw(p as i32), sig);
    }
}

/// Gone, or a zombie waiting for its parent: nothing left to signal.
fn dead(pid: u32) -> bool {
    procfs::process::Process::new(pid as i32)
        .and_then(|p| p.stat())
        .map_or(true, |s| matches!(s.state, 'Z' | 'X'))
}

fn say(msg: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "tracer: watchdog: {msg}");
}

/// Close every fd but stderr, the pipe, and the BPF objects (maps, programs,
/// links, tracepoint perf events): the watchdog must not hold the log, the
/// output pipes of whoever runs tracer (they would wait for its EOF), or
/// anything else of tracer's. stdin and stdout become /dev/null.
fn keep_only_bpf_fds(keep: RawFd) {
    // SAFETY: open of a static C string; dup2 and close of the fd it gave.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
    let fds: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        if fd <= 2 || fd == keep {
            continue;
        }
        match std::fs::read_link(format!("/proc/self/fd/{fd}")) {
            Ok(l) if is_bpf(&l.to_string_lossy()) => {}
            // SAFETY: closing an fd of this process (the watchdog, just
            // forked) that nothing in it uses: what tracer's objects held
            // in the parent stays open there.
            Ok(_) => unsafe {
                libc::close(fd);
            },
            Err(_) => {} // the directory listing's own fd, already closed
        }
    }
}

fn is_bpf(link: &str) -> bool {
    link.starts_with("anon_inode:bpf") || link == "anon_inode:[perf_event]"
}

/// The watchdog's fork is safe only with no other thread: one that held the
/// allocator's or the logger's lock at the fork would leave the child
/// waiting on it for ever. Refused, not risked (docs/architecture.md,
/// "Threads").
fn single_threaded() -> Result<(), TracerError> {
    let threads = procfs::process::Process::myself()
        .and_then(|p| p.stat())
        .map(|s| s.num_threads)
        .map_err(TracerError::WatchdogStat)?;
    if threads == 1 {
        Ok(())
    } else {
        Err(TracerError::WatchdogThreads(threads))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bpf_objects_are_recognised() {
        for l in [
            "anon_inode:bpf-map",
            "anon_inode:bpf-prog",
            "anon_inode:bpf_link",
            "anon_inode:[perf_event]",
        ] {
            assert!(super::is_bpf(l), "{l}");
        }
        for l in [
            "/tmp/out/events.ndjson",
            "pipe:[123]",
            "anon_inode:[eventpoll]",
        ] {
            assert!(!super::is_bpf(l), "{l}");
        }
    }
}
