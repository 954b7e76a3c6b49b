//! Findings that need the event log as well as /proc: which processes were
//! leaked (their parent exited: re-parented to init, or to the tracer, a
//! child subreaper, where ppid 1 never shows), who stopped a stopped
//! process, and a reader whose only writers are such leaked processes
//! (`subprocess.check_output(["sh", "-c", "sleep 100 & echo hi"])` waits
//! for EOF that only `sleep` can give). Pure: the report computes the log
//! facts and calls this, so `tracer report` re-derives the same findings.
use std::collections::BTreeMap;

use super::{
    doing::proc_doing,
    holds,
    syscalls::READS_FD_ARG0,
    threads::{
        accepting, arg, command, sleeps_in, syscall_name, PIPE_READ_WAITS, SOCKET_READ_WAITS,
    },
    FdEntry, FdKind, Finding, ProcSnapshot, Snapshot, ThreadSnapshot, HELD_BY_LEAKED, ORPHANED,
    STOPPED,
};

/// What the log says about the snapshot's processes.
#[derive(Debug, Default, Clone)]
pub struct LogFacts {
    /// The tracer's pid when it is the run's subreaper (record mode).
    pub reaper: Option<u32>,
    /// Leaked processes: their parent (the process that forked them) had
    /// ended; the value names that parent.
    pub orphans: BTreeMap<u32, String>,
    /// For a stopped process, the stop signal's sender as a phrase.
    pub stops: BTreeMap<u32, String>,
    /// The run's root (the wrapped command) when it is in the snapshot:
    /// what the run waits on is followed from it, and its session is the
    /// run's.
    pub root: Option<u32>,
}

/// The snapshot's findings with the log's facts applied: those about what
/// the run waits on first (see `holds`), the rest sorted as `analyze`
/// sorts them.
pub fn with_log_facts(s: &Snapshot, facts: &LogFacts) -> Vec<Finding> {
    let mut out: Vec<Finding> = s
        .findings
        .iter()
        .cloned()
        .map(|mut f| {
            if f.kind == STOPPED {
                if let Some(who) = facts.stops.get(&f.pid) {
                    f.detail = format!("{}; stopped by {who}", f.detail);
                }
            }
            f
        })
        .collect();
    // The run's session, from its root: a process outside it left it.
    let session = facts
        .root
        .and_then(|r| s.processes.iter().find(|p| p.pid == r))
        .map(|r| r.sid);
    for p in &s.processes {
        if let Some(f) = reaped_by_tracer(p, facts) {
            out.push(f);
        }
        out.extend(held_by_leaked(p, &s.processes, facts));
        out.extend(socket_held_by_leaked(p, &s.processes, facts, session));
    }
    let held = holding_of(s, facts);
    let blocks = holds::blocks_the_run(&held, &s.processes, &out);
    out.extend(blocks);
    holds::order(&mut out, &held);
    out
}

/// The pids the run waits on (see `holds`), in the order their findings
/// lead: what a hang's verdict names first. Empty without the run's root.
pub fn holding(s: &Snapshot, facts: &LogFacts) -> Vec<u32> {
    holding_of(s, facts).into_iter().map(|h| h.pid).collect()
}

fn holding_of(s: &Snapshot, facts: &LogFacts) -> Vec<holds::Held> {
    facts
        .root
        .map(|r| holds::held(&s.processes, r))
        .unwrap_or_default()
}

fn leaked(pid: u32, procs: &[ProcSnapshot], facts: &LogFacts) -> bool {
    facts.orphans.contains_key(&pid)
        || procs
            .iter()
            .any(|p| p.pid == pid && p.ppid == 1 && p.pid != 1)
}

/// `orphaned` where ppid 1 cannot show it: the tracer adopted the process.
fn reaped_by_tracer(p: &ProcSnapshot, facts: &LogFacts) -> Option<Finding> {
    let reaper = facts.reaper?;
    if p.ppid != reaper {
        return None;
    }
    let parent = facts.orphans.get(&p.pid)?;
    Some(Finding {
        kind: ORPHANED.into(),
        pid: p.pid,
        tid: None,
        detail: format!(
            "pid {} ({}) has ppid {reaper}, the tracer: its parent {parent} exited without reaping it and it was re-parented to the tracer (a subreaper) — a leaked process",
            p.pid,
            command(p)
        ),
        fds: Vec::new(),
        related_pids: Vec::new(),
    })
}

/// Where thread `t` of `p` sleeps, if in one of `waits`, and the fds it may
/// be reading there: the one its syscall's first argument names, else
/// every fd `fits` takes (the walk both findings below make).
fn blocked_reads<'a>(
    p: &'a ProcSnapshot,
    t: &ThreadSnapshot,
    waits: &[&str],
    fits: impl Fn(&FdEntry) -> bool,
) -> Option<(String, Vec<&'a FdEntry>)> {
    let wait = sleeps_in(t, waits)?;
    let exact = syscall_name(t)
        .filter(|n| READS_FD_ARG0.contains(n))
        .and_then(|_| p.fd(arg(t, 0)? as i32));
    let candidates = match exact {
        Some(f) => vec![f],
        None => p.fds.iter().filter(|f| fits(f)).collect(),
    };
    Some((wait, candidates))
}

