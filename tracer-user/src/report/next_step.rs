//! What to do next: one line under the verdict, for the classes of death
//! tracer recognises with certainty (docs/report.md, "What to do next").
//! Each class is read from a finding the analysis already made (a
//! certificate's killer and call, its OOM facts and the memory curve, the
//! near misses, a hang snapshot's findings); nothing here guesses. A class
//! whose facts are not all there gives no line: a run with no advice says
//! nothing rather than something plausible.
//!
//! The line is composed like the verdict (tracer's words, the job's text in
//! code spans) and each renderer escapes it as it escapes the verdict.
use serde::Serialize;

use super::snapshots::{self, SnapshotReport};
use crate::{
    analysis::{wording as w, Analysis, CauseKind, Certificate, ProcRef, Rank, Relation},
    snapshot::{FdKind, ProcSnapshot, SyscallState, HELD_BY_LEAKED, ORPHANED},
    text::markdown::code,
};

mod rules;

/// The advice of a report, when one of its findings is of a class with a
/// known remedy.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct NextStep {
    /// The advice in one sentence (the job's text in code spans, as in the
    /// verdict); report.md and report.html show it under the verdict.
    pub line: String,
    /// Which class (`kind`), and the facts that made it certain.
    pub advice: Advice,
}

/// The classes, each with the evidence that triggered it.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Advice {
    /// A process signalled pids it never spawned: at least one reached a
    /// process that was not its descendant and at least one found no
    /// process at all (ESRCH), so its pids did not come from processes it
    /// held (a literal pid in a test, a stale pid file). Remedy: mock the
    /// kill, or signal only pids you spawned.
    UnspawnedPids {
        /// The sender.
        sender: ProcRef,
        /// The targets as given that reached a process it never spawned
        /// (negative: a process group).
        hit: Vec<i64>,
        /// The targets as given that found no such process.
        missing: Vec<i64>,
        /// The certificates of the deaths it caused, by id.
        certificates: Vec<usize>,
        /// The kill_call (near misses) and signal events it rests on.
        evidence: Vec<u64>,
    },
    /// `pkill -f PATTERN` killed a process its pattern matched, which
    /// nobody in that process's lineage asked for. Remedy: anchor the
    /// pattern, or kill by pid.
    PkillPattern {
        /// The pkill process.
        pkill: ProcRef,
        /// Its pattern, as given.
        pattern: String,
        /// The certificates of the processes it killed, by id.
        certificates: Vec<usize>,
        /// The kill_call events.
        evidence: Vec<u64>,
    },
    /// A process signalled its own process group (kill(0, …), or a
    /// kill(-pgid, …) that also reached itself), and the signal killed
    /// processes of the run nobody meant to stop. Remedy: a group of their
    /// own for the processes it means to stop, or kill by pid.
    OwnGroupKill {
        /// The caller.
        sender: ProcRef,
        /// The call in C notation.
        call: String,
        /// The certificates of the processes it killed, by id.
        certificates: Vec<usize>,
        /// The kill_call event.
        evidence: Vec<u64>,
    },
    /// A hang snapshot found a thread reading a socket whose other end
    /// only a leaked process holds (its parent exited). Remedy: stop that
    /// process in the teardown of what started it.
    LeakedDaemon {
        /// The `snapshot` event.
        snapshot_seq: u64,
        /// The leaked process.
        daemon_pid: u32,
        /// Its command line, as /proc showed it.
        daemon_argv: Vec<String>,
        /// The process blocked reading.
        waiter_pid: u32,
        /// Its thread.
        waiter_tid: u32,
        /// The fd it was reading.
        fd: i32,
        /// `unix socket`, `tcp`, …
        socket: String,
        /// The syscall it was blocked in.
        syscall: String,
    },
    /// A memory cgroup's OOM kill, with the largest process of the run at
    /// the last sample before it. Remedy: raise the limit, or cut that
    /// process's memory.
    OomTopConsumer {
        /// The OOM certificate, by id.
        certificate: usize,
        /// The memory cgroup sampled.
        cgroup: String,
        /// Its limit, bytes.
        limit_bytes: u64,
        /// The largest process's pid.
        pid: u32,
        /// Its start: with `pid`, its identity.
        start: u64,
        /// Its name (`comm`).
        comm: String,
        /// Its RSS at that sample, bytes.
        rss_bytes: u64,
        /// How much it grew before the kill, bytes: from the first sample
        /// of the window that shows it to the last.
        grew_bytes: u64,
        /// The span `grew_bytes` covers, ms.
        over_ms: u64,
        /// The oom event.
        evidence: Vec<u64>,
    },
}

