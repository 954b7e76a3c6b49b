//! Reading one process (threads, fds) from /proc. Every read may fail
//! because the process exits under us; failures degrade to "unknown"
//! values and set `vanished`, never a panic.
use std::fs;

use procfs::process::{FDTarget, Process, Syscall};

use super::{syscalls::syscall_name, Access, SyscallState, ThreadSnapshot};

/// An fd as read, before its other ends are resolved.
pub(crate) struct RawFd {
    pub fd: i32,
    pub target: String,
    pub access: Option<Access>,
    pub what: RawKind,
}

pub(crate) enum RawKind {
    File(String),
    Pipe(u64),
    Socket(u64),
    Anon(String),
    Other,
}

pub(crate) struct RawProc {
    pub pid: u32,
    pub start_ns: u64,
    pub ppid: u32,
    pub pgid: u32,
    pub sid: u32,
    pub comm: String,
    pub argv: Vec<String>,
    pub exe: Option<String>,
    pub state: char,
    pub threads: Vec<ThreadSnapshot>,
    pub fds: Vec<RawFd>,
    pub vanished: bool,
    /// None when /proc/PID/status could not be read.
    pub creds: Option<super::withhold::Creds>,
}

/// starttime is in clock ticks since boot; the tracer keys processes by
/// CLOCK_BOOTTIME ns, so convert exactly (u128: no overflow, no float).
pub(crate) fn ticks_to_ns(ticks: u64, clk_tck: u64) -> u64 {
    (u128::from(ticks) * 1_000_000_000 / u128::from(clk_tck.max(1))) as u64
}

/// None when the process is already gone (nothing worth reporting).
pub(crate) fn read_process(pid: u32) -> Option<RawProc> {
    let proc_ = Process::new(pid as i32).ok()?;
    let stat = proc_.stat().ok()?;
    let mut vanished = false;
    let argv = proc_.cmdline().unwrap_or_else(|_| {
        vanished |= !proc_.is_alive();
        Vec::new()
    });
    // exe is unreadable for kernel threads and zombies: not an error.
    let exe = proc_.exe().ok().map(|p| p.to_string_lossy().into_owned());
    let mut threads = Vec::new();
    match proc_.tasks() {
        Ok(tasks) => {
            for task in tasks.flatten() {
                if let Some(t) = read_thread(pid, &task) {
                    threads.push(t);
                }
            }
        }
        Err(_) => vanished = true,
    }
    threads.sort_by_key(|t| t.tid);
    let creds = super::withhold::creds_of(pid);
    let fds = read_fds(&proc_, pid, &mut vanished);
    vanished |= !proc_.is_alive();
    Some(RawProc {
        pid,
        start_ns: ticks_to_ns(stat.starttime, procfs::ticks_per_second()),
        ppid: stat.ppid.max(0) as u32,
        pgid: stat.pgrp.max(0) as u32,
        sid: stat.session.max(0) as u32,
        comm: stat.comm,
        argv,
        exe,
        state: stat.state,
        threads,
        fds,
        vanished,
        creds,
    })
}

