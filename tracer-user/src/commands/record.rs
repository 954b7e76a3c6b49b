//! `tracer record -- CMD`: trace one command's whole process tree.
use std::{path::PathBuf, process::ExitCode};

use nix::unistd::getpid;

use crate::{
    capture,
    commands::{
        fail_on,
        output::{self, ReportFlags},
    },
    error::TracerError,
    eventlog::{self, ExitStatus, LIVE},
    outdir::{OutDir, Policy},
    redact::Redactor,
    run::{
        event_loop, header,
        inject::{Injected, Wanted},
        leaks,
        options::CaptureOptions,
        run_as::{RunAs, SudoEnv},
        run_cgroup::RunCgroup,
        session::{self, Session},
        signals::Signals,
        spawn::{spawn_adopted, Spawn},
        supervise, terminal,
        watchdog::Watchdog,
    },
};

#[derive(clap::Args, Debug, Clone)]
pub struct RecordArgs {
    /// Directory for events.ndjson and the reports.
    #[arg(long, short, default_value = "tracer-report")]
    pub output: PathBuf,
    #[command(flatten)]
    pub capture: CaptureOptions,
    /// Fail the run (exit 86 when the command itself succeeded) if any of these
    /// happened: foreign-signal, leak, oom, unexpected-death (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "CONDITION")]
    pub fail_on: Vec<fail_on::Condition>,
    /// Judge `--fail-on` on what was recorded even when events were lost.
    /// By default a run with lost events and no condition met cannot be
    /// certified: exit 87 ("cannot certify: N events lost") when the
    /// command itself succeeded.
    #[arg(long, requires = "fail_on")]
    pub allow_loss: bool,
    /// Stop a hung run: when DURATION has passed, snapshot what every process
    /// is blocked on, SIGTERM the run, and SIGKILL it after --kill-grace.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub timeout: Option<std::time::Duration>,
    /// Between SIGTERM and SIGKILL when --timeout expires.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub kill_grace: std::time::Duration,
    /// What to do with processes of the run still alive when the command exits.
    #[arg(long, value_enum, default_value_t = leaks::LeakPolicy::Report)]
    pub leaks: leaks::LeakPolicy,
    /// Grace for `--leaks kill` (before SIGKILL) and limit for `--leaks wait`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s")]
    pub leak_grace: std::time::Duration,
    #[command(flatten)]
    pub report: ReportFlags,
    /// A test runner's own report the command writes, FORMAT:PATH
    /// (repeatable): `go-json` (`go test -json` output) or `junit` (JUnit
    /// XML). Read after the command ends (never through a link, at most
    /// 64 MiB) and its tests written into the log as approximate test
    /// windows (`test_window`), so `tracer report` re-renders them; a
    /// malformed file is one warning and no names.
    #[arg(long, value_name = "FORMAT:PATH")]
    pub test_report: Vec<crate::labels::report_file::Spec>,
    /// Run the command as USER (a name or a numeric uid; `--user root` keeps
    /// root). Default: under sudo, the user who ran sudo (SUDO_UID,
    /// SUDO_GID); otherwise the tracer's own user. Only the tracer keeps its
    /// privileges. The command gets the user's groups, and HOME, USER and
    /// LOGNAME as `sudo -u` sets them; the rest of the environment is passed
    /// on as given.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// When tracer cannot load on this machine (not root, no BTF, an
    /// unsupported kernel, a required hook refused), run the command anyway,
    /// untraced, after one line on stderr saying so: the exit status is the
    /// command's, and no log or report is written. For a fleet with a few
    /// odd runners; off by default, where such a machine fails the step (70).
    #[arg(long)]
    pub fail_open: bool,
    /// The command to run, after `--` (required, so a mistyped option is an
    /// error rather than a command).
    #[arg(required = true, last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// When tracer exports to OTLP itself, the exporter's header secrets (API
/// keys) are not handed to the command it watches: the job could read them
/// and send as the CI system. A job that exports with its own SDK keeps them
/// when tracer does not export (docs/metrics.md).
fn withheld_env(flags: &ReportFlags) -> &'static [&'static str] {
    if crate::otlp::Endpoint::resolve(flags.otlp_endpoint.as_deref()).is_some() {
        &crate::otlp::HEADER_VARS
    } else {
        &[]
    }
}

