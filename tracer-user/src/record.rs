//! `tracer record -- CMD`: trace one command's whole process tree.
use std::{
    io::IsTerminal,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, ExitCode},
};

use nix::unistd::getpid;
use signal_hook::iterator::{exfiltrator::WithOrigin, SignalsInfo};
use tracer_common::RuntimeConfig;

use crate::{
    capture::{self, Capture, LoadOptions},
    cli::{RecordArgs, ReportArgs},
    error::TracerError,
    eventlog::{self, ExitStatus, LogWriter, LIVE},
    fail_on, leaks,
    outdir::{OutDir, Policy},
    redact::Redactor,
    report,
    run_as::{RunAs, SudoEnv},
    run_cgroup::RunCgroup,
    session::{self, Session},
    supervise,
    terminal::{self, Foreground},
    watchdog::Watchdog,
};

/// Phase timings at debug level (`TRACER_LOG=tracer_user=debug`).
fn phase(t0: std::time::Instant, what: &str) {
    log::debug!("{what}: {:.1} ms", t0.elapsed().as_secs_f64() * 1e3);
}

pub fn run(args: &RecordArgs) -> Result<ExitCode, TracerError> {
    let t0 = std::time::Instant::now();
    // Registered first: no signal meant for the command is lost, even during start-up.
    let signals = SignalsInfo::<WithOrigin>::new(supervise::WATCHED_SIGNALS)
        .map_err(|e| TracerError::Other(format!("cannot install signal handlers: {e}")))?;

    // Usage errors first, before any hook is loaded.
    let run_as = RunAs::resolve(args.user.as_deref(), &SudoEnv::from_process())?;
    let redactor = Redactor::new(&args.report.redact)?;
    let tracer_tgid = getpid().as_raw() as u32;
    let mut capture = capture::load(&LoadOptions {
        ring_buffer_bytes: args.ring_buffer_size,
        tracer_tgid,
        disabled: args.disable_hooks.clone(),
        last_words: args.last_words_bytes > 0,
    })?;
    phase(t0, "loaded and attached");
    // The output directory, held from here on: an unsafe one is refused
    // before the command runs.
    let out = OutDir::open(
        &args.output,
        Policy {
            owner: run_as.owner(),
            any_owner: false,
        },
    )?;
    let mut header = session::header(
        "record",
        args.command.clone(),
        &capture,
        args.ring_buffer_size,
    );
    header.command_user = Some(run_as.describe());
    redactor.header(&mut header);
    let log_file = out
        .create_replacing(LIVE)
        .map_err(|source| TracerError::Output {
            path: out.display(LIVE),
            source,
        })?;
    let writer = LogWriter::new(log_file, &header);

    // Orphans of the run re-parent to us, not to init: they stay attributable
    // and their zombies are ours to reap.
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        log::warn!("cannot become a child subreaper: {e}");
    }
    phase(t0, "log header written");
    // Before the command exists: whatever happens to tracer from here on,
    // the run does not go on unobserved.
    let run_cgroup = RunCgroup::create();
    let watchdog = match Watchdog::start(&capture, run_cgroup.as_ref(), args.kill_grace) {
        Ok(w) => w,
        Err(e) => {
            run_cgroup.as_ref().map(RunCgroup::remove);
            return Err(e);
        }
    };
    let detach = run_as.changes_user() && terminal::has_controlling_terminal();
    let spawned = spawn_adopted(
        &mut capture,
        &args.command,
        &run_as,
        &header.command,
        Spawn {
            detach,
            cgroup: run_cgroup.as_ref().map(|c| c.procs_c().to_owned()),
        },
    );
    phase(t0, "command spawned");
    let mut session = Session::new(capture, writer, out, args.last_words_bytes)?;
    session.redact_with(redactor);
    if let Some((uid, gid)) = run_as.owner() {
        session.snapshots_for(crate::snapshot::Viewer {
            uid: uid.as_raw(),
            gid: gid.as_raw(),
        });
    }
    let child = match spawned {
        Ok(child) => child,
        Err(err) => {
            // Nothing ran: nothing for the watchdog to end.
            watchdog.disarm();
            run_cgroup.as_ref().map(RunCgroup::remove);
            // The log stays complete (header + trailer) even when CMD never
            // ran, and says why, so the reports can carry a certificate.
            let code = crate::error::spawn_exit_code(&err);
            if let TracerError::Spawn { source, .. } = &err {
                session.set_command_error(source.to_string());
            }
            let status = ExitStatus::Exited { code: code.into() };
            deliver(session.finish(Some(status))?, &args.report);
            return Err(err);
        }
    };
    // Detached, the command leads a session of its own: that is the run's.
    let run_sid = if detach {
        Some(child.id() as i32)
    } else {
        nix::unistd::getsid(None).ok().map(|s| s.as_raw())
    };
    let limits = supervise::Limits {
        timeout: args.timeout,
        kill_grace: args.kill_grace,
    };
    let outcome = supervise::supervise(&mut session, child, signals, &limits)?;
    let command_status = outcome.status;
    if outcome.timed_out {
        // The timeout stops the whole run, not only the command: finish the
        // job on whatever is still dying or ignored the SIGTERM.
        let rest = session.tracked()?;
        leaks::enforce(
            leaks::LeakPolicy::Kill,
            &rest,
            args.kill_grace,
            &mut session,
        )?;
    }
    phase(t0, "command exited");
    session.drain()?;
    let viewer = run_as.owner().map(|(uid, gid)| crate::snapshot::Viewer {
        uid: uid.as_raw(),
        gid: gid.as_raw(),
    });
    handle_leaks(&mut session, args, tracer_tgid, run_sid, viewer)?;
    phase(t0, "leaks handled");
    // The run's fate is settled: what `--leaks report` leaves running is
    // left running on purpose.
    watchdog.disarm();
    if let Some(cg) = &run_cgroup {
        cg.remove();
    }
    let closed = session.finish(Some(command_status.clone()))?;
    phase(t0, "log closed, hooks detached");
    let analysis = deliver(closed, &args.report);
    phase(t0, "reports written");
    let met = match &analysis {
        Some((log, a)) => announce_met(fail_on::met_with(&args.fail_on, log.leaks, a)),
        None => Vec::new(),
    };
    let code = match (outcome.timed_out, passthrough_code(&command_status)) {
        // As timeout(1) does: the run did not finish, whatever it exited with.
        (true, _) => EXIT_TIMED_OUT,
        (false, 0) if !met.is_empty() => fail_on::EXIT_FAIL_ON,
        (false, code) => code,
    };
    Ok(ExitCode::from(code))
}

