//! Reading report.json files: only the fields a summary needs, each with a
//! default, so reports from other tracer versions still fold.
use std::{
    collections::BTreeMap,
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
    pub near_misses: Vec<MissIn>,
    pub leftovers: Vec<LeftIn>,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct RunFactsIn {
    pub started_at: String,
    pub hostname: String,
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

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct CertIn {
    pub rank: String,
    pub headline: String,
    pub victim: ProcIn,
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
pub struct SignalIn {
    pub sig_name: String,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct KillerIn {
    pub process: ProcIn,
    pub relation: String,
    pub call: String,
}

#[derive(Deserialize, Debug, Clone, Default)]
#[serde(default)]
pub struct MissIn {
    pub sender: ProcIn,
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

/// report.json files under `dir`, at any depth, in path order.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.file_name().is_some_and(|n| n == "report.json") {
            out.push(p);
        }
    }
    Ok(())
}

fn nanos(rfc3339: &str) -> Option<i128> {
    time::OffsetDateTime::parse(rfc3339, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp_nanos())
}

/// Reads every report.json named or found under the given paths. Files that
/// cannot be read or parsed are listed in `skipped`, never fatal.
pub fn load(paths: &[PathBuf]) -> Loaded {
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for p in paths {
        if p.is_dir() {
            if let Err(e) = walk(p, &mut files) {
                skipped.push(Skipped {
                    path: p.display().to_string(),
                    error: e.to_string(),
                });
            }
        } else {
            files.push(p.clone());
        }
    }
    files.sort();
    files.dedup();
    let mut runs = Vec::new();
    for f in files {
        let parsed = std::fs::read_to_string(&f)
            .map_err(|e| e.to_string())
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
