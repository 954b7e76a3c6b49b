//! The deadlock rules: pure functions of captured processes, so they are
//! tested on hand-built values and never touch /proc.
use super::{
    doing::{holders_named, other_end},
    render::one_line,
    syscalls::{READS_FD_ARG0, WAITS_FOR_CHILD},
    threads::*,
    FdEntry, FdKind, Finding, ProcSnapshot, ThreadSnapshot, FROZEN, ORPHANED, SELF_HELD_PEER,
    STOPPED, WAITS_ON_BLOCKED_CHILD,
};

/// How deep a chain of waiting parents is followed.
const WAIT_DEPTH: usize = 16;

/// All findings, sorted by (pid, tid, kind).
pub fn analyze(procs: &[ProcSnapshot]) -> Vec<Finding> {
    let mut out: Vec<Finding> = procs.iter().flat_map(self_held_peer).collect();
    let self_held: Vec<(u32, Option<u32>)> = out.iter().map(|f| (f.pid, f.tid)).collect();
    out.extend(
        procs
            .iter()
            .flat_map(|p| waits_on_blocked_child(p, procs, &self_held)),
    );
    out.extend(procs.iter().filter_map(orphaned));
    out.extend(procs.iter().filter_map(stopped));
    out.extend(procs.iter().filter_map(frozen));
    out.sort_by(|a, b| (a.pid, a.tid, &a.kind).cmp(&(b.pid, b.tid, &b.kind)));
    out
}

/// Rule 1. A reader can only be woken by a write into the other end; if
/// every holder of that end is this same process, no other process ever
/// will, and as long as it holds that end the read never even sees EOF.
fn self_held_peer(p: &ProcSnapshot) -> Vec<Finding> {
    let mut out = Vec::new();
    // An accept waits for a connection: it reads none of the process's
    // sockets, though a unix accept sleeps where a read does.
    for t in p.threads.iter().filter(|t| !accepting(t)) {
        let (on_socket, wait) = match sleeps_in(t, SOCKET_READ_WAITS) {
            Some(w) => (true, w),
            None => match sleeps_in(t, PIPE_READ_WAITS) {
                Some(w) => (false, w),
                None => continue,
            },
        };
        // The syscall's first argument says exactly which fd is read; only
        // without it do we consider every fd of the matching type.
        let exact = syscall_name(t)
            .filter(|n| READS_FD_ARG0.contains(n))
            .and_then(|n| Some((n, p.fd(arg(t, 0)? as i32)?)));
        let candidates: Vec<&FdEntry> = match exact {
            Some((_, f)) => vec![f],
            None => p
                .fds
                .iter()
                .filter(|f| match f.kind {
                    FdKind::Pipe { .. } => !on_socket && f.access.is_none_or(|a| a.can_read()),
                    FdKind::Unix { .. } | FdKind::Inet { .. } => on_socket,
                    _ => false,
                })
                .collect(),
        };
        let hits: Vec<(&FdEntry, String, Vec<i32>)> = candidates
            .into_iter()
            .filter_map(|f| self_held_other_end(p, f).map(|(other, fds)| (f, other, fds)))
            .collect();
        // Without syscall args both ends of a self-held pair match: report
        // the thread once, on the lowest fd, and name the other candidates.
        let Some((f, other, self_fds)) = hits.first() else {
            continue;
        };
        let (how, caveat) = match exact {
            Some((name, _)) => (format!(" ({name} on fd {})", f.fd), String::new()),
            None => {
                let rest: Vec<String> = hits[1..].iter().map(|(g, ..)| g.fd.to_string()).collect();
                let also = if rest.is_empty() {
                    String::new()
                } else {
                    format!("; also self-held: fd {}", rest.join(", "))
                };
                (
                    String::new(),
                    format!(" (which fd is read is inferred: syscall args unavailable{also})"),
                )
            }
        };
        let list = join(self_fds.iter().map(|fd| fd.to_string()));
        out.push(Finding {
            kind: SELF_HELD_PEER.into(),
            pid: p.pid,
            tid: Some(t.tid),
            detail: format!(
                "thread {} blocked in {wait}{how}; fd {} {} — {other} is held only by this process (fd {list}): no other process can ever write{caveat}",
                t.tid, f.fd, f.target
            ),
            fds: std::iter::once(f.fd).chain(self_fds.iter().copied()).collect(),
            related_pids: Vec::new(),
        });
    }
    out
}

