//! Reading one process (threads, fds) from /proc. Every read may fail
//! because the process exits under us; failures degrade to "unknown"
//! values and set `vanished`, never a panic.
use std::{fs, io::Read};

use procfs::process::{FDTarget, Process, Syscall};

use crate::text::command::split_argv;

use super::{
    syscalls::syscall_name, Access, SyscallState, ThreadSnapshot, ARGV_BYTES, MAX_FDS_SHOWN,
    MAX_THREADS_SHOWN,
};

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
    pub argv_truncated: bool,
    pub exe: Option<String>,
    pub state: char,
    pub threads: Vec<ThreadSnapshot>,
    pub threads_left_out: u32,
    pub fds: Vec<RawFd>,
    pub fds_left_out: u32,
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
    let (argv, argv_truncated) = read_argv(pid).unwrap_or_else(|_| {
        vanished |= !proc_.is_alive();
        (Vec::new(), false)
    });
    // exe is unreadable for kernel threads and zombies: not an error.
    let exe = proc_.exe().ok().map(|p| p.to_string_lossy().into_owned());
    let mut threads = Vec::new();
    let mut threads_left_out = 0;
    match proc_.tasks() {
        Ok(tasks) => {
            let mut tasks = tasks.flatten();
            for task in tasks.by_ref().take(MAX_THREADS_SHOWN) {
                if let Some(t) = read_thread(pid, &task) {
                    threads.push(t);
                }
            }
            // The rest only counted (each a directory entry, nothing read).
            threads_left_out = tasks.count() as u32;
        }
        Err(_) => vanished = true,
    }
    threads.sort_by_key(|t| t.tid);
    let creds = super::withhold::creds_of(pid);
    let (fds, fds_left_out) = read_fds(&proc_, pid, &mut vanished);
    vanished |= !proc_.is_alive();
    Some(RawProc {
        pid,
        start_ns: ticks_to_ns(stat.starttime, procfs::ticks_per_second()),
        ppid: stat.ppid.max(0) as u32,
        pgid: stat.pgrp.max(0) as u32,
        sid: stat.session.max(0) as u32,
        comm: stat.comm,
        argv,
        argv_truncated,
        exe,
        state: stat.state,
        threads,
        threads_left_out,
        fds,
        fds_left_out,
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

/// A process's command line from /proc/PID/cmdline, cut as an exec's argv
/// is captured: its first [`ARGV_BYTES`] bytes, and whether there were more.
/// An argv of any length is read as at most that: /proc hands out what the
/// process put in its argument area, whatever its size.
pub fn read_argv(pid: u32) -> std::io::Result<(Vec<String>, bool)> {
    let file = fs::File::open(format!("/proc/{pid}/cmdline"))?;
    let mut area = Vec::with_capacity(ARGV_BYTES + 1);
    file.take(ARGV_BYTES as u64 + 1).read_to_end(&mut area)?;
    let cut = area.len() > ARGV_BYTES;
    area.truncate(ARGV_BYTES);
    Ok((split_argv(&area), cut))
}

/// Bound per process on the fds scanned for other ends of pipes and
/// sockets: a process with a runaway fd leak must not make the snapshot
/// itself take minutes.
pub(crate) const MAX_FDS_PER_PROC: usize = 16_384;

/// The lowest [`MAX_FDS_SHOWN`] fds, read; how many more there were.
fn read_fds(proc_: &Process, pid: u32, vanished: &mut bool) -> (Vec<RawFd>, u32) {
    let Ok(iter) = proc_.fd() else {
        *vanished |= !proc_.is_alive();
        return (Vec::new(), 0);
    };
    let mut out: Vec<RawFd> = iter
        .flatten()
        .take(MAX_FDS_SHOWN)
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
    let left_out = match out.len() < MAX_FDS_SHOWN {
        true => 0,
        // Counted by name only: no link read for them.
        false => count_fds(pid).saturating_sub(out.len()) as u32,
    };
    (out, left_out)
}

/// Open fds of `pid` (entries of /proc/PID/fd; nothing read per fd).
pub fn count_fds(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
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

    /// Our own command line reads whole; an area cut inside an argument
    /// ends in the cut piece, and an empty one is no argv.
    #[test]
    fn argv_is_read_as_an_exec_area() {
        let (argv, cut) = read_argv(std::process::id()).unwrap();
        let me: Vec<String> = std::env::args().collect();
        assert_eq!((argv, cut), (me, false));
        assert_eq!(
            split_argv(b"java\0-cp\0a.jar:b.j"),
            ["java", "-cp", "a.jar:b.j"]
        );
        assert_eq!(split_argv(b"sh\0-c\0\0"), ["sh", "-c", ""]);
        assert!(split_argv(b"").is_empty());
    }

    #[test]
    fn start_time_is_boottime_ns() {
        assert_eq!(ticks_to_ns(250, 100), 2_500_000_000);
        // ~31 years of uptime: ticks * 1e9 overflows u64, the result does not.
        assert_eq!(ticks_to_ns(100_000_000_000, 100), 1_000_000_000_000_000_000);
    }
}
