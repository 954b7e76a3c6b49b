//! Signal numbers and names: the one table both halves use (Linux's generic
//! numbering, shared by x86-64 and arm64). A log records numbers; names are
//! derived from this table, so a report renders the same name everywhere.

pub const SIGHUP: i32 = 1;
pub const SIGINT: i32 = 2;
pub const SIGQUIT: i32 = 3;
pub const SIGILL: i32 = 4;
pub const SIGTRAP: i32 = 5;
pub const SIGABRT: i32 = 6;
pub const SIGBUS: i32 = 7;
pub const SIGFPE: i32 = 8;
pub const SIGKILL: i32 = 9;
pub const SIGUSR1: i32 = 10;
pub const SIGSEGV: i32 = 11;
pub const SIGUSR2: i32 = 12;
pub const SIGPIPE: i32 = 13;
pub const SIGALRM: i32 = 14;
pub const SIGTERM: i32 = 15;
pub const SIGSTKFLT: i32 = 16;
pub const SIGCHLD: i32 = 17;
pub const SIGCONT: i32 = 18;
pub const SIGSTOP: i32 = 19;
pub const SIGTSTP: i32 = 20;
pub const SIGTTIN: i32 = 21;
pub const SIGTTOU: i32 = 22;
pub const SIGURG: i32 = 23;
pub const SIGXCPU: i32 = 24;
pub const SIGXFSZ: i32 = 25;
pub const SIGVTALRM: i32 = 26;
pub const SIGPROF: i32 = 27;
pub const SIGWINCH: i32 = 28;
pub const SIGIO: i32 = 29;
pub const SIGPWR: i32 = 30;
pub const SIGSYS: i32 = 31;
/// The kernel's first real-time signal (glibc reserves 32 and 33 and calls
/// 34 its SIGRTMIN); names above it are `SIGRTMIN+N` from here.
pub const SIGRTMIN: i32 = 34;
pub const SIGRTMAX: i32 = 64;

/// Names of signals 1..=31, indexed by number - 1.
const NAMES: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// The name of a standard signal (1..=31), `None` for any other number.
pub const fn name(sig: i32) -> Option<&'static str> {
    if sig >= 1 && sig <= NAMES.len() as i32 {
        Some(NAMES[(sig - 1) as usize])
    } else {
        None
    }
}

/// What glibc's strsignal(3) calls signals 1..=31, indexed by number - 1:
/// the words shells (`Killed`), make (`[all] Segmentation fault`), xargs and
/// Go (`signal: killed`) print when a child dies of one.
const DESCRIPTIONS: [&str; 31] = [
    "Hangup",
    "Interrupt",
    "Quit",
    "Illegal instruction",
    "Trace/breakpoint trap",
    "Aborted",
    "Bus error",
    "Floating point exception",
    "Killed",
    "User defined signal 1",
    "Segmentation fault",
    "User defined signal 2",
    "Broken pipe",
    "Alarm clock",
    "Terminated",
    "Stack fault",
    "Child exited",
    "Continued",
    "Stopped (signal)",
    "Stopped",
    "Stopped (tty input)",
    "Stopped (tty output)",
    "Urgent I/O condition",
    "CPU time limit exceeded",
    "File size limit exceeded",
    "Virtual timer expired",
    "Profiling timer expired",
    "Window changed",
    "I/O possible",
    "Power failure",
    "Bad system call",
];

/// strsignal(3)'s description of a standard signal (1..=31).
pub const fn description(sig: i32) -> Option<&'static str> {
    if sig >= 1 && sig <= DESCRIPTIONS.len() as i32 {
        Some(DESCRIPTIONS[(sig - 1) as usize])
    } else {
        None
    }
}

/// Signals the kernel raises for a faulting instruction (with a positive
/// si_code): ILL TRAP BUS FPE SEGV SYS.
pub const FAULT_SIGS: [i32; 6] = [SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV, SIGSYS];
/// Job-control stops: STOP TSTP TTIN TTOU.
pub const STOP_SIGS: [i32; 4] = [SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU];

/// `si_code` values the tracer reasons about (<asm-generic/siginfo.h>).
pub const SI_USER: i32 = 0;
pub const SI_KERNEL: i32 = 0x80;
pub const SI_QUEUE: i32 = -1;
pub const SI_TKILL: i32 = -6;
/// SIGSYS's si_code when a seccomp filter forbade the syscall.
pub const SYS_SECCOMP: i32 = 1;
