//! Syscall numbers -> names, per architecture: the call a hung thread is
//! in, and the syscall a seccomp filter forbade. Whole tables: x86-64's
//! generated from the kernel's asm/unistd_64.h (Linux UAPI headers, Debian's
//! linux-libc-dev), arm64's the generic one; a file each. Both are compiled
//! into every build, so a log recorded on one is named right when rendered
//! on the other.
mod aarch64;
mod x86_64;

use aarch64::AARCH64;
use x86_64::X86_64;

/// The table of the architecture the tracer runs on (`std::env::consts::ARCH`,
/// the event log header's `arch`): a hung thread's syscall is named when the
/// snapshot is taken, a seccomp-forbidden one from the log's own `arch`.
pub(super) fn table(arch: &str) -> &'static [(i64, &'static str)] {
    match arch {
        "x86_64" => X86_64,
        "aarch64" => AARCH64,
        // Numbers only elsewhere: the rules fall back to wchan/stack
        // (see findings.rs).
        _ => &[],
    }
}

/// The name of syscall `nr` on this machine.
pub fn syscall_name(nr: i64) -> Option<&'static str> {
    syscall_name_on(std::env::consts::ARCH, nr)
}

/// The name of syscall `nr` on architecture `arch` (as `uname -m` says it).
pub fn syscall_name_on(arch: &str, nr: i64) -> Option<&'static str> {
    table(arch).iter().find(|(n, _)| *n == nr).map(|(_, s)| *s)
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
        let on = syscall_name_on;
        assert_eq!(on("x86_64", 0), Some("read"));
        assert_eq!(on("x86_64", 45), Some("recvfrom"));
        assert_eq!(on("x86_64", 61), Some("wait4"));
        assert_eq!(on("x86_64", 202), Some("futex"));
        assert_eq!(on("x86_64", 39), Some("getpid"));
        assert_eq!(on("x86_64", 435), Some("clone3"));
        assert_eq!(on("x86_64", 99999), None);
        assert_eq!(syscall_name(63), on(std::env::consts::ARCH, 63));
    }

    /// What a hung thread sits in on arm64 (arch/arm64's syscall numbers,
    /// the generic table): none of x86-64's numbers.
    #[test]
    fn names_arm64_calls() {
        let arm = |nr| syscall_name_on("aarch64", nr);
        for (nr, name) in [
            (56, "openat"),
            (63, "read"),
            (64, "write"),
            (66, "writev"),
            (73, "ppoll"),
            (72, "pselect6"),
            (22, "epoll_pwait"),
            (98, "futex"),
            (101, "nanosleep"),
            (115, "clock_nanosleep"),
            (129, "kill"),
            (172, "getpid"),
            (207, "recvfrom"),
            (212, "recvmsg"),
            (260, "wait4"),
            (95, "waitid"),
            (220, "clone"),
            (221, "execve"),
            (435, "clone3"),
            (441, "epoll_pwait2"),
            (462, "mseal"),
        ] {
            assert_eq!(arm(nr), Some(name), "arm64 syscall {nr}");
        }
        // x86-64-only calls have no arm64 number at all.
        for name in ["open", "poll", "select", "epoll_wait", "pipe", "fork"] {
            assert!(!AARCH64.iter().any(|(_, n)| *n == name), "{name}");
        }
        assert_eq!(arm(0), Some("io_setup"));
        assert_eq!(
            arm(244),
            None,
            "244..259 are arch-specific, unused on arm64"
        );
        assert_eq!(syscall_name_on("riscv64", 63), None);
    }

    /// Every name the snapshot rules match on exists on both
    /// architectures, and numbers are unique within a table.
    #[test]
    fn rule_names_exist_on_every_table() {
        for arch in ["x86_64", "aarch64"] {
            let t = table(arch);
            for name in READS_FD_ARG0
                .iter()
                .chain(WAITS_FOR_CHILD)
                .chain(super::super::threads::TIMED_SLEEP_CALLS)
            {
                assert!(t.iter().any(|(_, n)| n == name), "{arch}: {name}");
            }
            let mut nrs: Vec<i64> = t.iter().map(|(nr, _)| *nr).collect();
            nrs.sort_unstable();
            nrs.dedup();
            assert_eq!(nrs.len(), t.len(), "{arch}: a number twice");
        }
    }
}
