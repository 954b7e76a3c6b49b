//! `tracer daemon`: a privileged sidecar watching a whole CI job or runner.
//! It streams the event log with size-based rotation, writes the reports on
//! SIGTERM/SIGINT/SIGHUP (and on SIGUSR1 without stopping), and never
//! truncates what an earlier run of it wrote.
mod watch;

use std::{collections::BTreeSet, path::PathBuf, process::ExitCode, time::Duration};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use tokio::time::{interval_at, Instant, Interval, MissedTickBehavior};
use tracer_common::RuntimeConfig;

use self::watch::{LiveOptions, Watch};
use crate::{
    capture,
    commands::{
        fail_on,
        output::{self, write_analysed_reports, ReportFlags},
    },
    error::TracerError,
    eventlog::{segment_name, Header, ProcKey, Series, LIVE},
    outdir::{OutDir, Policy},
    redact::Redactor,
    resources::{self, Follow, Sampler},
    run::{
        event_loop, header,
        options::CaptureOptions,
        scope::{seed, Scope},
        session::Session,
        signals::Signals,
    },
};

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
    /// Start a new log file when the current one reaches this many bytes and holds an event (0: never).
    #[arg(long, default_value_t = 256 << 20)]
    pub rotate_size: u64,
    /// Keep at most this many rotated log files; the oldest are deleted
    /// (0: keep all). With the default sizes, at most ~2.3 GiB on disk.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub keep_segments: usize,
    #[command(flatten)]
    pub capture: CaptureOptions,
    /// Serve Prometheus metrics on http://ADDR:PORT/metrics (docs/metrics.md).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<String>,
    /// How often the records since the last look are analysed (and at
    /// least every 4,096 records): for the metrics' counters, the live OTLP
    /// export (--otlp-endpoint) and the reports, which are kept as the run
    /// goes and written at the stop without reading the log back.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5s", value_name = "DURATION")]
    pub metrics_interval: std::time::Duration,
    /// Components of a memory cgroup path kept in `tracer_oom_kills_total`'s
    /// `memcg` label (deeper ones name single pods or jobs).
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub metrics_memcg_depth: usize,
    /// Exit 86 at stop if any of these happened: foreign-signal (a signal
    /// across the watched scope's boundary, the daemon's own stop excepted),
    /// oom, unexpected-death (comma-separated). The daemon's own judgement, from the log it wrote:
    /// CI scripts use this status rather than re-reading a directory the
    /// job could have written into.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "CONDITION")]
    pub fail_on: Vec<fail_on::Condition>,
    /// Judge `--fail-on` on what was recorded even when events were lost.
    /// By default a run with lost events and no condition met cannot be
    /// certified: exit 87 ("cannot certify: N events lost").
    #[arg(long, requires = "fail_on")]
    pub allow_loss: bool,
    #[command(flatten)]
    pub report: ReportFlags,
}

impl DaemonArgs {
    pub fn scope(&self) -> Scope {
        match (&self.cgroup, self.root_pid) {
            (Some(p), _) => Scope::Cgroup(p.clone()),
            (None, Some(pid)) => Scope::RootPid(pid),
            (None, None) => Scope::All,
        }
    }

    fn live(&self) -> LiveOptions<'_> {
        LiveOptions {
            metrics_listen: self.metrics_listen.as_deref(),
            interval: self.metrics_interval,
            memcg_depth: self.metrics_memcg_depth,
            otlp_endpoint: self.report.otlp_endpoint.as_deref(),
            analysis: self.report.analysis_options(),
        }
    }
}

pub fn run(args: &DaemonArgs) -> Result<ExitCode, TracerError> {
    // First of all: a stop request during start-up is honoured, not fatal.
    let signals = Signals::new(&[SIGINT, SIGTERM, SIGHUP, SIGUSR1])?;
    // Headroom for the log, /proc reads and the metrics connections.
    crate::run::nofile::raise();
    event_loop::block_on(watch(args, signals))?
}

/// A cgroup gains members by migration too, not only by fork: its
/// membership is read again this often.
const RESCAN: Duration = Duration::from_secs(1);

