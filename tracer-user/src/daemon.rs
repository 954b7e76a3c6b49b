//! `tracer daemon`: a privileged sidecar watching a whole CI job or runner.
//! It streams the event log with size-based rotation, writes the reports on
//! SIGTERM/SIGINT/SIGHUP (and on SIGUSR1 without stopping), and never
//! truncates what an earlier run of it wrote.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
    process::ExitCode,
    time::{Duration, Instant},
};

use signal_hook::{
    consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1},
    iterator::Signals,
};
use tracer_common::{ExistingRecord, RuntimeConfig};

use crate::{
    capture::{self, decode::cstr, LoadOptions},
    cli::{DaemonArgs, Scope},
    error::TracerError,
    eventlog::{self, segment_name, Existing, Header, LogWriter, ProcKey, Task, LIVE},
    outdir::{OutDir, Policy},
    record::render_log_exported,
    redact::Redactor,
    session::{self, Session},
};

pub fn run(args: &DaemonArgs) -> Result<ExitCode, TracerError> {
    // First of all: a stop request during start-up is honoured, not fatal.
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP, SIGUSR1])
        .map_err(|e| TracerError::Other(format!("cannot install signal handlers: {e}")))?;
    let redactor = Redactor::new(&args.report.redact)?;
    let tracer_tgid = nix::unistd::getpid().as_raw() as u32;
    let capture = capture::load(&LoadOptions {
        ring_buffer_bytes: args.ring_buffer_size,
        tracer_tgid,
        disabled: Vec::new(),
        last_words: args.last_words_bytes > 0,
    })?;
    // A daemon may write into a job's workspace (the CI user's directory):
    // every write is fd-relative and never follows a link, and the reports
    // go to the directory's owner. A world-writable directory is refused.
    let out = OutDir::open(
        &args.output,
        Policy {
            owner: None,
            any_owner: true,
        },
    )?;
    // A restart loses nothing: what the last run wrote becomes a segment.
    let mut segment = next_segment(&out);
    if out.exists(LIVE) {
        rename(&out, LIVE, &segment_name(segment))?;
        segment += 1;
    }
    let scope = args.scope();
    let mut header = Header {
        scope: Some(scope.describe()),
        segment,
        ..session::header("daemon", Vec::new(), &capture, args.ring_buffer_size)
    };
    redactor.header(&mut header);
    let log_file = out
        .create_replacing(LIVE)
        .map_err(|source| TracerError::Output {
            path: out.display(LIVE),
            source,
        })?;
    let log_path = out.display(LIVE);
    let writer = LogWriter::new(log_file, &header);
    let mut session = Session::new(capture, writer, out, args.last_words_bytes)?;
    session.redact_with(redactor);

    let mut known = BTreeSet::new();
    match &scope {
        Scope::All => session.set_config(RuntimeConfig {
            scope_all: 1,
            ..Default::default()
        })?,
        _ => seed(&mut session, &scope, &mut known)?,
    }
    let mut live = crate::live::watch::Watch::start(args, &mut session, &header)?;
    eprintln!(
        "tracer: daemon watching {} — log in {}",
        scope.describe(),
        log_path.display()
    );

    let mut rescan = Instant::now();
    'run: loop {
        session.pump(Duration::from_millis(200))?;
        if let Some(live) = &mut live {
            live.tick(&mut session);
        }
        for sig in signals.pending() {
            if sig == SIGUSR1 {
                interim_reports(&mut session, args)?;
            } else {
                break 'run;
            }
        }
        // A cgroup gains members by migration too, not only by fork.
        if matches!(scope, Scope::Cgroup(_)) && rescan.elapsed() >= Duration::from_secs(1) {
            rescan = Instant::now();
            seed(&mut session, &scope, &mut known)?;
        }
        if args.rotate_size > 0 && session.log_bytes() >= args.rotate_size {
            header.segment = segment + 1;
            session.rotate(&segment_name(segment), &header)?;
            segment += 1;
            prune(session.out(), args.keep_segments);
        }
    }
    let closed = session.finish(None)?;
    closed.warn_if_log_failed();
    let log = closed.log()?;
    let export = live.and_then(|l| l.finish(&log));
    render_log_exported(&log, &closed.out, &args.report, export)?;
    Ok(ExitCode::SUCCESS)
}

