//! Errors a user can act on: one line saying what is wrong and what to do.
//!
//! Every variant keeps the error it came from (`#[source]`/`#[from]`) for
//! callers that walk the chain, and its `Display` already carries that
//! source's text: the one line the user sees is `Display` alone.
//!
//! No `anyhow`, on purpose: the binary's edge (`main`) needs the *type* of a
//! failure to pick the exit status (127/126 for a command that cannot run,
//! 70 for the tracer's own), and every message is already written where the
//! failure is understood; an `anyhow::Error` would have to be downcast back.
use std::{io, path::PathBuf, process::ExitCode};

use crate::eventlog::LogError;

/// Exit status for the tracer's own failures (the wrapped command's status is
/// passed through otherwise). Distinct from common shell statuses.
pub const EXIT_TRACER_FAILED: u8 = 70;

/// Exit status for a command line tracer refuses (an unknown option, a
/// command without `--`, an invalid `--redact` pattern, an unknown `--user`):
/// `EX_USAGE` of sysexits.h. Not clap's 2, which `make`, `grep`, `diff` and
/// many test runners also return: a CI step must tell a typo from a failure.
pub const EXIT_USAGE: u8 = 64;

#[derive(Debug, thiserror::Error)]
pub enum TracerError {
    #[error("tracer needs root with CAP_BPF and CAP_PERFMON (uid 0 in a container holding just those is enough) to load eBPF programs; run it with sudo")]
    NotPrivileged,
    #[error("this kernel exposes no BTF at /sys/kernel/btf/vmlinux; tracer needs a kernel built with CONFIG_DEBUG_INFO_BTF=y (5.10+)")]
    NoBtf,
    #[error("kernel BTF lacks {0}; this kernel is not supported (see docs/kernels.md)")]
    MissingKernelType(String),
    #[error("cannot load the eBPF programs: {0}")]
    Load(#[from] LoadError),
    #[error("required hook {hook} could not be attached: {detail}")]
    RequiredHook { hook: String, detail: String },
    #[error("cannot run `{cmd}`{as_user}: {}", why.as_deref().map_or_else(|| source.to_string(), |w| format!("{w} ({source})")))]
    Spawn {
        cmd: String,
        /// ` as alice (uid 1000)` when the command was to run as another user.
        as_user: String,
        source: std::io::Error,
        /// What the error means when the OS's words mislead: "its
        /// interpreter /nonexistent/python (the script's `#!` line) was not
        /// found" for an ENOENT about a script that exists.
        why: Option<String>,
    },
    #[error("no such user: {0} (--user takes a user name or a numeric uid known to this system)")]
    UnknownUser(String),
    #[error("--redact pattern {which} of {of} is not a valid regex: {reason}")]
    BadRedact {
        which: usize,
        of: usize,
        reason: String,
    },
    #[error("daemon --tests: a daemon starts no command to hand the integrations to; hand them to the job instead: as the job's user, `eval \"$(tracer integrations --dir DIR --format shell)\"` before the tests (or `--format github-env >>\"$GITHUB_ENV\"`; the GitHub Action's start and the GitLab template do it for you: docs/report.md, \"--tests\"), or wrap the step in `tracer record --tests`")]
    TestsWithoutCommand,
    #[error("integrations --dir {path}: {source}")]
    IntegrationsDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("integrations: {var}'s value {why}: $GITHUB_ENV cannot carry it as it is; use --format shell, or set {var} in the job without it")]
    IntegrationsEnv {
        var: &'static str,
        why: &'static str,
    },
    #[error("--program-stats: the kernel refused to count the programs' run time (BPF_ENABLE_STATS: {0}); it needs Linux 5.8 and CAP_SYS_ADMIN: run without --program-stats")]
    ProgramStats(#[source] io::Error),
    #[error("integrations: cannot write the variables to stdout: {0}")]
    Stdout(#[source] io::Error),
    #[error("daemon --runtime-stacks: a daemon starts no command whose environment it could change; set PYTHONFAULTHANDLER=1 and NODE_OPTIONS=--perf-basic-prof-only-functions in the job, or wrap the step in `tracer record --runtime-stacks`")]
    RuntimeStacksWithoutCommand,
    #[error("--tests: cannot write the test integrations into a private directory in {path}: {source}; set TMPDIR to a directory only root can write, or run without --tests")]
    TestsDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
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
    #[error("cannot listen on {addr} for --metrics-listen ({source}); give a free ADDR:PORT")]
    MetricsListen {
        addr: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("cannot start the metrics thread: {0}")]
    MetricsThread(#[source] io::Error),
    #[error("summarize: no readable report.json in the given paths")]
    NothingToSummarize,

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
    #[error("cannot start the watchdog: {0} threads are running where it must be forked from one (a tracer bug: please report it)")]
    WatchdogThreads(i64),
    #[error("cannot start the watchdog: /proc/self/stat: {0}")]
    WatchdogStat(#[source] procfs::ProcError),
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
    #[error("--fail-on {0} is not supported for a daemon's log (use oom, unexpected-death or foreign-signal, or `tracer record --fail-on {0}` around the command)")]
    FailOnDaemon(&'static str),
    #[error("--fail-on: cannot judge {path}: {why}; the reports say so, and the verdict is the daemon's own exit status (its --fail-on)")]
    SeriesNotWhole {
        path: std::path::PathBuf,
        why: String,
    },
}

/// What went wrong loading the eBPF side or talking to its maps.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("this binary was built without its eBPF object; build it with `cargo xtask build`")]
    NoObject,
    #[error("reading {path}: {source}")]
    ReadBtf {
        path: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("parsing {path}: {source}")]
    ParseBtf {
        path: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("kernel BTF: {0}")]
    KernelBtf(#[source] aya::BtfError),
    #[error("{0}")]
    Object(#[source] aya::EbpfError),
    #[error("{0} map missing")]
    MapMissing(&'static str),
    #[error("{map} map: {source}")]
    Map {
        map: &'static str,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("tracking pid {pid}: {source}")]
    Track {
        pid: u32,
        #[source]
        source: aya::maps::MapError,
    },
    #[error("program {0} missing from the object")]
    ProgramMissing(&'static str),
    #[error("task iterator: {0}")]
    TaskIter(#[source] aya::programs::ProgramError),
    #[error("task iterator: {0}")]
    TaskIterRead(#[source] io::Error),
    #[error("pid namespace: /proc/self/ns/pid: {0}")]
    OwnPidNs(#[source] io::Error),
    #[error("pid namespace {0}: the kernel did not report this process in it")]
    PidNsLevel(u32),
    #[error("eBPF log ring: {0}")]
    LogRing(#[source] aya_log::Error),
    #[error("eBPF log ring: cannot wait on it: {0}")]
    LogPoll(#[source] io::Error),
    #[error("/proc belongs to another pid namespace (it calls this process {seen}, not {me}): mount a procfs for this namespace (e.g. `unshare --pid --fork --mount-proc`)")]
    ForeignProc { seen: String, me: u32 },
}

impl TracerError {
    /// The one conversion for "writing `path` failed": `.map_err(TracerError::output(path))`.
    pub fn output(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| Self::Output { path, source }
    }
}

/// `io::Result` → `TracerError::Output` naming the file: `res.writing(&path)?`.
pub trait WriteContext<T> {
    fn writing(self, path: impl Into<PathBuf>) -> Result<T, TracerError>;
}

impl<T> WriteContext<T> for io::Result<T> {
    fn writing(self, path: impl Into<PathBuf>) -> Result<T, TracerError> {
        self.map_err(TracerError::output(path))
    }
}

pub fn report_error(err: &TracerError) -> ExitCode {
    crate::say!("tracer: error: {err}");
    ExitCode::from(spawn_exit_code(err))
}

impl TracerError {
    /// The command line itself is wrong: nothing was loaded or run.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::UnknownUser(_)
                | Self::BadRedact { .. }
                | Self::NoCommand
                | Self::UserNeedsRoot(_)
                | Self::SudoIdNotNumeric { .. }
                | Self::FailOnDaemon(_)
                | Self::TestsWithoutCommand
                | Self::RuntimeStacksWithoutCommand
                | Self::OutDir(crate::outdir::OutDirError::NotAFile { .. })
        )
    }

    /// tracer cannot load its eBPF side on this machine (not root, no BTF,
    /// an unsupported kernel, a required hook refused): what `record
    /// --fail-open` runs the command untraced for.
    pub fn is_load_failure(&self) -> bool {
        matches!(
            self,
            Self::NotPrivileged
                | Self::NoBtf
                | Self::MissingKernelType(_)
                | Self::Load(_)
                | Self::RequiredHook { .. }
        )
    }
}

/// The exit status for `err`: as a shell would for a command that cannot be
/// run (127 not found, 126 not executable), else the tracer's own failure.
pub fn spawn_exit_code(err: &TracerError) -> u8 {
    match err {
        // A script whose `#!` interpreter is missing: execve's ENOENT, which
        // bash and dash report as 127 too ("bad interpreter: No such file
        // or directory", status 127), the interpreter being the command
        // that was not found.
        TracerError::Spawn { why: Some(_), .. } => 127,
        TracerError::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound => 127,
        TracerError::Spawn { .. } => 126,
        e if e.is_usage() => EXIT_USAGE,
        _ => EXIT_TRACER_FAILED,
    }
}