/// The one line under the verdict, in the verdict's order: a kill that
/// left the run, then a hang, then the unexpected deaths by rank.
pub(super) fn choose(a: &Analysis, snaps: &[SnapshotReport]) -> Option<NextStep> {
    let certs = unexpected(a);
    let outbound = a
        .foreign_signals
        .iter()
        .filter(|f| f.outbound_kill && !f.sender_is_tracer)
        .find_map(|f| {
            rules::unspawned(a, &certs, &f.sender).or_else(|| rules::pkill_outbound(a, f))
        });
    outbound.or_else(|| leaked_daemon(snaps)).or_else(|| {
        certs.iter().find_map(|c| {
            let k = c.killer.as_ref();
            let not_its_own = k.is_some_and(|k| !spawned_by_sender(k.relation));
            k.filter(|_| not_its_own)
                .and_then(|k| rules::unspawned(a, &certs, &k.process))
                .or_else(|| rules::pkill(&certs, c))
                .or_else(|| rules::own_group(&certs, c))
                .or_else(|| oom(c))
        })
    })
}

/// The unexpected deaths the report shows whole, in ranked order.
fn unexpected(a: &Analysis) -> Vec<&Certificate> {
    let mut v: Vec<&Certificate> = a
        .shown_certificates()
        .filter(|c| c.rank == Rank::Unexpected)
        .collect();
    v.sort_by_key(|c| c.id);
    v
}

/// The victim is the sender's own descendant (or the sender itself): a
/// pid it may well have had from its own fork.
fn spawned_by_sender(r: Relation) -> bool {
    matches!(
        r,
        Relation::Parent | Relation::Ancestor | Relation::Itself | Relation::Tracer
    )
}

/// The victim as its killer sees it: "a sibling", "its ancestor".
fn seen_from_killer(r: Relation) -> &'static str {
    match r {
        Relation::Itself => "itself",
        Relation::Parent => "its child",
        Relation::Ancestor => "its descendant",
        Relation::Sibling => "a sibling",
        Relation::Descendant => "its ancestor",
        Relation::UnrelatedInRun => "unrelated to it",
        Relation::OutsideRun => "outside the run",
        Relation::Tracer => "the tracer's",
    }
}

/// "pid 4242", "process group 4242".
fn target_phrase(arg: i64) -> String {
    if arg < 0 {
        format!("process group {}", arg.unsigned_abs())
    } else {
        format!("pid {arg}")
    }
}

/// "a, b and c", with "and N more" past `max`.
fn list(items: &[String], max: usize) -> String {
    let shown: Vec<&String> = items.iter().take(max).collect();
    let more = items.len().saturating_sub(max);
    let mut head: Vec<String> = shown.iter().map(|s| s.to_string()).collect();
    if more > 0 {
        head.push(format!("{more} more"));
    }
    match head.len() {
        0 => String::new(),
        1 => head.remove(0),
        n => format!("{} and {}", head[..n - 1].join(", "), head[n - 1]),
    }
}

