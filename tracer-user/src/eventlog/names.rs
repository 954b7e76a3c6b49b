//! Names for signal numbers, si_code values and errno values.
use nix::errno::Errno;
use tracer_common::signals::{self, SIGRTMAX, SIGRTMIN};

pub fn signal_name(sig: i32) -> String {
    match signals::name(sig) {
        Some(name) => name.to_string(),
        None if (SIGRTMIN..=SIGRTMAX).contains(&sig) => format!("SIGRTMIN+{}", sig - SIGRTMIN),
        None => format!("SIG{sig}"),
    }
}

pub fn errno_name(errno: i64) -> String {
    format!("{:?}", Errno::from_raw(errno as i32))
}

/// si_code names: the generic (negative / SI_USER / SI_KERNEL) ones, then the
/// signal-specific positive ones from <asm-generic/siginfo.h>.
pub fn si_code_name(sig: i32, code: i32) -> String {
    let generic = match code {
        0 => Some("SI_USER"),
        0x80 => Some("SI_KERNEL"),
        -1 => Some("SI_QUEUE"),
        -2 => Some("SI_TIMER"),
        -3 => Some("SI_MESGQ"),
        -4 => Some("SI_ASYNCIO"),
        -5 => Some("SI_SIGIO"),
        -6 => Some("SI_TKILL"),
        -7 => Some("SI_DETHREAD"),
        -60 => Some("SI_ASYNCNL"),
        _ => None,
    };
    if let Some(name) = generic {
        return name.to_string();
    }
    let specific: &[&str] = match sig {
        4 => &[
            "ILL_ILLOPC",
            "ILL_ILLOPN",
            "ILL_ILLADR",
            "ILL_ILLTRP",
            "ILL_PRVOPC",
            "ILL_PRVREG",
            "ILL_COPROC",
            "ILL_BADSTK",
        ],
        8 => &[
            "FPE_INTDIV",
            "FPE_INTOVF",
            "FPE_FLTDIV",
            "FPE_FLTOVF",
            "FPE_FLTUND",
            "FPE_FLTRES",
            "FPE_FLTINV",
            "FPE_FLTSUB",
        ],
        11 => &["SEGV_MAPERR", "SEGV_ACCERR", "SEGV_BNDERR", "SEGV_PKUERR"],
        7 => &[
            "BUS_ADRALN",
            "BUS_ADRERR",
            "BUS_OBJERR",
            "BUS_MCEERR_AR",
            "BUS_MCEERR_AO",
        ],
        5 => &["TRAP_BRKPT", "TRAP_TRACE", "TRAP_BRANCH", "TRAP_HWBKPT"],
        17 => &[
            "CLD_EXITED",
            "CLD_KILLED",
            "CLD_DUMPED",
            "CLD_TRAPPED",
            "CLD_STOPPED",
            "CLD_CONTINUED",
        ],
        31 => &["SYS_SECCOMP", "SYS_USER_DISPATCH"],
        29 => &[
            "POLL_IN", "POLL_OUT", "POLL_MSG", "POLL_ERR", "POLL_PRI", "POLL_HUP",
        ],
        _ => &[],
    };
    match usize::try_from(code)
        .ok()
        .and_then(|c| c.checked_sub(1))
        .and_then(|i| specific.get(i))
    {
        Some(name) => name.to_string(),
        None => format!("{code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(36), "SIGRTMIN+2");
        assert_eq!(signal_name(32), "SIG32");
        assert_eq!(errno_name(3), "ESRCH");
        assert_eq!(si_code_name(9, 0x80), "SI_KERNEL");
        assert_eq!(si_code_name(11, 1), "SEGV_MAPERR");
        assert_eq!(si_code_name(17, 2), "CLD_KILLED");
        assert_eq!(si_code_name(15, 42), "42");
    }

    /// The one table agrees with the C library's numbering, as nix spells
    /// it (names used to come from there: old reports must not change).
    #[test]
    fn the_table_matches_the_platform() {
        use nix::sys::signal::Signal;
        for sig in -1..=70 {
            let want = match Signal::try_from(sig) {
                Ok(s) => Some(s.as_str()),
                Err(_) => None,
            };
            assert_eq!(signals::name(sig), want, "signal {sig}");
        }
        use signals::*;
        let consts = [
            (SIGHUP, libc::SIGHUP),
            (SIGINT, libc::SIGINT),
            (SIGQUIT, libc::SIGQUIT),
            (SIGILL, libc::SIGILL),
            (SIGTRAP, libc::SIGTRAP),
            (SIGABRT, libc::SIGABRT),
            (SIGBUS, libc::SIGBUS),
            (SIGFPE, libc::SIGFPE),
            (SIGKILL, libc::SIGKILL),
            (SIGUSR1, libc::SIGUSR1),
            (SIGSEGV, libc::SIGSEGV),
            (SIGUSR2, libc::SIGUSR2),
            (SIGPIPE, libc::SIGPIPE),
            (SIGALRM, libc::SIGALRM),
            (SIGTERM, libc::SIGTERM),
            (SIGSTKFLT, libc::SIGSTKFLT),
            (SIGCHLD, libc::SIGCHLD),
            (SIGCONT, libc::SIGCONT),
            (SIGSTOP, libc::SIGSTOP),
            (SIGTSTP, libc::SIGTSTP),
            (SIGTTIN, libc::SIGTTIN),
            (SIGTTOU, libc::SIGTTOU),
            (SIGURG, libc::SIGURG),
            (SIGXCPU, libc::SIGXCPU),
            (SIGXFSZ, libc::SIGXFSZ),
            (SIGVTALRM, libc::SIGVTALRM),
            (SIGPROF, libc::SIGPROF),
            (SIGWINCH, libc::SIGWINCH),
            (SIGIO, libc::SIGIO),
            (SIGPWR, libc::SIGPWR),
            (SIGSYS, libc::SIGSYS),
        ];
        for (ours, platform) in consts {
            assert_eq!(ours, platform, "{:?}", signals::name(ours));
        }
        assert_eq!(signals::SIGRTMAX, libc::SIGRTMAX());
    }
}