/// If every holder of the other end of `f` is `p` itself: a description of
/// that end and the fds of `p` holding it.
fn self_held_other_end(p: &ProcSnapshot, f: &FdEntry) -> Option<(String, Vec<i32>)> {
    match &f.kind {
        FdKind::Unix {
            peer: Some(peer),
            peer_holders,
            ..
        }
        | FdKind::Inet {
            peer: Some(peer),
            peer_holders,
            ..
        } => {
            let all_self = !peer_holders.is_empty() && peer_holders.iter().all(|h| h.pid == p.pid);
            all_self.then(|| {
                (
                    format!("its peer socket:[{peer}]"),
                    peer_holders.iter().map(|h| h.fd).collect(),
                )
            })
        }
        FdKind::Pipe { holders, .. } => {
            // Writers: every other holder not known to be read-only, plus
            // this fd itself if it was opened read-write (a FIFO O_RDWR).
            let mut writers: Vec<(u32, i32)> = holders
                .iter()
                .filter(|h| h.access.is_none_or(|a| a.can_write()))
                .map(|h| (h.pid, h.fd))
                .collect();
            if f.access.is_some_and(|a| a.can_write()) {
                writers.push((p.pid, f.fd));
            }
            let all_self = !writers.is_empty() && writers.iter().all(|(pid, _)| *pid == p.pid);
            let mut fds: Vec<i32> = writers.into_iter().map(|(_, fd)| fd).collect();
            fds.sort_unstable();
            all_self.then(|| ("its write end".to_string(), fds))
        }
        _ => None,
    }
}

/// Rule 2. A parent in wait4/waitid only wakes when a child changes state;
/// if every child it can wait for is itself asleep, the wait is as stuck as
/// they are.
fn waits_on_blocked_child(
    p: &ProcSnapshot,
    procs: &[ProcSnapshot],
    self_held: &[(u32, Option<u32>)],
) -> Vec<Finding> {
    let mut out = Vec::new();
    for t in &p.threads {
        let sys = syscall_name(t).filter(|n| WAITS_FOR_CHILD.contains(n));
        let Some(wait) =
            sleeps_in(t, CHILD_WAITS).or_else(|| sys.filter(|_| sleeping(t)).map(str::to_string))
        else {
            continue;
        };
        let children: Vec<&ProcSnapshot> = procs
            .iter()
            .filter(|c| c.ppid == p.pid && waited_for(p, t, c))
            .collect();
        if children.is_empty() || !children.iter().all(|c| blocked(c, procs, 0)) {
            continue;
        }
        let what = join(children.iter().map(|c| describe_child(c, procs, self_held)));
        out.push(Finding {
            kind: WAITS_ON_BLOCKED_CHILD.into(),
            pid: p.pid,
            tid: Some(t.tid),
            detail: format!("thread {} waits in {wait} for its children, and every one is itself blocked: {what}", t.tid),
            fds: Vec::new(),
            related_pids: children.iter().map(|c| c.pid).collect(),
        });
    }
    out
}

/// Honour the wait's target when the syscall args say it: wait4(pid>0),
/// wait4(-pgid / 0), waitid(P_PID / P_PGID). Otherwise any child.
pub(super) fn waited_for(p: &ProcSnapshot, t: &ThreadSnapshot, c: &ProcSnapshot) -> bool {
    let (Some(name), Some(a0), Some(a1)) = (syscall_name(t), arg(t, 0), arg(t, 1)) else {
        return true;
    };
    let pgid_or_own = |g: i64| if g == 0 { p.pgid } else { g as u32 };
    match name {
        "wait4" => match a0 as i32 as i64 {
            -1 => true,
            0 => c.pgid == p.pgid,
            n if n > 0 => c.pid == n as u32,
            n => c.pgid == (-n) as u32,
        },
        "waitid" => match a0 {
            1 => c.pid == a1 as u32,                      // P_PID
            2 => c.pgid == pgid_or_own(a1 as i32 as i64), // P_PGID
            _ => true,                                    // P_ALL, P_PIDFD
        },
        _ => true,
    }
}

/// Asleep or stopped in every thread, and not a zombie (a zombie child
/// means the wait is about to return). A thread in a timed sleep wakes by
/// itself, and a child that waits for children of its own is only as stuck
/// as they are: a job merely waiting on a `sleep` is no deadlock.
fn blocked(c: &ProcSnapshot, procs: &[ProcSnapshot], depth: usize) -> bool {
    if c.frozen.is_some() && !matches!(c.state, 'Z' | 'X') {
        return true;
    }
    let asleep = !matches!(c.state, 'Z' | 'X')
        && !c.threads.is_empty()
        && c.threads
            .iter()
            .all(|t| matches!(t.state, 'S' | 'D' | 'T' | 't'))
        && c.threads
            .iter()
            .any(|t| t.wchan.is_some() || matches!(t.state, 'T' | 't'));
    if !asleep || c.threads.iter().any(timed_sleep) {
        return false;
    }
    let waiting = c.threads.iter().any(|t| {
        sleeps_in(t, CHILD_WAITS).is_some()
            || syscall_name(t).is_some_and(|n| WAITS_FOR_CHILD.contains(&n))
    });
    let grandchildren: Vec<&ProcSnapshot> = procs.iter().filter(|g| g.ppid == c.pid).collect();
    if waiting && !grandchildren.is_empty() && depth < WAIT_DEPTH {
        return grandchildren.iter().all(|g| blocked(g, procs, depth + 1));
    }
    true
}