/// A thread blocked reading a pipe whose every writer is a leaked process:
/// the read ends only when those processes exit or close their end.
fn held_by_leaked(p: &ProcSnapshot, procs: &[ProcSnapshot], facts: &LogFacts) -> Vec<Finding> {
    let mut out = Vec::new();
    let pipe_read = |f: &FdEntry| {
        matches!(f.kind, FdKind::Pipe { .. }) && f.access.is_none_or(|a| a.can_read())
    };
    for t in &p.threads {
        let Some((wait, candidates)) = blocked_reads(p, t, PIPE_READ_WAITS, pipe_read) else {
            continue;
        };
        for f in candidates {
            let FdKind::Pipe { holders, .. } = &f.kind else {
                continue;
            };
            let writers: Vec<_> = holders
                .iter()
                .filter(|h| h.pid != p.pid && h.access.is_none_or(|a| a.can_write()))
                .collect();
            if writers.is_empty() || !writers.iter().all(|h| leaked(h.pid, procs, facts)) {
                continue;
            }
            let names: Vec<String> = writers
                .iter()
                .map(|h| {
                    let cmd = procs
                        .iter()
                        .find(|q| q.pid == h.pid)
                        .map_or_else(|| h.comm.clone(), command);
                    let why = facts
                        .orphans
                        .get(&h.pid)
                        .map_or("re-parented to init".to_string(), |parent| {
                            format!("its parent {parent} exited")
                        });
                    format!("pid {} ({cmd}, fd {}; {why})", h.pid, h.fd)
                })
                .collect();
            let mut related: Vec<u32> = writers.iter().map(|h| h.pid).collect();
            related.dedup();
            out.push(Finding {
                kind: HELD_BY_LEAKED.into(),
                pid: p.pid,
                tid: Some(t.tid),
                detail: format!(
                    "thread {} of pid {} ({}) blocked in {wait} on fd {} {}: its write end is held only by {}: {} — the read sees EOF only when {} exits or closes it",
                    t.tid,
                    p.pid,
                    command(p),
                    f.fd,
                    f.target,
                    if writers.len() == 1 { "a leaked process" } else { "leaked processes" },
                    names.join(", "),
                    if writers.len() == 1 { "that process" } else { "they all" },
                ),
                fds: std::iter::once(f.fd).collect(),
                related_pids: related,
            });
            break;
        }
    }
    out
}

/// A thread blocked reading a unix or TCP socket whose other end is held
/// only by leaked or detached processes (their parent exited, or they left
/// the run's session with setsid): a daemon a test started and left
/// behind, which holds the connection and never answers. The read ends
/// only when that process writes, exits or closes its end. `session` is
/// the run's (its root's); without it, the reader's. A thread in accept
/// reads nothing: it waits for a connection.
fn socket_held_by_leaked(
    p: &ProcSnapshot,
    procs: &[ProcSnapshot],
    facts: &LogFacts,
    session: Option<u32>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let (session, whose) = match session {
        Some(s) => (s, "the run's"),
        None => (p.sid, "the reader's"),
    };
    let socket = |f: &FdEntry| matches!(f.kind, FdKind::Unix { .. } | FdKind::Inet { .. });
    for t in p.threads.iter().filter(|t| !accepting(t)) {
        let Some((wait, candidates)) = blocked_reads(p, t, SOCKET_READ_WAITS, socket) else {
            continue;
        };
        for f in candidates {
            let (what, holders) = match &f.kind {
                FdKind::Unix { peer_holders, .. } => ("unix socket", peer_holders),
                FdKind::Inet {
                    proto,
                    peer_holders,
                    ..
                } => (proto.as_str(), peer_holders),
                _ => continue,
            };
            let others: Vec<_> = holders.iter().filter(|h| h.pid != p.pid).collect();
            let why = |pid: u32| -> Option<String> {
                let q = procs.iter().find(|q| q.pid == pid);
                // It left the run's session (setsid, or a child of a
                // process that did): a daemon on its own. Said as the
                // snapshot has it: its own session only when it leads it.
                let detached = q.filter(|q| q.sid != session).map(|q| {
                    if q.sid == q.pid {
                        "detached: its own session".to_string()
                    } else {
                        format!("detached: session {}, not {whose}", q.sid)
                    }
                });
                let orphan = facts
                    .orphans
                    .get(&pid)
                    .map(|parent| format!("its parent {parent} exited"));
                let reparented = q.is_some_and(|q| q.ppid == 1 && q.pid != 1);
                match (detached, orphan) {
                    (Some(d), Some(o)) => Some(format!("{d}; {o}")),
                    (Some(d), None) => Some(d),
                    (None, Some(o)) => Some(o),
                    (None, None) if reparented => Some("re-parented to init".into()),
                    _ => None,
                }
            };
            if others.is_empty() || !others.iter().all(|h| why(h.pid).is_some()) {
                continue;
            }
            let names: Vec<String> = others
                .iter()
                .map(|h| {
                    let q = procs.iter().find(|q| q.pid == h.pid);
                    let cmd = q.map_or_else(|| h.comm.clone(), command);
                    let doing = q
                        .and_then(proc_doing)
                        .map(|d| format!(", {d}"))
                        .unwrap_or_default();
                    format!(
                        "pid {} ({cmd}, fd {}; {}{doing})",
                        h.pid,
                        h.fd,
                        why(h.pid).unwrap_or_default()
                    )
                })
                .collect();
            let mut related: Vec<u32> = others.iter().map(|h| h.pid).collect();
            related.dedup();
            out.push(Finding {
                kind: HELD_BY_LEAKED.into(),
                pid: p.pid,
                tid: Some(t.tid),
                detail: format!(
                    "thread {} of pid {} ({}) blocked in {wait} reading a {what} (fd {}) whose other end is held only by {}: {} — the read ends only when {} writes, exits or closes it",
                    t.tid,
                    p.pid,
                    command(p),
                    f.fd,
                    if others.len() == 1 { "a leaked or detached process" } else { "leaked or detached processes" },
                    names.join(", "),
                    if others.len() == 1 { "that process" } else { "one of them" },
                ),
                fds: std::iter::once(f.fd).collect(),
                related_pids: related,
            });
            break;
        }
    }
    out
}
