//! Compact text view for embedding in a Markdown report (inside a fenced
//! block): findings first, since they are the answer; then one line per
//! process, per thread, per fd.
use std::fmt::Write;

use super::{FdEntry, FdKind, Holder, Snapshot, SyscallState, ThreadSnapshot};

/// Stack frames shown per blocked thread: enough to see the subsystem.
const STACK_FRAMES: usize = 4;
/// Holders shown per fd: a shared stdout pipe is held by half the job.
const HOLDERS_SHOWN: usize = 8;
/// argv characters shown per process line.
const ARGV_CHARS: usize = 200;

pub fn render_text(s: &Snapshot) -> String {
    let t = esc;
    let mut o = String::new();
    if s.findings.is_empty() {
        o.push_str("findings: none\n");
    } else {
        o.push_str("findings:\n");
        for f in &s.findings {
            let tid = f.tid.map(|t| format!(" tid {t}")).unwrap_or_default();
            let _ = writeln!(o, "  [{}] pid {}{tid}: {}", t(&f.kind), f.pid, t(&f.detail));
        }
    }
    for n in &s.notes {
        let _ = writeln!(o, "note: {}", t(n));
    }
    for p in &s.processes {
        let argv = if p.argv.is_empty() {
            format!("[{}]", t(&p.comm))
        } else {
            one_line(&p.argv.join(" "), ARGV_CHARS)
        };
        let gone = if p.vanished {
            " (vanished while read)"
        } else {
            ""
        };
        let _ = writeln!(
            o,
            "pid {} ppid {} pgid {} sid {} {} start_ns {}: {argv}{gone}",
            p.pid, p.ppid, p.pgid, p.sid, p.state, p.start_ns
        );
        if let Some(why) = &p.withheld {
            let _ = writeln!(o, "  withheld: {}", one_line(why, ARGV_CHARS));
        }
        for t in &p.threads {
            let _ = writeln!(o, "  {}", thread_line(t));
        }
        if p.threads_left_out > 0 {
            let _ = writeln!(o, "  … {} more threads, not read", p.threads_left_out);
        }
        for f in &p.fds {
            let _ = writeln!(o, "  {}", fd_line(f));
        }
        if p.fds_left_out > 0 {
            let _ = writeln!(o, "  … {} more fds, not read", p.fds_left_out);
        }
    }
    o
}

/// One thread: state, wchan, syscall and its first stack frames (report.html
/// shows these lines too).
pub fn thread_line(t: &ThreadSnapshot) -> String {
    let mut s = format!(
        "thread {} ({}) {} wchan={}",
        t.tid,
        esc(&t.comm),
        t.state,
        esc(t.wchan.as_deref().unwrap_or("-"))
    );
    match &t.syscall {
        SyscallState::Running => s.push_str(" syscall=running"),
        SyscallState::None => s.push_str(" syscall=none"),
        SyscallState::Unknown => {}
        SyscallState::Syscall { nr, name, args } => {
            let name = name.as_deref().map_or_else(|| format!("syscall_{nr}"), esc);
            let _ = write!(
                s,
                " syscall={name}({:#x}, {:#x}, {:#x})",
                args[0], args[1], args[2]
            );
        }
    }
    if t.wchan.is_some() && !t.stack.is_empty() {
        let frames: Vec<&str> = t
            .stack
            .iter()
            .take(STACK_FRAMES)
            .map(|f| f.split('+').next().unwrap_or(f))
            .collect();
        let _ = write!(s, " stack={}", esc(&frames.join("<")));
    }
    s
}

/// One fd: its target, and the processes at the other end of a pipe or
/// socket.
pub fn fd_line(f: &FdEntry) -> String {
    let access = f
        .access
        .map(|a| format!(" ({})", a.short()))
        .unwrap_or_default();
    let mut s = format!("fd {} {}{access}", f.fd, esc(&f.target));
    match &f.kind {
        FdKind::Pipe { holders, .. } => {
            let _ = write!(s, " other holders: {}", holders_text(holders));
        }
        FdKind::Unix {
            sock_type,
            name,
            peer,
            peer_holders,
            ..
        } => {
            let _ = write!(s, " unix {}", esc(sock_type));
            if let Some(n) = name {
                let _ = write!(s, " name {}", esc(n));
            }
            match peer {
                Some(p) => {
                    let _ = write!(
                        s,
                        " peer socket:[{p}] held by {}",
                        holders_text(peer_holders)
                    );
                }
                None => s.push_str(" no peer"),
            }
        }
        FdKind::Inet {
            proto,
            local,
            remote,
            state,
            peer,
            peer_holders,
            ..
        } => {
            let _ = write!(
                s,
                " {} {} -> {} {}",
                esc(proto),
                esc(local),
                esc(remote),
                esc(state)
            );
            if let Some(p) = peer {
                let _ = write!(
                    s,
                    " peer socket:[{p}] held by {}",
                    holders_text(peer_holders)
                );
            }
        }
        FdKind::File { .. } | FdKind::Socket { .. } | FdKind::Anon { .. } | FdKind::Other => {}
    }
    s
}

fn holders_text(hs: &[Holder]) -> String {
    if hs.is_empty() {
        return "nobody".into();
    }
    let mut s = hs
        .iter()
        .take(HOLDERS_SHOWN)
        .map(|h| {
            let a = h
                .access
                .map(|a| format!(" {}", a.short()))
                .unwrap_or_default();
            format!("{}({}) fd {}{a}", h.pid, esc(&h.comm), h.fd)
        })
        .collect::<Vec<_>>()
        .join(", ");
    if hs.len() > HOLDERS_SHOWN {
        let _ = write!(s, ", +{} more", hs.len() - HOLDERS_SHOWN);
    }
    s
}

/// Text that must stay on one line (argv may hold newlines: `python3 -c`
/// scripts; comm, paths and socket names too): the shared escaper, cut at
/// `max` characters.
pub(super) fn one_line(text: &str, max: usize) -> String {
    let line = crate::text::one_line(text);
    if line.chars().count() <= max {
        return line;
    }
    let mut out: String = line.chars().take(max).collect();
    out.push_str("...");
    out
}

/// Everything this view quotes from /proc is the run's to choose.
fn esc(s: &str) -> String {
    crate::text::one_line(s)
}