/// Rule 4. A stopped process (SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU; `t`: a
/// debugger's stop) runs again only on SIGCONT: whoever waits on it waits
/// forever. The report names the sender from the log when it saw it.
fn stopped(p: &ProcSnapshot) -> Option<Finding> {
    let all = |st: char| !p.threads.is_empty() && p.threads.iter().all(|t| t.state == st);
    let how = if p.state == 'T' || all('T') {
        "stopped (state T): it runs again only on SIGCONT"
    } else if p.state == 't' || all('t') {
        "stopped by a tracer (state t, ptrace): it runs again only when the debugger resumes it"
    } else {
        return None;
    };
    Some(Finding {
        kind: STOPPED.into(),
        pid: p.pid,
        tid: None,
        detail: format!("pid {} ({}) is {how}", p.pid, command(p)),
        fds: Vec::new(),
        related_pids: Vec::new(),
    })
}

/// Rule 5. A process in a frozen cgroup looks asleep but cannot run until
/// the cgroup is thawed.
fn frozen(p: &ProcSnapshot) -> Option<Finding> {
    let at = p.frozen.as_deref()?;
    Some(Finding {
        kind: FROZEN.into(),
        pid: p.pid,
        tid: None,
        detail: format!(
            "pid {} ({}) is frozen: its cgroup is frozen, {at}; it runs again only when that cgroup is thawed",
            p.pid,
            command(p)
        ),
        fds: Vec::new(),
        related_pids: Vec::new(),
    })
}

fn describe_child(
    c: &ProcSnapshot,
    procs: &[ProcSnapshot],
    self_held: &[(u32, Option<u32>)],
) -> String {
    let flagged = c
        .threads
        .iter()
        .find(|t| self_held.contains(&(c.pid, Some(t.tid))));
    let t = flagged
        .or_else(|| c.threads.iter().find(|t| t.tid == c.pid))
        .or_else(|| c.threads.first());
    let mut s = format!("child {} ({})", c.pid, c.comm);
    if let Some(t) = t {
        s += &format!(
            " thread {} {} in {}",
            t.tid,
            t.state,
            t.wchan.as_deref().unwrap_or("?")
        );
        if let Some(name) = syscall_name(t) {
            s += &format!(" [{name}");
            if accepting(t) {
                s += ": waiting for a connection on a listening socket";
            } else if READS_FD_ARG0.contains(&name) {
                if let Some(f) = arg(t, 0).and_then(|fd| c.fd(fd as i32)) {
                    s += &format!(" fd {} {}", f.fd, f.target);
                    // A read waits on the other end: name who holds it.
                    if let Some((_, hs)) = other_end(c.pid, f).filter(|(_, hs)| !hs.is_empty()) {
                        s += &format!(", other end held by {}", holders_named(&hs, procs));
                    }
                }
            }
            s += "]";
        }
    }
    if flagged.is_some() {
        s += " (see self_held_peer)";
    }
    if matches!(c.state, 'T' | 't') {
        s += " (stopped: see stopped)";
    } else if c.frozen.is_some() {
        s += " (frozen: see frozen)";
    }
    s
}

/// Rule 3. Init adopts a process whose parent died; in a CI job that is a
/// daemon its test forgot to reap, and it may hold ends others wait on.
fn orphaned(p: &ProcSnapshot) -> Option<Finding> {
    if p.ppid != 1 || p.pid == 1 {
        return None;
    }
    let cmd = if p.argv.is_empty() {
        p.comm.clone()
    } else {
        one_line(&p.argv.join(" "), 120)
    };
    Some(Finding {
        kind: ORPHANED.into(),
        pid: p.pid,
        tid: None,
        detail: format!(
            "pid {} ({cmd}) has ppid 1: its parent exited without reaping it and it was reparented to init (a leaked daemon?)",
            p.pid
        ),
        fds: Vec::new(),
        related_pids: Vec::new(),
    })
}

fn join(items: impl Iterator<Item = String>) -> String {
    items.collect::<Vec<_>>().join(", ")
}