/// Write the reports of a finished run and hand its files over. From here on
/// nothing may cost the command's status: what cannot be written is said on
/// stderr. Returns the log's summary and analysis the reports were written
/// from (`None`: the log could not be read back).
fn deliver(
    closed: session::Closed,
    flags: &crate::cli::ReportFlags,
) -> Option<(eventlog::LogSummary, crate::analysis::Analysis)> {
    if let Err(msg) = closed.out.check_in_place() {
        eprintln!("tracer: error: {msg}");
    }
    closed.warn_if_log_failed();
    // The reports come from the log as tracer wrote it (read through its own
    // file), exactly as `tracer report` would read it: the two never disagree.
    // Streamed: the run's records are never all in memory.
    let lost = |e: TracerError| {
        eprintln!("tracer: error: {e}; the reports of this run are lost, events.ndjson holds its evidence");
    };
    let rendered = match closed.folded() {
        Ok(loaded) => {
            let (analysis, written) = render_folded(&loaded.log, loaded.model, &closed.out, flags);
            if let Err(e) = written {
                lost(e);
            }
            Some((loaded.log, analysis))
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
        Ok(true) => eprintln!(
            "tracer: warning: {} was removed or replaced during the run; tracer's own copy was written back",
            closed.out.display(LIVE).display()
        ),
        Ok(false) => {}
        Err(e) => eprintln!(
            "tracer: error: {} was removed or replaced during the run and cannot be written back ({e})",
            closed.out.display(LIVE).display()
        ),
    }
    closed.out.hand_over_dirs();
    rendered
}

/// `--timeout` expired (the convention of timeout(1)).
pub const EXIT_TIMED_OUT: u8 = 124;

/// How the command is set up between fork and exec.
struct Spawn {
    /// A session of its own without a controlling terminal (another user's
    /// command on root's terminal: see `terminal`).
    detach: bool,
    /// `cgroup.procs` of the run's cgroup, joined before exec.
    cgroup: Option<std::ffi::CString>,
}

/// Spawn CMD with the kernel adopting the tracer's next child, so the command
/// is in scope from its first instruction: no event of it can be missed.
/// `shown` is the command as errors may print it (redacted).
fn spawn_adopted(
    capture: &mut Capture,
    command: &[String],
    run_as: &RunAs,
    shown: &[String],
    how: Spawn,
) -> Result<Child, TracerError> {
    let (program, rest) = command
        .split_first()
        .ok_or_else(|| TracerError::Other("no command given".into()))?;
    let mut cmd = Command::new(program);
    cmd.args(rest);
    run_as.set_env(&mut cmd);
    let child_creds = run_as.clone();
    let fg = if how.detach {
        Foreground::none()
    } else {
        Foreground::take_if_terminal()
    };
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Own process group: a Ctrl-C or a group signal to the tracer is not
            // duplicated by our forwarding, and the tree can be signalled whole.
            // Detached: its own session (and so its own group) too.
            if how.detach {
                terminal::detach_from_terminal()?;
            } else {
                libc::setpgid(0, 0);
            }
            // While still root: the run's cgroup is root's to write.
            if let Some(procs) = &how.cgroup {
                crate::run_cgroup::join(procs);
            }
            // The command's own user (the tracer keeps root). No death
            // signal: the watchdog ends the whole run if tracer dies, with
            // one SIGTERM per process (a second one often means "force").
            child_creds.drop_privileges()?;
            fg.give_to_self();
            Ok(())
        });
    }
    capture.set_config(RuntimeConfig {
        adopt_children: 1,
        ..Default::default()
    })?;
    let spawned = cmd.spawn();
    capture.set_config(RuntimeConfig::default())?;
    spawned.map_err(|source| TracerError::Spawn {
        cmd: shown.join(" "),
        as_user: if run_as.changes_user() {
            format!(" as {}", run_as.describe())
        } else {
            String::new()
        },
        source,
    })
}

