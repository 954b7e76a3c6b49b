//! Names for signal numbers, si_code values and errno values.
use nix::{errno::Errno, sys::signal::Signal as NixSignal};

pub fn signal_name(sig: i32) -> String {
    match NixSignal::try_from(sig) {
        Ok(s) => s.as_str().to_string(),
        Err(_) if (34..=64).contains(&sig) => format!("SIGRTMIN+{}", sig - 34),
        Err(_) => format!("SIG{sig}"),
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
        assert_eq!(errno_name(3), "ESRCH");
        assert_eq!(si_code_name(9, 0x80), "SI_KERNEL");
        assert_eq!(si_code_name(11, 1), "SEGV_MAPERR");
        assert_eq!(si_code_name(17, 2), "CLD_KILLED");
        assert_eq!(si_code_name(15, 42), "42");
    }
}
