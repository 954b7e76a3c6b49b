//! Command-line interface.
use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};

use crate::error::TracerError;

/// `tracer --version`: the release, the commit, and the embedded eBPF
/// object's SHA-256 (what a downloaded binary is checked against).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("TRACER_GIT_COMMIT"),
    ", eBPF object sha256 ",
    env!("TRACER_EBPF_SHA256"),
    ")"
);

#[derive(Parser, Debug)]
#[command(
    name = "tracer",
    version = VERSION,
    about = "Explains why the processes of a CI job died"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a command under the tracer and write its event log and reports.
    Record(RecordArgs),
    /// Re-render the reports from an events.ndjson (or a daemon's log
    /// directory), offline.
    Report(ReportArgs),
    /// Watch a whole CI job or runner as a privileged sidecar.
    Daemon(DaemonArgs),
    /// Fold many runs' report.json into death signatures (docs/summarize.md).
    Summarize(SummarizeArgs),
}

#[derive(clap::Args, Debug, Clone)]
#[group(id = "scope", required = true, multiple = false)]
pub struct DaemonArgs {
    /// Directory for the event log (rotated) and the reports.
    #[arg(long, short, default_value = "tracer-report")]
    pub output: PathBuf,
    /// Watch every process the tracer can see: the whole machine from the
    /// host, or a pod's processes from inside its shared pid namespace.
    #[arg(long, group = "scope")]
    pub all: bool,
    /// Watch the processes of this cgroup (v1 or v2 directory) and its children.
    #[arg(long, group = "scope", value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// Watch this process and every descendant, including ones already running.
    #[arg(long, group = "scope", value_name = "PID")]
    pub root_pid: Option<u32>,
    /// Start a new log file when the current one reaches this many bytes (0: never).
    #[arg(long, default_value_t = 256 << 20)]
    pub rotate_size: u64,
    /// Keep at most this many rotated log files; the oldest are deleted
    /// (0: keep all). With the default sizes, at most ~2.3 GiB on disk.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub keep_segments: usize,
    #[arg(long, default_value_t = crate::capture::DEFAULT_RING_BYTES)]
    pub ring_buffer_size: u32,
    #[arg(long, default_value_t = 4096)]
    pub last_words_bytes: usize,
    /// Serve Prometheus metrics on http://ADDR:PORT/metrics (docs/metrics.md).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
    /// How often the log so far is analysed for new findings: the metrics'
    /// counters and the live OTLP export (--otlp-endpoint).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s", value_name = "DURATION")]
    pub metrics_interval: std::time::Duration,
    /// Components of a memory cgroup path kept in `tracer_oom_kills_total`'s
    /// `memcg` label (deeper ones name single pods or jobs).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub metrics_memcg_depth: usize,
    #[command(flatten)]
    pub report: ReportFlags,
}

/// What a daemon watches.
pub enum Scope {
    All,
    Cgroup(PathBuf),
    RootPid(u32),
}

impl Scope {
    pub fn describe(&self) -> String {
        match self {
            Scope::All => "all".into(),
            Scope::Cgroup(p) => format!("cgroup {}", p.display()),
            Scope::RootPid(p) => format!("root-pid {p}"),
        }
    }
}