/// Log every process of the run still alive, then apply `--leaks`.
fn handle_leaks(
    session: &mut Session,
    args: &RecordArgs,
    tracer_pid: u32,
    root_sid: Option<i32>,
    viewer: Option<crate::snapshot::Viewer>,
) -> Result<(), TracerError> {
    // Processes the command killed on its way out may not have finished
    // exiting yet: let their exits land in the log first (bounded).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < deadline && session.tracked()?.into_iter().any(leaks::dying) {
        session.pump(std::time::Duration::from_millis(10))?;
        leaks::reap_orphans();
    }
    let mut leaked = Vec::new();
    for key in session.tracked()? {
        // Credentials before and after: a setuid exec in between counts.
        let before = crate::snapshot::creds_of(key.pid);
        if let Some(mut leak) = leaks::inspect(key, tracer_pid, root_sid) {
            if let Some(v) = viewer {
                let after = crate::snapshot::creds_of(key.pid);
                let why = crate::snapshot::foreign(before.as_ref(), &v)
                    .or_else(|| crate::snapshot::foreign(after.as_ref(), &v));
                if let Some(why) = why {
                    crate::snapshot::withhold_leak(&mut leak, why);
                }
            }
            session.log_leak(leak)?;
            leaked.push(key);
        }
    }
    if !leaked.is_empty() {
        eprintln!(
            "tracer: {} process(es) of the run outlived the command",
            leaked.len()
        );
    }
    leaks::enforce(args.leaks, &leaked, args.leak_grace, session)
}