/// Put the scope's processes under watch with their exact identities, and
/// log each. Repeated until no new descendant appears, so a fork racing the
/// seeding is not missed.
fn seed(
    session: &mut Session,
    scope: &Scope,
    known: &mut BTreeSet<ProcKey>,
) -> Result<(), TracerError> {
    for _ in 0..3 {
        let all = session.existing()?;
        let want = members(scope, &all);
        let new: Vec<&ExistingRecord> = all
            .iter()
            .filter(|e| want.contains(&e.task.tgid))
            .filter(|e| !known.contains(&key(e)))
            .collect();
        if new.is_empty() {
            return Ok(());
        }
        let keys: Vec<ProcKey> = new.iter().map(|e| key(e)).collect();
        session.track(&keys)?;
        for e in new {
            known.insert(key(e));
            let proc = procfs::process::Process::new(e.task.tgid as i32).ok();
            session.log_existing(Existing {
                at: Default::default(),
                task: Task {
                    pid: e.task.tgid,
                    tid: e.task.tid,
                    start: e.task.start_ns,
                    comm: Some(cstr(&e.comm)),
                },
                ppid: e.ppid,
                argv: proc
                    .as_ref()
                    .and_then(|p| p.cmdline().ok())
                    .unwrap_or_default(),
                exe: proc
                    .as_ref()
                    .and_then(|p| p.exe().ok())
                    .map(|p| p.display().to_string()),
                ns: crate::capture::decode::ns_pid(&e.ns),
            })?;
        }
    }
    Ok(())
}

fn key(e: &ExistingRecord) -> ProcKey {
    ProcKey {
        pid: e.task.tgid,
        start: e.task.start_ns,
    }
}

/// The tgids the scope covers right now.
fn members(scope: &Scope, all: &[ExistingRecord]) -> BTreeSet<u32> {
    match scope {
        Scope::All => all.iter().map(|e| e.task.tgid).collect(),
        Scope::RootPid(root) => {
            let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for e in all {
                children.entry(e.ppid).or_default().push(e.task.tgid);
            }
            let mut found = BTreeSet::new();
            let mut todo = vec![*root];
            while let Some(p) = todo.pop() {
                if found.insert(p) {
                    todo.extend(children.get(&p).into_iter().flatten());
                }
            }
            found.retain(|p| all.iter().any(|e| e.task.tgid == *p));
            found
        }
        Scope::Cgroup(dir) => cgroup_procs(dir),
    }
}

/// Every pid in the cgroup and its sub-cgroups (v1 or v2: both list
/// `cgroup.procs`).
fn cgroup_procs(dir: &Path) -> BTreeSet<u32> {
    let mut pids: BTreeSet<u32> = fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    for sub in fs::read_dir(dir).into_iter().flatten().flatten() {
        if sub.file_type().is_ok_and(|t| t.is_dir()) {
            pids.extend(cgroup_procs(&sub.path()));
        }
    }
    pids
}

/// Reports from the log so far; the log goes on. The OTLP export is the
/// live one: nothing is exported again here.
fn interim_reports(session: &mut Session, args: &DaemonArgs) -> Result<(), TracerError> {
    let log = session.log_so_far()?;
    render_log_exported(&log, session.out(), &args.report, None)
}

/// The first segment number not yet used (after the highest present).
fn next_segment(out: &OutDir) -> u32 {
    segments(out).last().map_or(0, |n| n + 1)
}

/// The rotated segments present, oldest first.
fn segments(out: &OutDir) -> Vec<u32> {
    let mut found: Vec<u32> = out
        .names()
        .unwrap_or_default()
        .iter()
        .filter(|n| eventlog::is_segment(n))
        .filter_map(|n| n["events-".len()..n.len() - ".ndjson".len()].parse().ok())
        .collect();
    found.sort_unstable();
    found
}

/// `--keep-segments`: a chatty job cannot fill the node's disk; the oldest
/// rotated segments go first (0 keeps all).
fn prune(out: &OutDir, keep: usize) {
    if keep == 0 {
        return;
    }
    let all = segments(out);
    for n in &all[..all.len().saturating_sub(keep)] {
        let name = segment_name(*n);
        match out.remove(&name) {
            Ok(()) => log::info!("removed {name} (--keep-segments {keep})"),
            Err(e) => log::warn!("cannot remove {name}: {e}"),
        }
    }
}

fn rename(out: &OutDir, from: &str, to: &str) -> Result<(), TracerError> {
    out.rename(from, to).map_err(|source| TracerError::Output {
        path: out.display(to),
        source,
    })
}
