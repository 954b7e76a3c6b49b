//! Reading a captured thread's state: where it sleeps (wchan or stack),
//! in which syscall and with which arguments, and a process's command.
//! Pure, shared by the deadlock rules and the leak descriptions.
use super::{render::one_line, ProcSnapshot, SyscallState, ThreadSnapshot};

/// Kernel functions a thread sleeps in while reading a socket. Names vary
/// by kernel: 6.x inlines unix_stream_data_wait into
/// unix_stream_read_generic (what /proc/TID/wchan shows on 6.18), and TCP
/// reads sleep in the generic wait_woken, so the stack is checked too.
pub(super) const SOCKET_READ_WAITS: &[&str] = &[
    "unix_stream_data_wait",
    "unix_stream_read_generic",
    "unix_stream_recvmsg",
    "unix_seqpacket_recvmsg",
    "__skb_wait_for_more_packets",
    "__skb_recv_datagram",
    "skb_recv_datagram",
    "__unix_dgram_recvmsg",
    "unix_dgram_recvmsg",
    "sk_wait_data",
    "tcp_recvmsg_locked",
    "tcp_recvmsg",
    "udp_recvmsg",
];
/// Pipe reads: pipe_wait (< 5.8), pipe_read (5.8..6.x), anon_pipe_read /
/// fifo_pipe_read (6.15+, seen on 6.18).
pub(super) const PIPE_READ_WAITS: &[&str] = &[
    "pipe_read",
    "pipe_wait",
    "pipe_read_wait",
    "anon_pipe_read",
    "fifo_pipe_read",
];
/// Where a thread waiting for a connection sleeps: a unix accept waits
/// for its queue in the datagram helpers a read also uses
/// (`__skb_wait_for_more_packets` under `unix_accept`), so these frames,
/// or the syscall, tell an accept from a read.
pub(super) const ACCEPT_WAITS: &[&str] = &[
    "unix_accept",
    "inet_csk_accept",
    "inet_csk_wait_for_connect",
];
pub(super) const ACCEPT_CALLS: &[&str] = &["accept", "accept4"];
pub(super) const CHILD_WAITS: &[&str] = &["do_wait", "kernel_wait4", "kernel_waitid"];
/// Timed sleeps wake by themselves: a child in one is not stuck.
pub(super) const TIMED_SLEEPS: &[&str] = &["hrtimer_nanosleep", "do_nanosleep", "common_nsleep"];
pub(super) const TIMED_SLEEP_CALLS: &[&str] = &["nanosleep", "clock_nanosleep"];
/// "plus-offset" and compiler suffixes off a frame: "do_wait+0x53/0x120" ->
/// "do_wait", "poll_schedule_timeout.constprop.0" -> "poll_schedule_timeout".
pub(super) fn func(frame: &str) -> &str {
    let f = frame.split('+').next().unwrap_or(frame);
    f.split('.').next().unwrap_or(f)
}

pub(super) fn sleeping(t: &ThreadSnapshot) -> bool {
    matches!(t.state, 'S' | 'D')
}

/// Where the thread sleeps if it is in one of `names`: the wchan, or the
/// innermost matching stack frame (for generic wchans like wait_woken).
pub(super) fn sleeps_in(t: &ThreadSnapshot, names: &[&str]) -> Option<String> {
    if !sleeping(t) {
        return None;
    }
    let wchan = t.wchan.as_deref().map(func);
    if let Some(w) = wchan.filter(|w| names.contains(w)) {
        return Some(w.to_string());
    }
    let frame = t
        .stack
        .iter()
        .map(|f| func(f))
        .find(|f| names.contains(f))?;
    Some(match wchan {
        Some(w) => format!("{w} ({frame})"),
        None => frame.to_string(),
    })
}

pub(super) fn syscall_name(t: &ThreadSnapshot) -> Option<&str> {
    match &t.syscall {
        SyscallState::Syscall { name, .. } => name.as_deref(),
        _ => None,
    }
}

pub(super) fn arg(t: &ThreadSnapshot, i: usize) -> Option<u64> {
    match &t.syscall {
        SyscallState::Syscall { args, .. } => args.get(i).copied(),
        _ => None,
    }
}

/// The thread waits for a connection on a listening socket (accept,
/// accept4): it reads nothing, whatever its wait channel shares with a
/// read.
pub(super) fn accepting(t: &ThreadSnapshot) -> bool {
    syscall_name(t).is_some_and(|n| ACCEPT_CALLS.contains(&n))
        || sleeps_in(t, ACCEPT_WAITS).is_some()
}

pub(super) fn timed_sleep(t: &ThreadSnapshot) -> bool {
    t.state == 'S'
        && (sleeps_in(t, TIMED_SLEEPS).is_some()
            || syscall_name(t).is_some_and(|n| TIMED_SLEEP_CALLS.contains(&n)))
}

pub(super) fn command(p: &ProcSnapshot) -> String {
    if p.argv.is_empty() {
        p.comm.clone()
    } else {
        one_line(&p.argv.join(" "), 120)
    }
}
