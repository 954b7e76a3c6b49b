//! The syscalls tracer hooks one by one — the kill family, and write/writev
//! for last words: the one place their names, their numbers on each
//! architecture, the kernel symbols fentry attaches to and where the syscall
//! ABI keeps their arguments in `struct pt_regs`. The eBPF side matches
//! numbers through [`KillAbi`] (handed over by user space as a global, since
//! a BPF object is built once for every architecture); user space names
//! records, tracepoints and fentry targets from [`KillSyscall::name`] and
//! [`StderrSyscall::name`], and the entry symbols from [`SyscallArch`].

/// The kill-family syscalls, numbered independently of the architecture
/// (this number is what a `KillCallRecord` carries on the wire).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillSyscall {
    Kill = 1,
    Tkill = 2,
    Tgkill = 3,
    RtSigqueueinfo = 4,
    RtTgsigqueueinfo = 5,
    PidfdSendSignal = 6,
}

/// Every kill-family syscall, in wire order (index = wire number - 1).
pub const KILL_SYSCALLS: [KillSyscall; 6] = [
    KillSyscall::Kill,
    KillSyscall::Tkill,
    KillSyscall::Tgkill,
    KillSyscall::RtSigqueueinfo,
    KillSyscall::RtTgsigqueueinfo,
    KillSyscall::PidfdSendSignal,
];

impl KillSyscall {
    /// The syscall's name: `syscalls:sys_enter_<name>`, `__x64_sys_<name>`,
    /// and the `syscall` field of the event log.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Kill => "kill",
            Self::Tkill => "tkill",
            Self::Tgkill => "tgkill",
            Self::RtSigqueueinfo => "rt_sigqueueinfo",
            Self::RtTgsigqueueinfo => "rt_tgsigqueueinfo",
            Self::PidfdSendSignal => "pidfd_send_signal",
        }
    }
}

impl TryFrom<u32> for KillSyscall {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        match v {
            1..=6 => Ok(KILL_SYSCALLS[v as usize - 1]),
            other => Err(other),
        }
    }
}

/// The syscalls last words are captured at (fd 2, or fd 1 when it is fd 2's
/// file). The discriminant is the slot in the eBPF side's tail-call table
/// (raw_syscalls rung) and in [`KillAbi::stderr_nr`].
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StderrSyscall {
    Write = 0,
    Writev = 1,
}

/// Every last-words syscall, in slot order.
pub const STDERR_SYSCALLS: [StderrSyscall; 2] = [StderrSyscall::Write, StderrSyscall::Writev];

impl StderrSyscall {
    /// `syscalls:sys_enter_<name>`, `__x64_sys_<name>`.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Writev => "writev",
        }
    }
}

/// How one architecture numbers the syscalls tracer hooks and passes their
/// arguments. Handed to the eBPF programs as the `KILL_ABI` global.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KillAbi {
    /// Syscall number of `KILL_SYSCALLS[i]`.
    pub nr: [i64; 6],
    /// Syscall number of `STDERR_SYSCALLS[i]` (last words on raw_syscalls).
    pub stderr_nr: [i64; 2],
    /// Offsets in `struct pt_regs` of syscall arguments 0, 1 and 2.
    pub regs_arg: [u32; 3],
    /// Offset in `struct pt_regs` of the syscall number at exit
    /// (`orig_ax` / `syscallno`; read as 32 bits).
    pub regs_nr: u32,
    /// The bit of the task's [`SyscallArch::compat_word`] (its low 32 bits)
    /// that marks a compat syscall, numbered and laid out another way:
    /// raw_syscalls must not read it as a native one.
    pub compat_mask: u32,
    /// Offsets in `struct pt_regs` of the user registers a crash stack is
    /// unwound from: instruction pointer, stack pointer, frame pointer, link
    /// register ([`REG_NONE`] where the architecture has none: x86-64's
    /// return address is on the stack).
    pub regs_user: [u32; 4],
    pub _pad: u32,
}

/// No such register (see [`KillAbi::regs_user`]).
pub const REG_NONE: u32 = u32::MAX;

/// What tracer needs of the architecture it runs on besides the numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallArch {
    pub abi: KillAbi,
    /// Prefix of its syscall entry symbols (fentry targets, `__x64_sys_kill`).
    pub entry_prefix: &'static str,
    /// The `struct thread_info` field (first in `task_struct`) holding
    /// [`KillAbi::compat_mask`].
    pub compat_word: &'static str,
}

impl KillAbi {
    /// x86-64: `arch/x86/entry/syscalls/syscall_64.tbl`; pt_regs is the
    /// ptrace ABI (di 112, si 104, dx 96, orig_ax 120). A 32-bit syscall
    /// (`int 0x80`, sysenter: ia32 numbers, arguments in bx, cx, dx) sets
    /// `TS_COMPAT` (0x2) in `thread_info.status` from entry to return.
    pub const X86_64: Self = Self {
        nr: [62, 200, 234, 129, 297, 424],
        stderr_nr: [1, 20],
        regs_arg: [112, 104, 96],
        regs_nr: 120,
        compat_mask: 0x2,
        // ip 128, sp 152, bp 32 (arch/x86/include/asm/ptrace.h).
        regs_user: [128, 152, 32, REG_NONE],
        _pad: 0,
    };
    /// arm64: the generic table (`include/uapi/asm-generic/unistd.h`);
    /// pt_regs starts with `regs[31]`, then sp, pc, pstate, orig_x0 (272)
    /// and `s32 syscallno` (280). Arguments are read at entry only: by the
    /// exit, x0 holds the return value (the first argument survives only in
    /// orig_x0). An AArch32 task (`TIF_32BIT`, bit 22 of
    /// `thread_info.flags`) makes its syscalls with arm's EABI numbers
    /// (kill 37, write 4; 64 there is getppid).
    pub const AARCH64: Self = Self {
        nr: [129, 130, 131, 138, 240, 424],
        stderr_nr: [64, 66],
        regs_arg: [0, 8, 16],
        regs_nr: 280,
        compat_mask: 1 << 22,
        // pc 256, sp 248, x29 (fp) 232, x30 (lr) 240.
        regs_user: [256, 248, 232, 240],
        _pad: 0,
    };
    /// Matches nothing: the eBPF default until user space fills it in.
    pub const NONE: Self = Self {
        nr: [-1; 6],
        stderr_nr: [-1; 2],
        regs_arg: [0; 3],
        regs_nr: 0,
        compat_mask: 0,
        regs_user: [REG_NONE; 4],
        _pad: 0,
    };

