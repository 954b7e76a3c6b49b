//! Command-line interface: parse, then dispatch to `commands`.
use std::process::ExitCode;

use clap::{
    error::{ContextKind, ContextValue, ErrorKind},
    Parser, Subcommand,
};

use crate::{
    commands::{
        daemon::{self, DaemonArgs},
        integrations::{self, IntegrationsArgs},
        parse_crash::{self, ParseCrashArgs},
        record::{self, RecordArgs},
        report::{self, ReportArgs},
        summarize::{self, SummarizeArgs},
    },
    error::{TracerError, EXIT_USAGE},
};

/// `tracer --version`: the release, its target (`aarch64-unknown-linux-musl`),
/// the commit, and the embedded eBPF object's SHA-256 (what a downloaded
/// binary is checked against).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("TRACER_TARGET"),
    ", commit ",
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
    /// Write the test integrations (`record --tests`') into a directory
    /// and print the variables that load them, for a job a daemon watches.
    Integrations(IntegrationsArgs),
    /// Fold many runs' report.json into death signatures (docs/summarize.md).
    Summarize(SummarizeArgs),
    /// Internal: the confined child tracer parses crashed processes'
    /// modules in (symbolize/sandbox.rs).
    #[command(name = "__parse-crash-stacks", hide = true)]
    ParseCrashStacks(ParseCrashArgs),
}

/// tracer's own log (warnings and `--debug-ebpf`'s records) on stderr, at
/// the level `TRACER_LOG` asks (env_logger's syntax), `warn` by default.
pub fn init_logging() {
    env_logger::Builder::from_env(env_logger::Env::default().filter_or("TRACER_LOG", "warn"))
        .format_timestamp(None)
        .init();
}

pub fn run(cli: Cli) -> Result<ExitCode, TracerError> {
    match cli.command {
        Command::Record(args) => record::run(&args),
        Command::Report(args) => report::run(&args),
        Command::Daemon(args) => daemon::run(&args),
        Command::Summarize(args) => summarize::run(&args),
        Command::Integrations(args) => integrations::run(&args),
        Command::ParseCrashStacks(args) => parse_crash::run(&args),
    }
}

/// A command line clap refused: its message (help and version go to stdout
/// and exit 0), a hint when a command was given without `--`, and
/// [`EXIT_USAGE`] — not clap's 2, which `make` and many test runners also
/// use, so a CI step cannot tell a typo from a failing suite. Nothing here
/// panics on a closed stdout or stderr.
pub fn usage_error(e: &clap::Error, args: impl Iterator<Item = std::ffi::OsString>) -> ExitCode {
    let _ = e.print();
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => return ExitCode::SUCCESS,
        _ => {}
    }
    let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    if let Some(hint) = hint(e, &args) {
        crate::say!("tracer: hint: {hint}");
    }
    ExitCode::from(EXIT_USAGE)
}

/// `tracer record true`: clap sees `true` as an unexpected argument (the
/// command must follow `--`, so a mistyped option is never run as one).
/// Say where it goes, with the command line as it would be.
fn hint(e: &clap::Error, args: &[String]) -> Option<String> {
    if args.first().map(String::as_str) != Some("record") || args.iter().any(|a| a == "--") {
        return None;
    }
    let given = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    match e.kind() {
        ErrorKind::UnknownArgument => {
            let bad = given(ContextKind::InvalidArg)?;
            if bad.starts_with('-') {
                return None;
            }
            let at = args.iter().rposition(|a| *a == bad)?;
            let options = crate::text::terminal::line(&args[1..at].join(" "));
            let command = crate::text::terminal::line(&args[at..].join(" "));
            let options = if options.is_empty() {
                String::new()
            } else {
                format!("{options} ")
            };
            Some(format!(
                "the command to run goes after `--`: tracer record {options}-- {command}"
            ))
        }
        ErrorKind::MissingRequiredArgument => Some(
            "give the command to run after `--`: tracer record [OPTIONS] -- COMMAND [ARGS]..."
                .into(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::Cli;

    fn parses(args: &[&str]) -> bool {
        Cli::try_parse_from(args).is_ok()
    }

    /// A misspelt `--disable-hook` once disabled nothing, silently.
    #[test]
    fn disable_hook_takes_only_real_hooks() {
        for hook in crate::capture::hooks::DISABLEABLE {
            assert!(
                parses(&["tracer", "record", "--disable-hook", hook, "--", "true"]),
                "{hook}"
            );
            assert!(
                parses(&["tracer", "daemon", "--all", "--disable-hook", hook]),
                "{hook}"
            );
        }
        for typo in ["kill_syscall:fentry", "last_words:kprobe", "", "oom"] {
            let err =
                Cli::try_parse_from(["tracer", "record", "--disable-hook", typo, "--", "true"])
                    .map(drop)
                    .unwrap_err()
                    .to_string();
            assert!(err.contains("one of: kill_syscalls,"), "{typo}: {err}");
        }
    }

    /// The parse child's command line, as `symbolize::sandbox` spells it,
    /// is this hidden subcommand (a rename on one side only would leave
    /// every crash "symbolisation failed").
    #[test]
    fn the_parse_childs_command_line_parses() {
        use crate::symbolize::sandbox::SUBCOMMAND;
        let args = [
            "tracer",
            SUBCOMMAND,
            "--uid",
            "2130706566",
            "--gid",
            "2130706566",
            "--fs-uid",
            "65534",
            "--fs-gid",
            "65534",
        ];
        let cli = Cli::try_parse_from(args.iter().chain(&["--fds", "3,7"])).unwrap();
        match cli.command {
            super::Command::ParseCrashStacks(a) => assert_eq!(a.fds, [3, 7]),
            other => panic!("{other:?}"),
        }
        // A crash in no readable module hands over no memfd: no --fds.
        assert!(parses(&args));
    }
}
