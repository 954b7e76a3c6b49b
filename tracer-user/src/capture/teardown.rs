//! Detaching without making the user wait for it.
//!
//! Closing the last reference to a classic tracepoint's perf event waits for
//! an RCU grace period (~35–80 ms each on our machines, serialised by the
//! kernel under `event_mutex`: closing them from several threads does not
//! overlap them). Nothing the user waits for depends on those waits: once the
//! log is closed, a hook that fires writes into a ring buffer nobody reads
//! and is scoped in the kernel to the run's processes. So the last references
//! go to a short-lived child, forked at shutdown, which closes every other fd
//! at once (so it holds no pipe a caller waits on for EOF); the tracer closes
//! its own copies (cheap: not the last reference), tells the child so, and
//! exits without waiting; the child then closes the links and exits. The hooks are gone a few grace
//! periods after the tracer, whatever kills the child (its own exit closes
//! the fds the same way).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// This process's attachment fds (bpf links: a classic tracepoint's link
/// holds its perf event; perf events attached the pre-5.15 way), and the rest.
fn hook_fds() -> (Vec<RawFd>, Vec<RawFd>) {
    let mut perf = Vec::new();
    let mut other = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return (perf, other);
    };
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        match std::fs::read_link(entry.path()) {
            Ok(t)
                if t.as_os_str() == "anon_inode:bpf_link"
                    || t.as_os_str() == "anon_inode:[perf_event]" =>
            {
                perf.push(fd)
            }
            _ => other.push(fd),
        }
    }
    (perf, other)
}

/// The child holding the hooks: its pid, and the pipe end whose closing
/// (after the tracer dropped its own references) lets it close them.
pub struct Holder {
    pub pid: u32,
    pub release: OwnedFd,
}

/// Hand this process's attachments to a child that closes them once
/// `Holder::release` is dropped; `None` when there is nothing to hand over,
/// the tracer is its namespace's init, or fork/pipe failed (the caller's own close then pays, as before).
///
/// The child must not close first: whoever drops the *last* reference pays
/// the grace period, so it waits for EOF on a pipe the tracer closes after
/// closing its own copies.
pub fn hand_over_hooks() -> Option<Holder> {
    // As its pid namespace's init (a pod's sidecar), the tracer's exit kills
    // every process of the namespace and waits for them: a holder would gain
    // nothing, and on 6.1 a daemon handing over hung at exit (vm-test,
    // pidns). The caller closes the links itself there.
    if std::process::id() == 1 {
        return None;
    }
    let (wait_rd, release) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
    let (hooks, other) = hook_fds();
    if hooks.is_empty() {
        return None;
    }
    let keep = wait_rd.as_raw_fd();
    let release_raw = release.as_raw_fd();
    // SAFETY: the child only calls close(2), read(2) and _exit(2), all
    // async-signal-safe, on vectors allocated before the fork.
    match unsafe { libc::fork() } {
        // SAFETY: see the fork above: close, read and _exit only.
        0 => unsafe {
            libc::close(release_raw);
            for fd in other.iter().filter(|&&fd| fd != keep) {
                libc::close(*fd);
            }
            let mut b = 0u8;
            while libc::read(keep, (&raw mut b).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            for fd in &hooks {
                libc::close(*fd);
            }
            libc::_exit(0)
        },
        -1 => None,
        pid => Some(Holder {
            pid: pid as u32,
            release,
        }),
    }
}

/// `starttime` (field 22) of /proc/PID/stat, in clock ticks since boot.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised comm, which may itself hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(19)?.parse().ok()
}
