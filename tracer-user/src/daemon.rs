//! `tracer daemon`: a privileged sidecar watching a whole CI job or runner.
//! It streams the event log with size-based rotation, writes the reports on
//! SIGTERM/SIGINT/SIGHUP (and on SIGUSR1 without stopping), and never
//! truncates what an earlier run of it wrote.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
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
    eventlog::{self, Existing, Header, LogWriter, ProcKey, Task},
    record::{render_log, EVENTS_FILE},
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
    let out = &args.output;
    fs::create_dir_all(out).map_err(|source| TracerError::Output {
        path: out.clone(),
        source,
    })?;
    let log_path = out.join(EVENTS_FILE);
    // A restart loses nothing: what the last run wrote becomes a segment.
    let mut segment = next_segment(out);
    if log_path.exists() {
        rename(&log_path, &segment_path(out, segment))?;
        segment += 1;
    }
    let scope = args.scope();
    let mut header = Header {
        scope: Some(scope.describe()),
        segment,
        ..session::header("daemon", Vec::new(), &capture, args.ring_buffer_size)
    };
    redactor.header(&mut header);
    let writer = LogWriter::create(&log_path, &header).map_err(|source| TracerError::Output {
        path: log_path.clone(),
        source,
    })?;
    let mut session = Session::new(capture, writer, log_path.clone(), args.last_words_bytes)?;
    session.redact_with(redactor);

    let mut known = BTreeSet::new();
    match &scope {
        Scope::All => session.set_config(RuntimeConfig {
            scope_all: 1,
            ..Default::default()
        })?,
        _ => seed(&mut session, &scope, &mut known)?,
    }
    eprintln!(
        "tracer: daemon watching {} — log in {}",
        scope.describe(),
        log_path.display()
    );

    let mut rescan = Instant::now();
    'run: loop {
        session.pump(Duration::from_millis(200))?;
        for sig in signals.pending() {
            if sig == SIGUSR1 {
                interim_reports(&mut session, out, args)?;
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
            session.rotate(&segment_path(out, segment), &header)?;
            segment += 1;
        }
    }
    session.finish(None)?;
    let log = eventlog::read_series(out)?;
    render_log(&log, out, &args.report)?;
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

/// Reports from the log so far; the log goes on.
fn interim_reports(
    session: &mut Session,
    out: &Path,
    args: &DaemonArgs,
) -> Result<(), TracerError> {
    session.drain()?;
    let mut log = eventlog::read_series(out)?;
    // Still being written: not truncated, and the losses are those so far.
    log.trailer = Some(session.trailer(None)?);
    log.truncated = false;
    render_log(&log, out, &args.report)
}

fn segment_path(out: &Path, n: u32) -> PathBuf {
    out.join(format!("events-{n:04}.ndjson"))
}

fn next_segment(out: &Path) -> u32 {
    (0..).find(|n| !segment_path(out, *n).exists()).unwrap_or(0)
}

fn rename(from: &Path, to: &Path) -> Result<(), TracerError> {
    fs::rename(from, to).map_err(|source| TracerError::Output {
        path: to.to_path_buf(),
        source,
    })
}
