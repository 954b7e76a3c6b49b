//! What holds the run: from the run's root down its waits (a parent in
//! wait4 for a child), to the processes at the end of them, which the run
//! is waiting on. Their findings lead, and one that is blocked reading a
//! pipe or socket another process holds the other end of gets a finding
//! naming that holder (`blocks_the_run`): "the root waits on X, X reads
//! what Y holds" is the answer to a hang, on one line. Pure, like the
//! other rules; the run's root comes from the log (`LogFacts::root`).
use super::{
    doing::{holders_named, other_end, proc_doing},
    findings::waited_for,
    syscalls::{READS_FD_ARG0, WAITS_FOR_CHILD},
    threads::{
        accepting, arg, command, sleeping, sleeps_in, syscall_name, CHILD_WAITS, PIPE_READ_WAITS,
        SOCKET_READ_WAITS,
    },
    FdEntry, FdKind, Finding, ProcSnapshot, BLOCKS_THE_RUN, FROZEN, HELD_BY_LEAKED, SELF_HELD_PEER,
    STOPPED,
};

/// How deep a chain of waiting parents is followed.
const WAIT_DEPTH: usize = 16;

/// A process the run waits on, and who waits for it (pid, the call).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Held {
    pub pid: u32,
    pub waiter: Option<(u32, String)>,
}

/// The processes the run waits on: each child a waiting process waits
/// for (wait4/waitid, honouring its target), followed down from `root` to
/// the first that waits for no child of its own. The root itself when it
/// waits for none. Depth first, children by pid.
pub(super) fn held(procs: &[ProcSnapshot], root: u32) -> Vec<Held> {
    let mut out = Vec::new();
    if let Some(r) = procs.iter().find(|p| p.pid == root) {
        walk(r, procs, 0, None, &mut out);
    }
    out
}

fn walk(
    p: &ProcSnapshot,
    procs: &[ProcSnapshot],
    depth: usize,
    waiter: Option<(u32, String)>,
    out: &mut Vec<Held>,
) {
    let waits: Vec<_> = p
        .threads
        .iter()
        .filter(|t| sleeping(t))
        .filter_map(|t| {
            let call = syscall_name(t)
                .filter(|n| WAITS_FOR_CHILD.contains(n))
                .map(str::to_string)
                .or_else(|| sleeps_in(t, CHILD_WAITS))?;
            Some((t, call))
        })
        .collect();
    let children: Vec<(&ProcSnapshot, &String)> = procs
        .iter()
        .filter(|c| c.ppid == p.pid)
        .filter_map(|c| {
            let (_, call) = waits.iter().find(|(t, _)| waited_for(p, t, c))?;
            Some((c, call))
        })
        .collect();
    if children.is_empty() || depth >= WAIT_DEPTH {
        out.push(Held { pid: p.pid, waiter });
        return;
    }
    for (c, call) in children {
        walk(c, procs, depth + 1, Some((p.pid, call.clone())), out);
    }
}

/// Kinds that say why a process the run waits on is stuck: one of them
/// about such a process leads the verdict.
pub const STUCK_KINDS: [&str; 5] = [
    BLOCKS_THE_RUN,
    SELF_HELD_PEER,
    HELD_BY_LEAKED,
    STOPPED,
    FROZEN,
];

/// `blocks_the_run` for each held process that no other finding explains:
/// a thread blocked reading a pipe or socket whose other end other
/// processes hold, those named, and what they are doing.
pub(super) fn blocks_the_run(
    held: &[Held],
    procs: &[ProcSnapshot],
    found: &[Finding],
) -> Vec<Finding> {
    held.iter()
        .filter(|h| {
            !found
                .iter()
                .any(|f| f.pid == h.pid && STUCK_KINDS.contains(&f.kind.as_str()))
        })
        .filter_map(|h| {
            let p = procs.iter().find(|p| p.pid == h.pid)?;
            blocked_read(p, h, procs)
        })
        .collect()
}

fn blocked_read(p: &ProcSnapshot, h: &Held, procs: &[ProcSnapshot]) -> Option<Finding> {
    p.threads.iter().find_map(|t| {
        if accepting(t) {
            return None;
        }
        let (on_socket, wait) = match sleeps_in(t, SOCKET_READ_WAITS) {
            Some(w) => (true, w),
            None => (false, sleeps_in(t, PIPE_READ_WAITS)?),
        };
        let call = syscall_name(t).filter(|n| READS_FD_ARG0.contains(n));
        // The syscall's fd when it names one; else the one fd of the type
        // whose other end someone else holds, if there is only one.
        let f: &FdEntry = match call.and_then(|_| p.fd(arg(t, 0)? as i32)) {
            Some(f) => f,
            None => {
                let mut c = p.fds.iter().filter(|f| {
                    let kind_fits = match f.kind {
                        FdKind::Pipe { .. } => !on_socket && f.access.is_none_or(|a| a.can_read()),
                        FdKind::Unix { .. } | FdKind::Inet { .. } => on_socket,
                        _ => false,
                    };
                    kind_fits && other_end(p.pid, f).is_some_and(|(_, hs)| !hs.is_empty())
                });
                let one = c.next()?;
                if c.next().is_some() {
                    return None;
                }
                one
            }
        };
        let (what, holders) = other_end(p.pid, f)?;
        if holders.is_empty() {
            return None;
        }
        let first = holders[0].pid;
        let only = format!("only {}", holders_named(&holders, procs));
        let hold = if holders.len() == 1 { "holds" } else { "hold" };
        let how = call.map_or(wait, str::to_string);
        // What the holder does: waiting for this very process is a
        // deadlock; anything else it is blocked in is said as it is.
        let waits_for_it = h.waiter.as_ref().filter(|(w, _)| *w == first);
        let holder_does = match waits_for_it {
            Some((w, call)) => format!(
                ", and pid {w} waits in {call} for pid {}: neither can go on",
                p.pid
            ),
            None => procs
                .iter()
                .find(|q| q.pid == first)
                .and_then(proc_doing)
                .map(|d| format!(", and pid {first} is {d}"))
                .unwrap_or_default(),
        };
        let run_waits = match &h.waiter {
            Some((w, call)) if waits_for_it.is_none() => {
                format!("; pid {w} waits in {call} for it")
            }
            _ => String::new(),
        };
        let mut related: Vec<u32> = holders.iter().map(|x| x.pid).collect();
        related.dedup();
        if let Some((w, _)) = h.waiter.as_ref().filter(|(w, _)| !related.contains(w)) {
            related.push(*w);
        }
        Some(Finding {
            kind: BLOCKS_THE_RUN.into(),
            pid: p.pid,
            tid: Some(t.tid),
            detail: format!(
                "thread {} of pid {} ({}) blocked in {how} reading {what} (fd {}) whose other end {only} {hold}{holder_does}{run_waits}",
                t.tid,
                p.pid,
                command(p),
                f.fd,
            ),
            fds: vec![f.fd],
            related_pids: related,
        })
    })
}

/// The report's order: findings about what the run waits on first (in
/// `held`'s order, the stuck kinds before the rest), then every other by
/// (pid, tid, kind), as `analyze` sorts.
pub(super) fn order(findings: &mut [Finding], held: &[Held]) {
    findings.sort_by_key(|f| {
        let at = held.iter().position(|h| h.pid == f.pid);
        let stuck = at.is_some() && STUCK_KINDS.contains(&f.kind.as_str());
        (
            at.is_none(),
            at.unwrap_or(0),
            !stuck,
            f.pid,
            f.tid,
            f.kind.clone(),
        )
    });
}