/// Phase timings at debug level (`TRACER_LOG=tracer_user=debug`).
fn phase(t0: std::time::Instant, what: &str) {
    log::debug!("{what}: {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
}

pub fn run(args: &RecordArgs) -> Result<ExitCode, TracerError> {
    let t0 = std::time::Instant::now();
    // Registered first: no signal meant for the command is lost, even during start-up.
    let signals = Signals::new(&supervise::WATCHED_SIGNALS)?;
    // Headroom for tracer's own fds; the command gets its limit back (spawn).
    crate::run::nofile::raise();
    event_loop::block_on(record(args, t0, signals))?
}

async fn record(
    args: &RecordArgs,
    t0: std::time::Instant,
    mut signals: Signals,
) -> Result<ExitCode, TracerError> {
    // Usage errors first, before any hook is loaded.
    let run_as = RunAs::resolve(args.user.as_deref(), &SudoEnv::from_process())?;
    let redactor = Redactor::new(&args.report.redact)?;
    let tracer_tgid = getpid().as_raw() as u32;
    let capture = load(args, &run_as, &redactor, tracer_tgid)?;
    phase(t0, "loaded and attached");
    // Removed when the run is over (dropped as `record` returns).
    let injected = match (args.capture.tests, args.capture.runtime_stacks) {
        (false, false) => None,
        (tests, runtime_stacks) => Some(Injected::prepare(
            run_as.owner(),
            Wanted {
                tests,
                runtime_stacks,
            },
        )?),
    };
    let env_changes = injected.as_ref().map(Injected::changes).unwrap_or_default();
    let (mut session, header, junit) = open_session(args, &run_as, capture, redactor, env_changes)?;

    // Orphans of the run re-parent to us, not to init: they stay attributable
    // and their zombies are ours to reap.
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        log::warn!("cannot become a child subreaper: {e}");
    }
    phase(t0, "log header written");
    // Before the command exists: whatever happens to tracer from here on,
    // the run does not go on unobserved.
    let run_cgroup = RunCgroup::create();
    let watchdog = match Watchdog::start(session.capture(), run_cgroup.as_ref(), args.kill_grace) {
        Ok(w) => w,
        Err(e) => {
            run_cgroup.as_ref().map(RunCgroup::remove);
            return Err(e);
        }
    };
    let detach = run_as.changes_user() && terminal::has_controlling_terminal();
    let spawned = spawn_adopted(
        session.capture_mut(),
        &args.command,
        &run_as,
        &header.command,
        Spawn {
            detach,
            cgroup: run_cgroup.as_ref().map(|c| c.procs_c().to_owned()),
            withhold_env: withheld_env(&args.report),
            set_env: injected.as_ref().map(Injected::vars).unwrap_or_default(),
        },
    );
    phase(t0, "command spawned");
    let child = match spawned {
        Ok(child) => child,
        Err(err) => {
            // Nothing ran: nothing for the watchdog to end.
            watchdog.disarm();
            run_cgroup.as_ref().map(RunCgroup::remove);
            return Err(not_run(session, err, args, junit.as_ref())?);
        }
    };
    let run_sid = run_sid(detach, &child);
    let limits = supervise::Limits {
        timeout: args.timeout,
        kill_grace: args.kill_grace,
        resources: !args.capture.no_resources,
    };
    let outcome = supervise::supervise(&mut session, child, &mut signals, &limits).await?;
    let command_status = outcome.status;
    wind_down(
        &mut session,
        args,
        &run_as,
        (tracer_tgid, run_sid),
        outcome.timed_out,
        t0,
    )
    .await?;
    // The run's fate is settled: what `--leaks report` leaves running is
    // left running on purpose.
    watchdog.disarm();
    if let Some(cg) = &run_cgroup {
        cg.remove();
    }
    // Read with the run's user's filesystem ids: the job wrote the file
    // and chose every directory on its path.
    let reader = run_as
        .owner()
        .map(|(uid, gid)| (uid.as_raw(), gid.as_raw()));
    for spec in &args.test_report {
        for w in crate::labels::report_file::load(
            spec,
            header.boot_to_wall_ns,
            &header.started_at,
            reader,
        ) {
            session.log_test_window(w)?;
        }
    }
    let closed = session.finish(Some(command_status.clone()))?;
    phase(t0, "log closed, hooks detached");
    let delivered = deliver(closed, &args.report, junit.as_ref());
    phase(t0, "reports written");
    Ok(ExitCode::from(exit_code(
        args,
        outcome.timed_out,
        &command_status,
        delivered.as_ref(),
    )))
}

/// The hooks loaded and attached; with `--fail-open`, a machine where they
/// cannot be runs the command untraced instead (and returns only its error).
fn load(
    args: &RecordArgs,
    run_as: &RunAs,
    redactor: &Redactor,
    tracer_tgid: u32,
) -> Result<capture::Capture, TracerError> {
    match capture::load(&args.capture.load_options(tracer_tgid, redactor.is_active())) {
        Ok(capture) => Ok(capture),
        Err(e) if args.fail_open && e.is_load_failure() => Err(untraced(args, run_as, &e)),
        Err(e) => Err(e),
    }
}

