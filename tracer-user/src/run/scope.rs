//! What a daemon watches (`--all`, `--cgroup`, `--root-pid`), and putting
//! the processes already in scope under watch.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use tracer_common::ExistingRecord;

use crate::{
    capture::decode::cstr,
    error::TracerError,
    eventlog::{Existing, ProcKey, Task},
    run::session::Session,
};

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

/// Put the scope's processes under watch with their exact identities, and
/// log each. Repeated until no new descendant appears, so a fork racing the
/// seeding is not missed.
pub fn seed(
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
            let (argv, argv_truncated) =
                crate::snapshot::read_argv(e.task.tgid).unwrap_or_default();
            session.log_existing(Existing {
                at: Default::default(),
                task: Task {
                    pid: e.task.tgid,
                    tid: e.task.tid,
                    start: e.task.start_ns,
                    comm: Some(cstr(&e.comm)),
                },
                ppid: e.ppid,
                argv,
                argv_truncated,
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
