//! Errors a user can act on: one line saying what is wrong and what to do.
use std::{path::PathBuf, process::ExitCode};

use crate::eventlog::LogError;

/// Exit status for the tracer's own failures (the wrapped command's status is
/// passed through otherwise). Distinct from common shell statuses.
pub const EXIT_TRACER_FAILED: u8 = 70;

#[derive(Debug, thiserror::Error)]
pub enum TracerError {
    #[error("tracer needs root with CAP_BPF and CAP_PERFMON (uid 0 in a container holding just those is enough) to load eBPF programs; run it with sudo")]
    NotPrivileged,
    #[error("this kernel exposes no BTF at /sys/kernel/btf/vmlinux; tracer needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (5.10+)")]
    NoBtf,
    #[error("cannot mount tracefs at /sys/kernel/tracing ({0}); mount it with `mount -t tracefs nodev /sys/kernel/tracing` and retry")]
    Tracefs(String),
    #[error("kernel BTF lacks {0}; this kernel is not supported (see docs/kernels.md)")]
    MissingKernelType(String),
    #[error("cannot load the eBPF programs: {0}")]
    Load(String),
    #[error("required hook {hook} could not be attached: {detail}")]
    RequiredHook { hook: String, detail: String },
    #[error("cannot run `{cmd}`{as_user}: {source}")]
    Spawn {
        cmd: String,
        /// ` as alice (uid 1000)` when the command was to run as another user.
        as_user: String,
        source: std::io::Error,
    },
    #[error("no such user: {0} (--user takes a user name or a numeric uid known to this system)")]
    UnknownUser(String),
    #[error("--redact pattern {which} of {of} is not a valid regex: {reason}")]
    BadRedact {
        which: usize,
        of: usize,
        reason: String,
    },
    #[error("cannot write {path}: {source}")]
    Output {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    OutDir(#[from] crate::outdir::OutDirError),
    #[error("{0}")]
    Other(String),

    // The runtime's own failures (run/, commands/): kept apart from the
    // capture errors above so each block changes on its own.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    #[error("no command given")]
    NoCommand,
    #[error("waiting for the command: {0}")]
    Wait(#[source] nix::errno::Errno),
    #[error("waiting for the command: {0}")]
    WaitIo(#[source] std::io::Error),
    #[error("polling the ring buffer: {0}")]
    PollRing(#[source] std::io::Error),
    #[error("cannot start the event loop: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot start the watchdog (pipe): {0}")]
    WatchdogPipe(#[source] std::io::Error),
    #[error("cannot start the watchdog (fork): {0}")]
    WatchdogFork(#[source] nix::errno::Errno),
    #[error("--user {0}: running the command as another user needs root")]
    UserNeedsRoot(String),
    #[error("cannot look up user {spec}: {source}")]
    UserLookup {
        spec: String,
        #[source]
        source: nix::errno::Errno,
    },
    #[error("{name}={value} is not a numeric id; pass --user USER (or --user root) to say who runs the command")]
    SudoIdNotNumeric { name: &'static str, value: String },
    #[error("SUDO_UID={0} is not in the user database and SUDO_GID is not set; pass --user USER (or --user root)")]
    SudoUserUnknown(String),
    #[error("--fail-on {0} is not supported for a daemon's log (use oom or unexpected-death, or `tracer record --fail-on {0}` around the command)")]
    FailOnDaemon(&'static str),
}

pub fn report_error(err: &TracerError) -> ExitCode {
    eprintln!("tracer: error: {err}");
    ExitCode::from(spawn_exit_code(err))
}

/// The exit status for `err`: as a shell would for a command that cannot be
/// run (127 not found, 126 not executable), else the tracer's own failure.
pub fn spawn_exit_code(err: &TracerError) -> u8 {
    match err {
        TracerError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
        TracerError::Spawn { .. } => 126,
        _ => EXIT_TRACER_FAILED,
    }
}