/// The session the run is: detached, the command leads a session of its
/// own; otherwise tracer's.
fn run_sid(detach: bool, child: &std::process::Child) -> Option<i32> {
    if detach {
        Some(child.id() as i32)
    } else {
        nix::unistd::getsid(None).ok().map(|s| s.as_raw())
    }
}

/// The output directory and --junit's file, held from here on, the log
/// header, and the capture session writing to them.
fn open_session(
    args: &RecordArgs,
    run_as: &RunAs,
    capture: capture::Capture,
    redactor: Redactor,
    env_changes: Vec<eventlog::EnvChange>,
) -> Result<
    (
        Session,
        eventlog::Header,
        Option<std::sync::Arc<crate::outdir::OutFile>>,
    ),
    TracerError,
> {
    // The output directory, held from here on: an unsafe one is refused
    // before the command runs.
    let policy = Policy {
        owner: run_as.owner(),
        any_owner: false,
    };
    let out = OutDir::open(&args.output, policy)?;
    // --junit's directory too, checked and held before the command runs.
    let junit = args.report.open_junit(policy)?;
    let mut header = header::header(
        "record",
        args.command.clone(),
        &capture,
        args.capture.ring_buffer_size,
    );
    header.command_user = Some(run_as.describe());
    header.env_changes = env_changes;
    redactor.header(&mut header);
    let mut session = Session::start(capture, out, &header, &args.capture, redactor)?;
    if let Some((uid, gid)) = run_as.owner() {
        session.snapshots_for(crate::snapshot::Viewer {
            uid: uid.as_raw(),
            gid: gid.as_raw(),
        });
    }
    Ok((session, header, junit))
}

/// The command could not be spawned: the log is closed and the reports
/// written all the same; returns the spawn error (the one to report).
fn not_run(
    mut session: Session,
    mut err: TracerError,
    args: &RecordArgs,
    junit: Option<&std::sync::Arc<crate::outdir::OutFile>>,
) -> Result<TracerError, TracerError> {
    // The log stays complete (header + trailer) even when CMD never
    // ran, and says why, so the reports can carry a certificate.
    let code = crate::error::spawn_exit_code(&err);
    // The explanation may name a path from the command (a script's
    // interpreter): masked as the command itself is, in the log and
    // on stderr.
    if let TracerError::Spawn { source, why, .. } = &mut err {
        *why = why.as_deref().map(|w| session.redact_text(w));
        session.set_command_error(why.clone().unwrap_or_else(|| source.to_string()));
    }
    let status = ExitStatus::Exited { code: code.into() };
    deliver(session.finish(Some(status))?, &args.report, junit);
    Ok(err)
}

/// After the command exited: a timed-out run killed whole, the ring
/// drained, and what is left of the run handled by `--leaks`.
/// `(tracer_tgid, run_sid)`: who is not a leak.
async fn wind_down(
    session: &mut Session,
    args: &RecordArgs,
    run_as: &RunAs,
    (tracer_tgid, run_sid): (u32, Option<i32>),
    timed_out: bool,
    t0: std::time::Instant,
) -> Result<(), TracerError> {
    if timed_out {
        // The timeout stops the whole run, not only the command: finish the
        // job on whatever is still dying or ignored the SIGTERM.
        let rest = session.tracked()?;
        leaks::enforce(leaks::LeakPolicy::Kill, &rest, args.kill_grace, session).await?;
    }
    phase(t0, "command exited");
    session.drain()?;
    let viewer = run_as.owner().map(|(uid, gid)| crate::snapshot::Viewer {
        uid: uid.as_raw(),
        gid: gid.as_raw(),
    });
    leaks::settle(
        session,
        args.leaks,
        args.leak_grace,
        tracer_tgid,
        run_sid,
        viewer,
    )
    .await?;
    phase(t0, "leaks handled");
    Ok(())
}

