//! What a blocked thread is doing, said by what its syscall is: an accept
//! waits for a connection on a listening socket (it reads nothing, though
//! a unix accept sleeps where a read does), a read names its fd, a wait
//! whom it waits for. Pure, shared by the findings that name a process.
use super::{
    syscalls::{READS_FD_ARG0, WAITS_FOR_CHILD},
    threads::{accepting, arg, command, sleeping, sleeps_in, syscall_name, CHILD_WAITS},
    FdEntry, FdKind, Holder, ProcSnapshot, ThreadSnapshot,
};

/// Holders named in one sentence; the rest are counted.
const HOLDERS_NAMED: usize = 4;

/// What `t` of `p` does, in words: "waiting in accept4 for a connection on
/// a listening socket (fd 5)", "in recvfrom reading fd 3 (socket:[81])",
/// "waiting in wait4 for pid 30". None when it is in no syscall we know.
pub(super) fn thread_doing(p: &ProcSnapshot, t: &ThreadSnapshot) -> Option<String> {
    let name = syscall_name(t);
    let fd = || arg(t, 0).and_then(|fd| p.fd(fd as i32));
    if accepting(t) {
        let call = name.unwrap_or("accept");
        let on = fd().map(|f| format!(" (fd {})", f.fd)).unwrap_or_default();
        return Some(format!(
            "waiting in {call} for a connection on a listening socket{on}"
        ));
    }
    let name = name?;
    if READS_FD_ARG0.contains(&name) {
        if let Some(f) = fd() {
            return Some(format!("in {name} reading fd {} ({})", f.fd, f.target));
        }
    }
    if WAITS_FOR_CHILD.contains(&name) {
        return Some(format!("waiting in {name} for {}", waited(t)));
    }
    Some(format!("in {name}"))
}

/// What the process as a whole is doing: its thread that accepts, reads
/// or waits for a child (a Python server's main thread sits in `join`
/// while another accepts), else its main thread.
pub(super) fn proc_doing(q: &ProcSnapshot) -> Option<String> {
    let telling = |t: &&ThreadSnapshot| {
        sleeping(t)
            && (accepting(t)
                || sleeps_in(t, CHILD_WAITS).is_some()
                || syscall_name(t)
                    .is_some_and(|n| READS_FD_ARG0.contains(&n) || WAITS_FOR_CHILD.contains(&n)))
    };
    let t = q
        .threads
        .iter()
        .find(telling)
        .or_else(|| q.threads.iter().find(|t| t.tid == q.pid))
        .or_else(|| q.threads.first())?;
    thread_doing(q, t)
}

/// Whom a wait4/waitid waits for, from its arguments.
fn waited(t: &ThreadSnapshot) -> String {
    match (syscall_name(t), arg(t, 0), arg(t, 1)) {
        (Some("wait4"), Some(a0), _) if (a0 as i32) > 0 => format!("pid {}", a0 as i32),
        (Some("waitid"), Some(1), Some(a1)) => format!("pid {}", a1 as u32),
        _ => "its children".into(),
    }
}

/// The other end of `f` as `pid` reads it: what `f` is ("a unix socket",
/// "a pipe") and who else holds that end (a pipe's writers, a socket's
/// peer's holders). None for what has no other end in view.
pub(super) fn other_end(pid: u32, f: &FdEntry) -> Option<(String, Vec<&Holder>)> {
    let (what, holders): (String, Vec<&Holder>) = match &f.kind {
        FdKind::Pipe { holders, .. } => (
            "a pipe".into(),
            holders
                .iter()
                .filter(|h| h.access.is_none_or(|a| a.can_write()))
                .collect(),
        ),
        FdKind::Unix {
            peer: Some(_),
            peer_holders,
            ..
        } => ("a unix socket".into(), peer_holders.iter().collect()),
        FdKind::Inet {
            peer: Some(_),
            proto,
            peer_holders,
            ..
        } => (format!("a {proto} socket"), peer_holders.iter().collect()),
        _ => return None,
    };
    Some((what, holders.into_iter().filter(|h| h.pid != pid).collect()))
}

/// "pid 40 (device-daemon --foreground, fd 4)", one per holder (at most
/// [`HOLDERS_NAMED`], then "+N more"), named by their command line when
/// the snapshot read them.
pub(super) fn holders_named(holders: &[&Holder], procs: &[ProcSnapshot]) -> String {
    let mut names: Vec<String> = holders
        .iter()
        .take(HOLDERS_NAMED)
        .map(|h| {
            let cmd = procs
                .iter()
                .find(|q| q.pid == h.pid)
                .map_or_else(|| h.comm.clone(), command);
            format!("pid {} ({cmd}, fd {})", h.pid, h.fd)
        })
        .collect();
    if holders.len() > HOLDERS_NAMED {
        names.push(format!("+{} more", holders.len() - HOLDERS_NAMED));
    }
    names.join(", ")
}