async fn watch(args: &DaemonArgs, mut signals: Signals) -> Result<ExitCode, TracerError> {
    refuse_unsupported(args)?;
    let redactor = Redactor::new(&args.report.redact)?;
    let tracer_tgid = nix::unistd::getpid().as_raw() as u32;
    let capture = capture::load(&args.capture.load_options(tracer_tgid, redactor.is_active()))?;
    // A daemon may write into a job's workspace (the CI user's directory):
    // every write is fd-relative and never follows a link, and the reports
    // go to the directory's owner. A world-writable directory is refused.
    let policy = Policy {
        owner: None,
        any_owner: true,
    };
    let out = OutDir::open(&args.output, policy)?;
    // Held from the start, as the output directory is: the stop path
    // writes through it, never through the path as it is then.
    let junit = args.report.open_junit(policy)?;
    let series = adopt_series(&out)?;
    let mut segment = series.next_number()?;
    let scope = args.scope();
    let mut header = daemon_header(args, &capture, &scope, segment, &redactor);
    // The run's first header: its reports' (later ones name later segments).
    let header0 = header.clone();
    let log_path = out.display(LIVE);
    // A restart's report covers the earlier runs too: their segments are
    // analysed once, now, into the ledger this run's looks add to.
    let earlier = if series.is_empty() {
        None
    } else {
        Some(crate::report::load_segments(&series, &out)?)
    };
    let mut session = Session::start(capture, out, &header, &args.capture, redactor)?;
    session.continue_series(series);
    // Looks from the first record on: the seed's `existing` records too.
    let mut live = Watch::start(args.live(), &mut session, &header, earlier)?;

    let mut known = BTreeSet::new();
    start_scope(&mut session, &scope, &mut known)?;
    crate::say!(
        "tracer: daemon watching {} — log in {}",
        scope.describe(),
        log_path.display()
    );

    let mut rescan = matches!(scope, Scope::Cgroup(_)).then(|| every(RESCAN));
    // The watched cgroup's resources (a --root-pid is not tracer's child,
    // its pid not its own to follow; --all has no cgroup of its own).
    let mut sampler = match &scope {
        Scope::Cgroup(dir) if !args.capture.no_resources => {
            Some(Sampler::new(Follow::Dir(dir.clone())))
        }
        _ => None,
    };
    let mut sample = sampler.is_some().then(|| every(resources::sampler::EVERY));
    let mut look = Some(every(live.period()));
    let mut pruned = 0;
    let mut rescan_failing = false;
    'run: loop {
        tokio::select! {
            ready = session.ready() => {
                ready?;
                session.drain()?;
                // A busy node does not wait for the timer: a look holds
                // at most this many new records, whatever the event rate.
                if session.tapped_len() >= watch::LOOK_AT_RECORDS {
                    live.look(&mut session);
                }
            }
            got = signals.recv() => {
                for origin in got.map_err(TracerError::Signals)? {
                    if origin.signal == SIGUSR1 {
                        interim_reports(&mut session, &mut live, &header0, pruned, args, junit.as_ref())?;
                    } else {
                        break 'run;
                    }
                }
            }
            () = tick(&mut rescan) => rescan_failing = rescan_scope(
                seed(&mut session, &scope, &mut known),
                rescan_failing,
            ),
            () = tick(&mut look) => live.look(&mut session),
            () = tick(&mut sample) => {
                if let Some(s) = &mut sampler {
                    let r = s.sample(&session.tracked()?);
                    live.sampled(&r);
                    session.log_resources(r)?;
                }
            }
        }
        pruned += rotate_if_full(args, &mut session, &mut header, &mut segment)?;
    }
    stop(session, live, &header0, pruned, args, junit.as_ref())
}

/// What only `record` can do, refused before anything starts.
fn refuse_unsupported(args: &DaemonArgs) -> Result<(), TracerError> {
    fail_on::daemon_supports(&args.fail_on)?;
    // The flag is a capture option (`record` and `daemon` share them), but
    // only `record` starts the command whose environment it changes. The
    // marks themselves work under a daemon: the one-line setup writes them.
    if args.capture.tests {
        return Err(TracerError::TestsWithoutCommand);
    }
    if args.capture.runtime_stacks {
        return Err(TracerError::RuntimeStacksWithoutCommand);
    }
    Ok(())
}

/// The series in `out` this daemon goes on: a restart loses nothing of its
/// own, what an earlier daemon wrote is adopted (and the live log it left
/// becomes a segment). Any other file in the directory may be the job's:
/// listed, never read (docs/security.md).
fn adopt_series(out: &OutDir) -> Result<Series, TracerError> {
    let mut series = Series::adopt(out);
    series.adopt_live(out)?;
    for why in series.ignored() {
        crate::say!("tracer: warning: in {}: {why}", out.path().display());
    }
    Ok(series)
}

/// The header of the daemon's live log, segment `segment`, redacted.
fn daemon_header(
    args: &DaemonArgs,
    capture: &capture::Capture,
    scope: &Scope,
    segment: u32,
    redactor: &Redactor,
) -> Header {
    let mut header = Header {
        scope: Some(scope.describe()),
        segment,
        ..header::header("daemon", Vec::new(), capture, args.capture.ring_buffer_size)
    };
    redactor.header(&mut header);
    header
}

