//! Live snapshot of hung processes: threads, wait channels, syscalls and
//! open fds with *who holds the other end*, plus findings for the classic
//! self-deadlocks (a thread reading a socket whose only peer it holds
//! itself; a parent waiting on a child that is itself blocked; a leaked
//! daemon reparented to init), ordered by what holds the run (`holds`: the
//! process its root waits on leads, with who holds the other end of its
//! read). A blocked call is said as what it is (`doing`): an accept waits
//! for a connection, it never reads.
//!
//! Capture (`take`) reads /proc and sock_diag once; analysis
//! (`analyze`) is a pure function of the captured values, so every rule is
//! unit-testable from hand-built `Snapshot`s. Everything is ordered
//! (pid, tid, fd, holder) so two snapshots of the same state compare equal.
//!
//! Limits, by design: a thread in poll/epoll/select is not judged (it may
//! wait on many fds); sock_diag sees only the caller's network namespace;
//! "held only by this process" cannot rule out another thread of that same
//! process writing later, which is why the finding says *no other process*.
use serde::{Deserialize, Serialize};

mod doing;
mod findings;
mod freezer;
#[cfg(test)]
mod hang_tests;
mod holds;
mod leaked;
mod procread;
mod render;
mod sockdiag;
mod syscalls;
mod take;
#[cfg(test)]
mod tests;
mod threads;
mod withhold;

pub use findings::analyze;
pub use holds::STUCK_KINDS;
pub use leaked::{holding, with_log_facts, LogFacts};
pub use procread::{count_fds, read_argv};
pub use render::{fd_line, render_text, thread_line};
pub use syscalls::{syscall_name, syscall_name_on};
pub use take::{take, take_for};
pub use withhold::{creds_of, foreign, foreign_program, Creds, Viewer};

/// Threads read per process: each costs four /proc reads and a few hundred
/// bytes of log (a kernel stack is up to 64 frames), and a process with
/// 30,000 threads must not make one snapshot line tens of MB.
pub const MAX_THREADS_SHOWN: usize = 512;
/// Fds read per process (the lowest: stdio and the pipes a runner set up
/// come first); the rest are only counted. A runaway fd leak of 16,384
/// fds with long paths made one process's entry several MB.
pub const MAX_FDS_SHOWN: usize = 1024;
/// Bytes of a command line read from /proc/PID/cmdline: as many as an
/// exec's argv is captured with, so a 1.5 MB Java classpath costs a log
/// line 4 KiB, not 1.5 MB (48 processes sharing one made a snapshot line
/// over the reader's 64 MiB limit).
pub const ARGV_BYTES: usize = tracer_common::ARGV_LEN;

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Finding kinds (the `Finding::kind` strings).
pub const SELF_HELD_PEER: &str = "self_held_peer";
pub const WAITS_ON_BLOCKED_CHILD: &str = "waits_on_blocked_child";
pub const ORPHANED: &str = "orphaned";
pub const STOPPED: &str = "stopped";
pub const FROZEN: &str = "frozen";
pub const HELD_BY_LEAKED: &str = "held_by_leaked";
pub const BLOCKS_THE_RUN: &str = "blocks_the_run";

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Sorted by pid.
    pub processes: Vec<ProcSnapshot>,
    /// Sorted by (pid, tid, kind) as taken; a report's list leads with those
    /// about the processes the run waits on (`holding`).
    pub findings: Vec<Finding>,
    /// Capture caveats a reader must know to trust the findings (sock_diag
    /// unavailable, /proc scan truncated, pid vanished). Empty when complete.
    #[serde(default)]
    pub notes: Vec<String>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProcSnapshot {
    /// Process id (tgid).
    pub pid: u32,
    /// /proc/PID/stat starttime in CLOCK_BOOTTIME ns: with `pid` it is the
    /// key the tracer's event log uses for a process (pids get reused).
    pub start_ns: u64,
    /// Its parent.
    pub ppid: u32,
    /// Its process group.
    pub pgid: u32,
    /// Its session.
    pub sid: u32,
    /// The kernel's 15-character task name.
    pub comm: String,
    /// Its command line from /proc.
    pub argv: Vec<String>,
    /// `argv` was longer than the capture limit (as an exec's) and was cut.
    #[serde(default, skip_serializing_if = "is_false")]
    pub argv_truncated: bool,
    /// Its executable from /proc, when readable.
    pub exe: Option<String>,
    /// Process state letter from /proc/PID/stat (R, S, D, Z, T, t, ...).
    pub state: char,
    /// Sorted by tid; at most [`MAX_THREADS_SHOWN`].
    pub threads: Vec<ThreadSnapshot>,
    /// Threads beyond those in `threads`, not read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub threads_left_out: u32,
    /// Sorted by fd; the lowest [`MAX_FDS_SHOWN`].
    pub fds: Vec<FdEntry>,
    /// Open fds beyond those in `fds`, not read.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fds_left_out: u32,
    /// The process exited while being read: what is here is partial.
    #[serde(default)]
    pub vanished: bool,
    /// Why its kernel stacks, wait channels, syscalls, exe and fds are
    /// empty: it runs as another user than the run's, who reads this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
    /// Its cgroup is frozen (v2 cgroup.freeze, v1 freezer): which and where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen: Option<String>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ThreadSnapshot {
    /// Thread id.
    pub tid: u32,
    /// The thread's task name.
    pub comm: String,
    /// Thread state letter from /proc/TID/stat.
    pub state: char,
    /// Kernel function the thread sleeps in; None when running ("0").
    pub wchan: Option<String>,
    /// Kernel stack frames, innermost first, e.g. "unix_stream_read_generic+0x70d/0xcd0".
    /// Empty when unreadable (needs root) or running.
    pub stack: Vec<String>,
    /// What it is doing at the user/kernel boundary.
    pub syscall: SyscallState,
}