fn read_thread(pid: u32, task: &procfs::process::Task) -> Option<ThreadSnapshot> {
    let stat = task.stat().ok()?;
    let base = format!("/proc/{pid}/task/{}", task.tid);
    let wchan = fs::read_to_string(format!("{base}/wchan"))
        .ok()
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty() && w != "0");
    // Root-only; lines look like "[<0>] unix_stream_read_generic+0x70d/0xcd0".
    let stack = fs::read_to_string(format!("{base}/stack"))
        .map(|s| {
            s.lines()
                .map(|l| l.split_once("] ").map_or(l, |(_, f)| f).trim().to_string())
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let syscall = match task.syscall() {
        Ok(Syscall::Running) => SyscallState::Running,
        Ok(Syscall::Blocked {
            syscall_number: -1, ..
        }) => SyscallState::None,
        Ok(Syscall::Blocked {
            syscall_number,
            argument_registers,
            ..
        }) => SyscallState::Syscall {
            nr: syscall_number,
            name: syscall_name(syscall_number).map(str::to_string),
            args: argument_registers,
        },
        // Err: unreadable or exited; `_`: Syscall is #[non_exhaustive].
        _ => SyscallState::Unknown,
    };
    Some(ThreadSnapshot {
        tid: task.tid as u32,
        comm: stat.comm,
        state: stat.state,
        wchan,
        stack,
        syscall,
    })
}

/// Bound per process: a process with a runaway fd leak must not make the
/// snapshot itself take minutes.
pub(crate) const MAX_FDS_PER_PROC: usize = 16_384;

fn read_fds(proc_: &Process, pid: u32, vanished: &mut bool) -> Vec<RawFd> {
    let Ok(iter) = proc_.fd() else {
        *vanished |= !proc_.is_alive();
        return Vec::new();
    };
    let mut out: Vec<RawFd> = iter
        .flatten()
        .take(MAX_FDS_PER_PROC)
        .map(|info| {
            let (target, what) = match info.target {
                FDTarget::Path(p) => {
                    let s = p.to_string_lossy().into_owned();
                    (s.clone(), RawKind::File(s))
                }
                FDTarget::Pipe(i) => (format!("pipe:[{i}]"), RawKind::Pipe(i)),
                FDTarget::Socket(i) => (format!("socket:[{i}]"), RawKind::Socket(i)),
                FDTarget::AnonInode(n) => {
                    let name = n.trim_start_matches('[').trim_end_matches(']').to_string();
                    (format!("anon_inode:{n}"), RawKind::Anon(name))
                }
                FDTarget::MemFD(n) => (format!("/memfd:{n}"), RawKind::File(format!("/memfd:{n}"))),
                FDTarget::Net(i) => (format!("net:[{i}]"), RawKind::Other),
                FDTarget::Other(k, i) => (format!("{k}:[{i}]"), RawKind::Other),
                FDTarget::Unknown(k, v) => (format!("{k}:{v}"), RawKind::Other),
            };
            RawFd {
                fd: info.fd,
                target,
                access: fd_access(pid, info.fd),
                what,
            }
        })
        .collect();
    out.sort_by_key(|f| f.fd);
    out
}

/// Access mode from /proc/PID/fdinfo/FD `flags:` (octal). This is what
/// tells the read end of a pipe from the write end: both share one inode.
pub(crate) fn fd_access(pid: u32, fd: i32) -> Option<Access> {
    let text = fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
    parse_fdinfo_flags(&text).map(Access::from_flags)
}

pub(crate) fn parse_fdinfo_flags(text: &str) -> Option<u32> {
    let line = text.lines().find_map(|l| l.strip_prefix("flags:"))?;
    u32::from_str_radix(line.trim(), 8).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_flags_give_pipe_end() {
        let read_end = "pos:\t0\nflags:\t02000000\nmnt_id:\t16\nino:\t21926\n";
        let write_end = "pos:\t0\nflags:\t02000001\nmnt_id:\t16\n";
        let sock = "pos:\t0\nflags:\t02000002\n";
        assert_eq!(
            parse_fdinfo_flags(read_end).map(Access::from_flags),
            Some(Access::Read)
        );
        assert_eq!(
            parse_fdinfo_flags(write_end).map(Access::from_flags),
            Some(Access::Write)
        );
        assert_eq!(
            parse_fdinfo_flags(sock).map(Access::from_flags),
            Some(Access::ReadWrite)
        );
        assert_eq!(parse_fdinfo_flags("pos:\t0\n"), None);
    }

    #[test]
    fn start_time_is_boottime_ns() {
        assert_eq!(ticks_to_ns(250, 100), 2_500_000_000);
        // ~31 years of uptime: ticks * 1e9 overflows u64, the result does not.
        assert_eq!(ticks_to_ns(100_000_000_000, 100), 1_000_000_000_000_000_000);
    }
}