impl DaemonArgs {
    pub fn scope(&self) -> Scope {
        match (&self.cgroup, self.root_pid) {
            (Some(p), _) => Scope::Cgroup(p.clone()),
            (None, Some(pid)) => Scope::RootPid(pid),
            (None, None) => Scope::All,
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Directory for events.ndjson and the reports.
    #[arg(long, short, default_value = "tracer-report")]
    pub output: PathBuf,
    /// Ring buffer size in bytes (rounded up to a power of two pages).
    #[arg(long, default_value_t = crate::capture::DEFAULT_RING_BYTES)]
    pub ring_buffer_size: u32,
    /// Fail the run (exit 86 when the command itself succeeded) if any of these
    /// happened: foreign-signal, leak, oom, unexpected-death (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "CONDITION")]
    pub fail_on: Vec<crate::fail_on::Condition>,
    /// Stop a hung run: when DURATION has passed, snapshot what every process
    /// is blocked on, SIGTERM the run, and SIGKILL it after --kill-grace.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub timeout: Option<std::time::Duration>,
    /// Between SIGTERM and SIGKILL when --timeout expires.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub kill_grace: std::time::Duration,
    /// What to do with processes of the run still alive when the command exits.
    #[arg(long, value_enum, default_value_t = crate::leaks::LeakPolicy::Report)]
    pub leaks: crate::leaks::LeakPolicy,
    /// Grace for `--leaks kill` (before SIGKILL) and limit for `--leaks wait`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub leak_grace: std::time::Duration,
    #[command(flatten)]
    pub report: ReportFlags,
    /// Bytes of stderr kept per process as its "last words" (0 disables).
    #[arg(long, default_value_t = 4096)]
    pub last_words_bytes: usize,
    /// Run the command as USER (a name or a numeric uid; `--user root` keeps
    /// root). Default: under sudo, the user who ran sudo (SUDO_UID,
    /// SUDO_GID); otherwise the tracer's own user. Only the tracer keeps its
    /// privileges. The command gets the user's groups, and HOME, USER and
    /// LOGNAME as `sudo -u` sets them; the rest of the environment is passed
    /// on as given.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Skip a hook or one attach method, to exercise fallbacks (testing and
    /// diagnosis): `kill_syscalls:fentry`, `kill_syscalls:raw_syscalls`,
    /// `kill_syscalls:tracepoint`, `kill_syscalls`, `oom_mark_victim`, `last_words`.
    #[arg(long = "disable-hook", value_name = "HOOK", hide = true)]
    pub disable_hooks: Vec<String>,
    /// The command to run, after `--` (required, so a mistyped option is an
    /// error rather than a command).
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Options that shape the reports (shared by `record`, `report` and `daemon`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ReportFlags {
    /// Also certify non-zero exits of processes whose command line matches
    /// this regex (repeatable), however short-lived.
    #[arg(long, value_name = "REGEX")]
    pub watch: Vec<regex::Regex>,
    /// Replace what matches REGEX (repeatable) by [REDACTED]: in command lines
    /// (each argv element on its own; only the matched part), executable
    /// paths, process names, open-file paths, and stderr last words.
    /// `record` and `daemon` mask before anything is written, so the log, the
    /// reports and the stderr summary never hold the secret; `report` masks
    /// the reports it writes (the log it reads is left as it is).
    #[arg(long, value_name = "REGEX")]
    pub redact: Vec<String>,
    /// Send every certificate, near miss, foreign signal and leak as an
    /// OpenTelemetry log record to this OTLP/HTTP endpoint (a collector's
    /// base URL, e.g. http://127.0.0.1:4318; `/v1/logs` is appended unless
    /// the URL has a path). Default: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or
    /// OTEL_EXPORTER_OTLP_ENDPOINT; headers from OTEL_EXPORTER_OTLP_HEADERS.
    /// A failing endpoint never fails the run: the report's loss section
    /// says what was not delivered.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
}

impl ReportFlags {
    pub fn options(&self) -> crate::report::ReportOptions {
        crate::report::ReportOptions {
            watch: self.watch.clone(),
            export: None,
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// The event log to read, or a daemon's output directory (its rotated
    /// series is read as one log).
    pub events: PathBuf,
    /// Directory for the reports (default: the log's directory).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Exit 86 if any of these happened, as `record --fail-on` would:
    /// foreign-signal, leak, oom, unexpected-death (comma-separated). A
    /// daemon's log supports oom and unexpected-death only.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "CONDITION")]
    pub fail_on: Vec<crate::fail_on::Condition>,
    #[command(flatten)]
    pub report: ReportFlags,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SummarizeArgs {
    /// report.json files, or directories to search for them (at any depth).
    #[arg(required = true, value_name = "REPORT")]
    pub reports: Vec<PathBuf>,
    /// Output format, written to stdout.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Md)]
    pub format: SummaryFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryFormat {
    Md,
    Json,
}

pub fn run(cli: Cli) -> Result<ExitCode, TracerError> {
    match cli.command {
        Command::Record(args) => crate::record::run(&args),
        Command::Report(args) => crate::record::report_only(&args),
        Command::Daemon(args) => crate::daemon::run(&args),
        Command::Summarize(args) => crate::summarize::run(&args),
    }
}
