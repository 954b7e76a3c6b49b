//! Syscall numbers -> names for the calls a hung thread is usually in.
//! Only the blocking ones matter for diagnosis, so this is not a full table.

#[cfg(target_arch = "x86_64")]
const TABLE: &[(i64, &str)] = &[
    (0, "read"),
    (1, "write"),
    (7, "poll"),
    (17, "pread64"),
    (19, "readv"),
    (20, "writev"),
    (23, "select"),
    (34, "pause"),
    (35, "nanosleep"),
    (42, "connect"),
    (43, "accept"),
    (44, "sendto"),
    (45, "recvfrom"),
    (46, "sendmsg"),
    (47, "recvmsg"),
    (61, "wait4"),
    (65, "semop"),
    (70, "msgrcv"),
    (73, "flock"),
    (128, "rt_sigtimedwait"),
    (130, "rt_sigsuspend"),
    (202, "futex"),
    (208, "io_getevents"),
    (230, "clock_nanosleep"),
    (232, "epoll_wait"),
    (247, "waitid"),
    (270, "pselect6"),
    (271, "ppoll"),
    (281, "epoll_pwait"),
    (288, "accept4"),
    (295, "preadv"),
    (299, "recvmmsg"),
    (441, "epoll_pwait2"),
    (449, "futex_waitv"),
];

// Numbers differ per architecture; elsewhere we report numbers only and the
// rules fall back to wchan/stack (see findings.rs).
#[cfg(not(target_arch = "x86_64"))]
const TABLE: &[(i64, &str)] = &[];

pub fn syscall_name(nr: i64) -> Option<&'static str> {
    TABLE.iter().find(|(n, _)| *n == nr).map(|(_, s)| *s)
}

/// Syscalls whose first argument is the fd being read: the precise answer
/// to "which fd is this thread blocked on".
pub(crate) const READS_FD_ARG0: &[&str] = &[
    "read", "readv", "pread64", "preadv", "recvfrom", "recvmsg", "recvmmsg",
];

pub(crate) const WAITS_FOR_CHILD: &[&str] = &["wait4", "waitid"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_common_blocking_calls() {
        if cfg!(target_arch = "x86_64") {
            assert_eq!(syscall_name(0), Some("read"));
            assert_eq!(syscall_name(45), Some("recvfrom"));
            assert_eq!(syscall_name(61), Some("wait4"));
            assert_eq!(syscall_name(202), Some("futex"));
            assert_eq!(syscall_name(99999), None);
        }
    }
}