    /// The kill-family syscall numbered `nr` on this architecture.
    /// Constant indices only: the eBPF side runs this on every syscall
    /// (raw_syscalls) and must not carry a bounds-check panic path.
    #[inline(always)]
    pub fn syscall(&self, nr: i64) -> Option<KillSyscall> {
        let n = &self.nr;
        if nr < 0 {
            None
        } else if n[0] == nr {
            Some(KillSyscall::Kill)
        } else if n[1] == nr {
            Some(KillSyscall::Tkill)
        } else if n[2] == nr {
            Some(KillSyscall::Tgkill)
        } else if n[3] == nr {
            Some(KillSyscall::RtSigqueueinfo)
        } else if n[4] == nr {
            Some(KillSyscall::RtTgsigqueueinfo)
        } else if n[5] == nr {
            Some(KillSyscall::PidfdSendSignal)
        } else {
            None
        }
    }

    /// The last-words syscall numbered `nr`, as its slot (constant indices,
    /// like [`Self::syscall`]).
    #[inline(always)]
    pub fn stderr_syscall(&self, nr: i64) -> Option<StderrSyscall> {
        let n = &self.stderr_nr;
        if nr < 0 {
            None
        } else if n[0] == nr {
            Some(StderrSyscall::Write)
        } else if n[1] == nr {
            Some(StderrSyscall::Writev)
        } else {
            None
        }
    }
}

impl SyscallArch {
    pub const X86_64: Self = Self {
        abi: KillAbi::X86_64,
        entry_prefix: "__x64_sys_",
        compat_word: "status",
    };
    pub const AARCH64: Self = Self {
        abi: KillAbi::AARCH64,
        entry_prefix: "__arm64_sys_",
        compat_word: "flags",
    };

    /// The architecture this code was built for. `None` where the table has
    /// no entry: the kill hooks then fall back to the per-syscall
    /// tracepoints, which need no numbers.
    #[cfg(target_arch = "x86_64")]
    pub const HOST: Option<Self> = Some(Self::X86_64);
    #[cfg(target_arch = "aarch64")]
    pub const HOST: Option<Self> = Some(Self::AARCH64);
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    pub const HOST: Option<Self> = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        for (i, s) in KILL_SYSCALLS.iter().enumerate() {
            assert_eq!(*s as usize, i + 1, "KILL_SYSCALLS is in wire order");
            assert_eq!(KillSyscall::try_from(*s as u32), Ok(*s));
            for abi in [KillAbi::X86_64, KillAbi::AARCH64] {
                assert_eq!(abi.syscall(abi.nr[i]), Some(*s));
            }
        }
        for (i, s) in STDERR_SYSCALLS.iter().enumerate() {
            assert_eq!(*s as usize, i, "STDERR_SYSCALLS is in slot order");
            for abi in [KillAbi::X86_64, KillAbi::AARCH64] {
                assert_eq!(abi.stderr_syscall(abi.stderr_nr[i]), Some(*s));
                assert_eq!(abi.syscall(abi.stderr_nr[i]), None);
            }
        }
        assert_eq!(KillAbi::X86_64.stderr_syscall(0), None);
        assert_eq!(KillAbi::NONE.stderr_syscall(-1), None);
        assert_eq!(KillAbi::X86_64.syscall(0), None);
        assert_eq!(KillAbi::NONE.syscall(-1), None);
        assert_eq!(KillSyscall::try_from(7), Err(7));
    }

    /// arm's EABI numbers an AArch32 task uses: none of the kill family or
    /// write/writev but pidfd_send_signal (424 on every architecture) is
    /// the same call under arm64's number, so raw_syscalls must tell such
    /// a task apart (getppid, 64, would read as arm64's write).
    #[test]
    fn aarch32_numbers_mean_other_calls() {
        // arch/arm/tools/syscall.tbl: kill, tkill, tgkill, rt_sigqueueinfo,
        // rt_tgsigqueueinfo, pidfd_send_signal; write, writev.
        let eabi = ([37, 238, 268, 178, 363, 424], [4, 146]);
        let arm64 = KillAbi::AARCH64;
        for (i, nr) in eabi.0.iter().enumerate() {
            assert_eq!(
                arm64.syscall(*nr).is_some(),
                KILL_SYSCALLS[i] == KillSyscall::PidfdSendSignal
            );
        }
        assert_eq!(arm64.stderr_syscall(64), Some(StderrSyscall::Write));
        for nr in eabi.1 {
            assert_eq!(arm64.stderr_syscall(nr), None);
        }
        assert_ne!(KillAbi::AARCH64.compat_mask, 0);
        assert_ne!(KillAbi::X86_64.compat_mask, 0);
    }
}