/// /proc/TID/syscall: what the thread is doing at the user/kernel boundary.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SyscallState {
    /// On a CPU: no syscall registers to report.
    Running,
    /// Blocked outside any syscall (number -1, e.g. a page fault).
    None,
    /// Unreadable (permission, or the thread exited).
    Unknown,
    /// Blocked inside syscall `nr`, named on x86-64 and arm64.
    Syscall {
        /// The syscall number.
        nr: i64,
        /// Its name in the table of the machine's architecture.
        name: Option<String>,
        /// Its six argument registers.
        args: [u64; 6],
    },
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    /// From fdinfo `flags:` (octal open flags): O_ACCMODE is the low 2 bits.
    pub fn from_flags(flags: u32) -> Access {
        match flags & 0o3 {
            0 => Access::Read,
            1 => Access::Write,
            _ => Access::ReadWrite,
        }
    }
    pub fn can_read(self) -> bool {
        self != Access::Write
    }
    pub fn can_write(self) -> bool {
        self != Access::Read
    }
    pub fn short(self) -> &'static str {
        match self {
            Access::Read => "r",
            Access::Write => "w",
            Access::ReadWrite => "rw",
        }
    }
}

/// One (process, fd) holding some inode.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Holder {
    /// The holding process.
    pub pid: u32,
    /// Its task name.
    pub comm: String,
    /// The fd it holds the inode with.
    pub fd: i32,
    /// Open mode; known for pipe holders (it tells which end), else None.
    pub access: Option<Access>,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FdEntry {
    /// The fd number.
    pub fd: i32,
    /// Raw /proc/PID/fd/N link text ("socket:[123]", "/tmp/x", ...).
    pub target: String,
    /// From /proc/PID/fdinfo/N flags; None if unreadable.
    pub access: Option<Access>,
    /// What the fd is (`type`: file, pipe, unix, inet, socket, anon, other).
    pub kind: FdKind,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FdKind {
    File {
        /// The file's path.
        path: String,
    },
    Pipe {
        /// The pipe's inode.
        inode: u64,
        /// Every other (pid, fd) with this pipe open, in any process on the
        /// machine, with its access mode (= which end it holds).
        holders: Vec<Holder>,
    },
    Unix {
        /// The socket's inode.
        inode: u64,
        /// "stream", "dgram", "seqpacket".
        sock_type: String,
        /// Bound path (or "@abstract"), if any.
        name: Option<String>,
        /// The peer socket's inode, when known.
        peer: Option<u64>,
        /// Every (pid, fd) on the machine holding the peer socket.
        peer_holders: Vec<Holder>,
    },
    Inet {
        /// The socket's inode.
        inode: u64,
        /// "tcp", "tcp6", "udp", "udp6".
        proto: String,
        /// Local address:port.
        local: String,
        /// Remote address:port.
        remote: String,
        /// TCP state name ("ESTABLISHED", "LISTEN", ...).
        state: String,
        /// The other end when it is a socket on this machine (loopback).
        peer: Option<u64>,
        /// Every (pid, fd) on the machine holding the peer socket.
        peer_holders: Vec<Holder>,
    },
    /// A socket of another family, or one sock_diag did not report.
    Socket {
        /// The socket's inode.
        inode: u64,
    },
    /// anon_inode:[eventfd], anon_inode:[eventpoll], anon_inode:inotify, ...
    Anon {
        /// The anon inode's name.
        name: String,
    },
    Other,
}

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Finding {
    /// self_held_peer, waits_on_blocked_child, orphaned, stopped or
    /// frozen; in a report also held_by_leaked and blocks_the_run, which
    /// need the log.
    pub kind: String,
    /// The process the finding is about.
    pub pid: u32,
    /// The blocked thread, when one.
    pub tid: Option<u32>,
    /// One self-contained sentence naming fds, inodes and pids.
    pub detail: String,
    /// Fds involved (for self_held_peer: the fd read first, then the fds
    /// holding the other end).
    #[serde(default)]
    pub fds: Vec<i32>,
    /// Other processes involved (for waits_on_blocked_child: the children).
    #[serde(default)]
    pub related_pids: Vec<u32>,
}

impl ProcSnapshot {
    pub fn fd(&self, fd: i32) -> Option<&FdEntry> {
        self.fds.iter().find(|f| f.fd == fd)
    }
}
