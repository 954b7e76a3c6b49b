//! Reading report.json files: only the fields a summary needs, each with a
//! default, so reports from other tracer versions still fold.
use std::{
    collections::BTreeMap,
    io::Read,
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct ReportIn {
    pub verdict: String,
    pub run: RunFactsIn,
    pub counts: CountsIn,
    pub certificates: Vec<CertIn>,
    /// Schema 5 folds deaths of one signature: each with its count.
    pub death_groups: Vec<GroupIn>,
    pub near_misses: Vec<MissIn>,
    pub foreign_signals: Vec<ForeignIn>,
    pub leftovers: Vec<LeftIn>,
    /// Schema 3 names a near miss's sender by its entry here.
    pub ancestors: Vec<ProcIn>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct GroupIn {
    pub count: u64,
    pub example: CertIn,
}

impl ReportIn {
    /// Every death with how many it stands for: a certificate 1, a group's
    /// example its count.
    pub fn deaths(&self) -> impl Iterator<Item = (&CertIn, u64)> {
        let groups = self.death_groups.iter().map(|g| (&g.example, g.count));
        self.certificates.iter().map(|c| (c, 1)).chain(groups)
    }

    /// A near miss's sender: in place (schema 2) or by `sender_id`.
    pub fn miss_sender<'a>(&'a self, n: &'a MissIn) -> &'a ProcIn {
        n.sender
            .as_ref()
            .or_else(|| n.sender_id.and_then(|i| self.ancestors.get(i)))
            .unwrap_or(&NO_PROC)
    }
}

static NO_PROC: ProcIn = ProcIn {
    pid: 0,
    command: String::new(),
    argv: Vec::new(),
};

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct RunFactsIn {
    pub mode: String,
    pub started_at: String,
    pub hostname: String,
    pub ci: Option<CiIn>,
}

/// report.json's `run.ci` (docs/report.md): the CI run a report came from.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(default)]
pub struct CiIn {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub system: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<String>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct CountsIn {
    pub unexpected: usize,
    pub nonzero_exit: usize,
    pub expected: usize,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct ProcIn {
    pub pid: u32,
    pub command: String,
    pub argv: Vec<String>,
}

/// A certificate's victim: the process, and how it ended.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct VictimIn {
    #[serde(flatten)]
    pub process: ProcIn,
    pub status: VictimStatusIn,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct CertIn {
    pub rank: String,
    pub headline: String,
    pub victim: VictimIn,
    pub cause: CauseIn,
    pub killer: Option<KillerIn>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct CauseIn {
    pub kind: String,
    pub signal: Option<SignalIn>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct VictimStatusIn {
    pub exited: Option<ExitedIn>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct ExitedIn {
    pub code: i32,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct SignalIn {
    pub sig_name: String,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct KillerIn {
    pub process: ProcIn,
    /// report.json's `killer.test` (only what a signature keys on).
    pub test: Option<TestIn>,
    pub relation: String,
    pub call: String,
    pub target_arg: Option<i64>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct TestIn {
    pub runner: String,
    pub file: Option<String>,
    pub name: String,
    pub one_of: Vec<serde_json::Value>,
}

impl TestIn {
    /// As `labels::Test::full_name`: `file > name` (vitest, jest, node:test,
    /// mocha, playwright),
    /// `binary::name` (nextest), else the name; none for "one of".
    pub fn full_name(&self) -> Option<String> {
        if self.one_of.len() > 1 || self.name.is_empty() {
            return None;
        }
        Some(match (&self.file, self.runner.as_str()) {
            (Some(f), "vitest" | "jest" | "node_test" | "mocha" | "playwright") => {
                format!("{f} > {}", self.name)
            }
            (Some(f), "nextest") => format!("{f}::{}", self.name),
            _ => self.name.clone(),
        })
    }
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct ForeignIn {
    pub direction: String,
    pub signal: SignalIn,
    pub sender: ProcIn,
    pub sender_is_tracer: bool,
    pub target_is_tracer: bool,
    pub target: ProcIn,
    pub call: Option<String>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct MissIn {
    pub sender: Option<ProcIn>,
    pub sender_id: Option<usize>,
    /// Identical calls folded into this one (schema 3; 1 before).
    pub count: Option<u64>,
    pub syscall: String,
    pub sig_name: String,
    pub target_arg: i64,
    pub errno: Option<String>,
    pub probe: bool,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct LeftIn {
    pub process: ProcIn,
    pub orphaned: bool,
}

/// One run's report.
#[derive(Debug, Clone)]
pub struct RunIn {
    /// The report's directory name, or `started_at@hostname` when that name
    /// says nothing (`tracer-report`, `.`) or is shared by several inputs.
    pub id: String,
    pub path: String,
    pub started_at: String,
    pub doc: ReportIn,
}

/// A path given that held no usable report.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Skipped {
    pub path: String,
    pub error: String,
}

#[derive(Debug, Clone, Default)]
pub struct Loaded {
    /// In chronological order (`run.started_at`, then path).
    pub runs: Vec<RunIn>,
    pub skipped: Vec<Skipped>,
}

/// report.json files under `dir`, at any depth, in path order. A symlink
/// met on the way is never followed, to a directory or to a file: it could
/// loop (`runs/again -> ..`) or lead out of the directories given (a run's
/// own files are untrusted). A linked directory or report.json is listed as
/// skipped; the paths given on the command line are taken as given.
fn walk(dir: &Path, out: &mut Vec<PathBuf>, skipped: &mut Vec<Skipped>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return skip(skipped, dir, e.to_string()),
    };
    // The entry's own type (lstat): `Path::is_dir` would follow a link.
    let mut entries: Vec<(PathBuf, std::fs::FileType)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_type().ok().map(|t| (e.path(), t)))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (p, kind) in entries {
        let is_report = p
            .file_name()
            .is_some_and(|n| n == crate::outdir::names::REPORT_JSON);
        if kind.is_dir() {
            walk(&p, out, skipped);
        } else if kind.is_symlink() {
            if is_report || p.is_dir() {
                skip(skipped, &p, "a symlink: not followed".into());
            }
        } else if is_report {
            out.push(p);
        }
    }
}

fn skip(skipped: &mut Vec<Skipped>, path: &Path, error: String) {
    skipped.push(Skipped {
        path: path.display().to_string(),
        error,
    });
}

/// The largest report.json read. A summary holds one file's text at a time,
/// so this bounds its memory whatever a run left behind (a 1 GiB sparse
/// file cost 1 GiB of RSS unbounded). Real reports are far below it: a
/// 400-deep process tree gives 1.1 MB.
pub(super) const MAX_REPORT_BYTES: u64 = 64 << 20;

/// Reads a report: only a regular file of at most [`MAX_REPORT_BYTES`], and
/// one found by the walk only if it is still not a link when opened
/// (O_NOFOLLOW; O_NONBLOCK so a FIFO planted in its place cannot block the
/// summary).
fn read_report(path: &Path, follow: bool) -> Result<String, String> {
    let mut flags = nix::fcntl::OFlag::O_NONBLOCK;
    if !follow {
        flags |= nix::fcntl::OFlag::O_NOFOLLOW;
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits())
        .open(path)
        .map_err(|e| e.to_string())?;
    let meta = f.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let too_big = || format!("larger than {} MiB: not read", MAX_REPORT_BYTES >> 20);
    if meta.len() > MAX_REPORT_BYTES {
        return Err(format!("{} bytes, {}", meta.len(), too_big()));
    }
    // Bounded again while reading: the file may grow after the stat.
    let mut s = String::new();
    (&mut f)
        .take(MAX_REPORT_BYTES + 1)
        .read_to_string(&mut s)
        .map_err(|e| e.to_string())?;
    if s.len() as u64 > MAX_REPORT_BYTES {
        return Err(format!("grew while read, {}", too_big()));
    }
    Ok(s)
}

fn nanos(rfc3339: &str) -> Option<i128> {
    time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

/// Reads every report.json named or found under the given paths. Files that
/// cannot be read or parsed are listed in `skipped`, never fatal.
pub fn load(paths: &[PathBuf]) -> Loaded {
    // (path, given on the command line: a link there is the user's choice)
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found, &mut skipped);
            files.extend(found.into_iter().map(|f| (f, false)));
        } else {
            files.push((p.clone(), true));
        }
    }
    files.sort();
    files.dedup_by(|a, b| a.0 == b.0);
    let mut runs = Vec::new();
    for (f, given) in files {
        let parsed = read_report(&f, given)
            .and_then(|s| serde_json::from_str::<ReportIn>(&s).map_err(|e| e.to_string()));
        match parsed {
            Ok(doc) => runs.push(RunIn {
                id: dir_name(&f),
                path: f.display().to_string(),
                started_at: doc.run.started_at.clone(),
                doc,
            }),
            Err(error) => skipped.push(Skipped {
                path: f.display().to_string(),
                error,
            }),
        }
    }
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for r in &runs {
        *names.entry(r.id.clone()).or_default() += 1;
    }
    for r in &mut runs {
        if r.id.is_empty() || r.id == "tracer-report" || r.id == "." || names[&r.id] > 1 {
            r.id = format!("{}@{}", r.doc.run.started_at, r.doc.run.hostname);
        }
    }
    runs.sort_by(|a, b| (nanos(&a.started_at), &a.path).cmp(&(nanos(&b.started_at), &b.path)));
    Loaded { runs, skipped }
}

fn dir_name(f: &Path) -> String {
    f.parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