/// The step's exit status: timeout(1)'s on a timeout, tracer's failure when
/// --fail-on cannot be judged, --fail-on's when a condition was met, else
/// the command's own.
fn exit_code(
    args: &RecordArgs,
    timed_out: bool,
    command_status: &ExitStatus,
    delivered: Option<&(eventlog::LogSummary, crate::analysis::Analysis)>,
) -> u8 {
    // --fail-on fails closed: a run whose log could not be read back is not
    // judged "nothing found" (a job that spoiled its own log would pass).
    let unjudged = delivered.is_none() && !args.fail_on.is_empty();
    if unjudged {
        crate::say!(
            "tracer: error: --fail-on cannot be judged: this run's reports could not be produced; failing the step (exit {})",
            crate::error::EXIT_TRACER_FAILED
        );
    }
    let verdict = match delivered {
        Some((log, analysis)) => output::judge(&args.fail_on, args.allow_loss, log, analysis),
        None => fail_on::Verdict::default(),
    };
    match (timed_out, passthrough_code(command_status)) {
        // As timeout(1) does: the run did not finish, whatever it exited with.
        (true, _) => EXIT_TIMED_OUT,
        (false, 0) if unjudged => crate::error::EXIT_TRACER_FAILED,
        (false, 0) => verdict.exit_code().unwrap_or(0),
        (false, code) => code,
    }
}

/// `--fail-open`: tracer cannot load here, so the command runs as it would
/// without tracer: exec'd in tracer's place (its status, signal deaths
/// included, is the step's), as the user it would have run as, with its own
/// RLIMIT_NOFILE. One loud line first. Returns only if the exec failed.
fn untraced(args: &RecordArgs, run_as: &RunAs, why: &TracerError) -> TracerError {
    use std::os::unix::process::CommandExt;
    crate::say!(
        "tracer: error: {why} -- --fail-open: running the command UNTRACED, no report will be written"
    );
    let Some((program, rest)) = args.command.split_first() else {
        return TracerError::NoCommand;
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    run_as.set_env(&mut cmd);
    let creds = run_as.clone();
    let nofile = crate::run::nofile::for_child();
    // SAFETY: only async-signal-safe calls between fork (there is none:
    // exec replaces this process) and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Some(soft) = nofile {
                crate::run::nofile::restore(soft);
            }
            creds.drop_privileges()
        });
    }
    let source = cmd.exec();
    TracerError::Spawn {
        why: (source.kind() == std::io::ErrorKind::NotFound)
            .then(|| crate::run::interpreter::missing_interpreter(program, run_as))
            .flatten(),
        cmd: crate::text::terminal::line(&args.command.join(" ")),
        as_user: String::new(),
        source,
    }
}

/// Write the reports of a finished run and hand its files over. From here on
/// nothing may cost the command's status: what cannot be written is said on
/// stderr. Returns the summary of the log the reports were written from, and
/// its analysis (`None`: the log could not be read back).
fn deliver(
    closed: session::Closed,
    flags: &ReportFlags,
    junit: Option<&std::sync::Arc<crate::outdir::OutFile>>,
) -> Option<(eventlog::LogSummary, crate::analysis::Analysis)> {
    if let Err(msg) = closed.out.check_in_place() {
        crate::say!("tracer: error: {msg}");
    }
    closed.warn_if_log_failed();
    // The reports come from the log as tracer wrote it (read through its own
    // file), exactly as `tracer report` would read it: the two never disagree.
    // Streamed: the run's records are never all in memory.
    let lost = |e: TracerError| {
        crate::say!(
            "tracer: error: {e}; the reports of this run are lost, {LIVE} holds its evidence"
        );
    };
    let delivered = match closed.folded() {
        Ok(loaded) => {
            let (log, analysis, written) =
                output::write_reports(loaded, &closed.out, flags, junit, output::Export::Now);
            if let Err(e) = written {
                lost(e);
            }
            Some((log, analysis))
        }
        Err(e) => {
            lost(e);
            None
        }
    };
    if let Err(e) = closed.out.give(closed.writer.file()) {
        log::warn!("cannot hand the event log over: {e}");
    }
    // The command removed or replaced the log during the run: put tracer's
    // copy back under its name, so the evidence is where users look.
    match closed
        .out
        .restore(LIVE, closed.writer.file(), closed.writer.reader())
    {
        Ok(true) => crate::say!(
            "tracer: warning: {} was removed or replaced during the run; tracer's own copy was written back",
            closed.out.display(LIVE).display()
        ),
        Ok(false) => {}
        Err(e) => crate::say!(
            "tracer: error: {} was removed or replaced during the run and cannot be written back ({e})",
            closed.out.display(LIVE).display()
        ),
    }
    closed.out.hand_over_dirs();
    delivered
}

/// `--timeout` expired (the convention of timeout(1)).
pub const EXIT_TIMED_OUT: u8 = 124;

/// The shell convention: the exit code, or 128+N for death by signal N.
pub fn passthrough_code(status: &ExitStatus) -> u8 {
    match status {
        ExitStatus::Exited { code } => *code as u8,
        ExitStatus::Signaled { signal, .. } => (128 + signal) as u8,
    }
}