/// Every process in scope from now on: `--all` told to the kernel side,
/// a cgroup's or a pid's tree seeded (what runs already, into `known`).
fn start_scope(
    session: &mut Session,
    scope: &Scope,
    known: &mut BTreeSet<ProcKey>,
) -> Result<(), TracerError> {
    match scope {
        Scope::All => session.set_config(RuntimeConfig {
            scope_all: 1,
            ..Default::default()
        })?,
        _ => seed(session, scope, known)?,
    }
    Ok(())
}

/// Past `--rotate-size`, the live log becomes segment `segment` and the
/// next one starts (its header naming it); the oldest segments past
/// `--keep-segments` go. Returns how many went.
///
/// Never a file of nothing but its header: with a rotate size below a
/// header's (~1.2 KB), an idle daemon rotated at every turn of its loop
/// (every ~5 s, measured), each new file as empty as the last, and pruned
/// the segments that held events within two turns.
fn rotate_if_full(
    args: &DaemonArgs,
    session: &mut Session,
    header: &mut Header,
    segment: &mut u32,
) -> Result<usize, TracerError> {
    if args.rotate_size == 0 || session.log_bytes() < args.rotate_size || session.live_events() == 0
    {
        return Ok(0);
    }
    let next = segment.checked_add(1).ok_or_else(|| {
        TracerError::output(session.out().display(&segment_name(*segment)))(std::io::Error::other(
            "no segment number is left after this one",
        ))
    })?;
    header.segment = next;
    session.rotate(*segment, header)?;
    *segment = next;
    Ok(session.prune(args.keep_segments))
}

/// The stop: the log closed, the last records looked at, the reports
/// written from the ledger, `--fail-on` judged.
fn stop(
    session: Session,
    live: Watch,
    header0: &Header,
    pruned: usize,
    args: &DaemonArgs,
    junit: Option<&std::sync::Arc<crate::outdir::OutFile>>,
) -> Result<ExitCode, TracerError> {
    let ignored = session.ignored();
    let mut closed = session.finish_series()?;
    closed.warn_if_log_failed();
    let last = std::mem::take(&mut closed.tapped);
    let frame = watch::frame(header0, closed.trailer.clone(), ignored);
    // The run's analysis is the ledger's, kept as the records came: the
    // log is not read back (docs/architecture.md, "The daemon").
    let (export, stopped) = live.finish(last, frame, pruned);
    // Reports that cannot be written fail the daemon (70): --fail-on is
    // never judged "nothing found" by default.
    let (summary, analysis, written) =
        write_analysed_reports(stopped, &closed.out, &args.report, junit, export);
    written?;
    let verdict = output::judge(&args.fail_on, args.allow_loss, &summary, &analysis);
    Ok(verdict
        .exit_code()
        .map_or(ExitCode::SUCCESS, ExitCode::from))
}

/// A cgroup's rescan that fails (its task iterator out of file descriptors,
/// say) is said once and tried again next tick: a sidecar meant to run for
/// days does not end on a transient error of a step it repeats every
/// second. A member that joined meanwhile is seeded by the first rescan
/// that works (nothing is marked known until it is tracked). Returns
/// whether rescans are failing now.
fn rescan_scope(done: Result<(), TracerError>, failing: bool) -> bool {
    match done {
        Ok(()) => {
            if failing {
                log::warn!("cgroup rescan works again");
            }
            false
        }
        Err(e) => {
            if !failing {
                log::warn!("cgroup rescan failed ({e}); trying again every {RESCAN:?}");
            }
            true
        }
    }
}

/// A timer firing every `period`, first after one period; a late tick
/// does not bunch up.
fn every(period: Duration) -> Interval {
    let mut i = interval_at(Instant::now() + period, period);
    i.set_missed_tick_behavior(MissedTickBehavior::Delay);
    i
}

/// The next tick of a timer that may not exist (then never).
async fn tick(timer: &mut Option<Interval>) {
    match timer {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Reports of the run so far, from the ledger; the run goes on. The OTLP
/// export is the live one: nothing is exported again here.
fn interim_reports(
    session: &mut Session,
    live: &mut Watch,
    header: &Header,
    pruned: usize,
    args: &DaemonArgs,
    junit: Option<&std::sync::Arc<crate::outdir::OutFile>>,
) -> Result<(), TracerError> {
    session.drain()?;
    let frame = watch::frame(header, session.trailer(None)?, session.ignored());
    let stopped = live.interim(session, frame, pruned);
    write_analysed_reports(stopped, session.out(), &args.report, junit, None).2
}