/// The shell convention: the exit code, or 128+N for death by signal N.
pub fn passthrough_code(status: &ExitStatus) -> u8 {
    match status {
        ExitStatus::Exited { code } => *code as u8,
        ExitStatus::Signaled { signal, .. } => (128 + signal) as u8,
    }
}

pub fn report_only(args: &ReportArgs) -> Result<ExitCode, TracerError> {
    let out_dir: PathBuf = match &args.output {
        Some(dir) => dir.clone(),
        // A daemon's directory holds its own reports.
        None if args.events.is_dir() => args.events.clone(),
        None => args
            .events
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default(),
    };
    let redactor = Redactor::new(&args.report.redact)?;
    // Streamed: a million-event log is never in memory as records.
    let report::Loaded { log, model } = report::load(&args.events, &redactor)?;
    if log.truncated {
        warn_truncated(&args.events);
    }
    if log.header.mode == "daemon" {
        fail_on::daemon_supports(&args.fail_on).map_err(TracerError::Other)?;
    }
    let out_dir = if out_dir.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        out_dir
    };
    let out = OutDir::open(
        &out_dir,
        Policy {
            owner: None,
            any_owner: true,
        },
    )?;
    let (analysis, written) = render_folded(&log, model, &out, &args.report);
    written?;
    if announce_met(fail_on::met_with(&args.fail_on, log.leaks, &analysis)).is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        Ok(ExitCode::from(fail_on::EXIT_FAIL_ON))
    }
}

/// The `--fail-on` conditions met, announced on stderr.
fn announce_met(met: Vec<(fail_on::Condition, usize)>) -> Vec<(fail_on::Condition, usize)> {
    for (c, n) in &met {
        eprintln!("tracer: --fail-on {}: {n} found", c.name());
    }
    met
}

fn warn_truncated(log_path: &Path) {
    eprintln!(
        "tracer: warning: {} ends without a trailer (capture was interrupted); the report covers what was written",
        log_path.display()
    );
}

/// [`render_log`] for a streamed log ([`report::load`]): analysed once, for
/// the export and the reports; the analysis is returned for `--fail-on`,
/// whether or not the reports could be written.
pub fn render_folded(
    log: &eventlog::LogSummary,
    model: crate::model::Model,
    out: &OutDir,
    flags: &crate::cli::ReportFlags,
) -> (crate::analysis::Analysis, Result<(), TracerError>) {
    let aopts = crate::analysis::AnalysisOptions {
        watch: flags.watch.clone(),
    };
    let analysis = crate::analysis::analyze_model(&model, model.boot_to_wall_ns, &aopts);
    let opts = report::ReportOptions {
        export: crate::otlp::export_analysis(&log.header, &analysis, flags),
        ..flags.options()
    };
    let written = report::write_reports_of(log, model, analysis.clone(), out, &opts)
        .map(|rendered| {
            let color = report::use_color(std::io::stderr().is_terminal());
            let _ = report::print_summary(&rendered, &mut std::io::stderr(), color);
        })
        .map_err(|source| TracerError::Output {
            path: out.path().to_path_buf(),
            source,
        });
    (analysis, written)
}

/// Write report.json, report.md and report.html into the held directory,
/// with a short summary on stderr.
pub fn render_log(
    log: &eventlog::EventLog,
    out: &OutDir,
    flags: &crate::cli::ReportFlags,
) -> Result<(), TracerError> {
    render_log_exported(log, out, flags, crate::otlp::export_log(log, flags))
}

/// The reports, with what became of an OTLP export already made.
pub fn render_log_exported(
    log: &eventlog::EventLog,
    out: &OutDir,
    flags: &crate::cli::ReportFlags,
    export: Option<crate::otlp::ExportFacts>,
) -> Result<(), TracerError> {
    let opts = report::ReportOptions {
        export,
        ..flags.options()
    };
    let rendered =
        report::write_reports(log, out, &opts).map_err(|source| TracerError::Output {
            path: out.path().to_path_buf(),
            source,
        })?;
    let color = report::use_color(std::io::stderr().is_terminal());
    let _ = report::print_summary(&rendered, &mut std::io::stderr(), color);
    Ok(())
}