/// An OOM kill of a memory cgroup whose limit and largest process the
/// curve read: both halves of the remedy are named from samples.
fn oom(c: &Certificate) -> Option<NextStep> {
    if c.cause.kind != CauseKind::Oom {
        return None;
    }
    let o = c.oom.as_ref()?;
    let m = o.memory.as_ref()?;
    let top = m.largest.as_ref()?;
    let limit = m.limit_bytes.or(o.limit_bytes)?;
    let cgroup = if m.cgroup.is_empty() {
        o.memcg.as_ref()?.path.clone()?
    } else {
        m.cgroup.clone()
    };
    let grew = if top.grew_bytes > 0 {
        format!(
            ", +{} in {}",
            w::bytes(top.grew_bytes),
            w::duration(top.grew_over_ms * 1_000_000)
        )
    } else {
        String::new()
    };
    let line = format!(
        "raise the memory limit of {} ({}), or cut the memory of {} (pid {}), the largest process at the last sample before the kill ({}{grew})",
        code(&cgroup),
        w::bytes(limit),
        code(&top.comm),
        top.pid,
        w::bytes(top.rss_bytes),
    );
    Some(NextStep {
        line,
        advice: Advice::OomTopConsumer {
            certificate: c.id,
            cgroup,
            limit_bytes: limit,
            pid: top.pid,
            start: top.start,
            comm: top.comm.clone(),
            rss_bytes: top.rss_bytes,
            grew_bytes: top.grew_bytes,
            over_ms: top.grew_over_ms,
            evidence: vec![o.seq],
        },
    })
}

/// Syscalls that read the fd in their first argument from a socket: the
/// waiter is reading that very socket, not accepting on another.
const SOCKET_READS: [&str; 5] = ["read", "readv", "recvfrom", "recvmsg", "recvmmsg"];

/// A run that hung (or was cancelled) reading a socket whose other end
/// only a leaked process holds: the snapshot the verdict leads with.
fn leaked_daemon(snaps: &[SnapshotReport]) -> Option<NextStep> {
    let s = snapshots::leading(snaps)?;
    let procs = &s.snapshot.processes;
    let leaked = |pid: u32| {
        let parent_gone = s
            .snapshot
            .findings
            .iter()
            .any(|f| f.kind == ORPHANED && f.pid == pid);
        let at_init = procs.iter().any(|p| p.pid == pid && p.ppid == 1);
        parent_gone || at_init
    };
    s.snapshot
        .findings
        .iter()
        .filter(|f| f.kind == HELD_BY_LEAKED)
        .find_map(|f| {
            let tid = f.tid?;
            let fd = *f.fds.first()?;
            let waiter = procs.iter().find(|p| p.pid == f.pid)?;
            let socket = match &waiter.fd(fd)?.kind {
                FdKind::Unix { .. } => "unix socket".to_string(),
                FdKind::Inet { proto, .. } => proto.clone(),
                _ => return None,
            };
            let thread = waiter.threads.iter().find(|t| t.tid == tid)?;
            let SyscallState::Syscall {
                name: Some(syscall),
                args,
                ..
            } = &thread.syscall
            else {
                return None;
            };
            if !SOCKET_READS.contains(&syscall.as_str()) || args[0] != fd as u64 {
                return None;
            }
            // Every holder leaked, as the log or /proc shows it (a
            // process merely in a session of its own may be the run's
            // own server, still meant to answer).
            if f.related_pids.is_empty() || !f.related_pids.iter().all(|&p| leaked(p)) {
                return None;
            }
            let daemon = procs.iter().find(|p| p.pid == f.related_pids[0])?;
            Some(daemon_step(s.seq, daemon, waiter, tid, fd, socket, syscall))
        })
}

fn daemon_step(
    seq: u64,
    daemon: &ProcSnapshot,
    waiter: &ProcSnapshot,
    tid: u32,
    fd: i32,
    socket: String,
    syscall: &str,
) -> NextStep {
    let name = |p: &ProcSnapshot| {
        let cmd = if p.argv.is_empty() {
            format!("[{}]", p.comm)
        } else {
            crate::text::command::abbreviate(&p.argv)
        };
        format!("{} (pid {})", code(&w::short_command(&cmd)), p.pid)
    };
    let line = format!(
        "stop {} in the teardown of the test that started it: it was leaked (its parent exited) and holds the other end of the {socket} that {} waits on in {syscall} (fd {fd})",
        name(daemon),
        name(waiter),
    );
    NextStep {
        line,
        advice: Advice::LeakedDaemon {
            snapshot_seq: seq,
            daemon_pid: daemon.pid,
            daemon_argv: daemon.argv.clone(),
            waiter_pid: waiter.pid,
            waiter_tid: tid,
            fd,
            socket,
            syscall: syscall.to_string(),
        },
    }
}

#[cfg(test)]
mod tests;
