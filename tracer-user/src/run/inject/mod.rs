//! `--tests`: the test integrations tracer hands the command — written
//! into a private directory of the run (`dir.rs`) and loaded through the
//! runners' own variables, so a project changes nothing (docs/report.md,
//! "Which test"). One table, [`INTEGRATIONS`]: an integration is its
//! files and the variables that load them, each joined to the value the
//! command would have had as the runner reads that variable (`Join`).
//! Every change is logged in the header (`env_changes`). `--runtime-stacks`
//! is a second table, [`RUNTIME_STACKS`]: variables only, no files.
//! `tracer integrations` writes the same files into a directory the job
//! keeps (`kept.rs`) and prints the same plan for the job to load.
mod dir;
mod kept;

use std::{
    ffi::{OsStr, OsString},
    os::unix::ffi::{OsStrExt, OsStringExt},
    path::Path,
};

pub use dir::IntegrationDir;
pub use kept::write_kept;

use nix::unistd::{Gid, Uid};

use crate::{error::TracerError, eventlog::EnvChange};

/// How tracer's part joins a variable's old value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Join {
    /// A comma-separated list of module names (`PYTEST_PLUGINS`): tracer's
    /// after the old ones; a name already listed is not added again.
    ListAppend,
    /// A colon-separated path list (`PYTHONPATH`): tracer's directory
    /// first, the old entries after it, in their order.
    PathPrepend,
    /// Node's space-separated options (`NODE_OPTIONS`): tracer's after the
    /// old ones, its path in double quotes with `\` and `"` escaped, as
    /// Node reads quoted values there. An option already there (as a
    /// word) is not added again.
    NodeOptionsAppend,
    /// Tracer's value only where the command has none: a value the
    /// command set is its choice (`PYTHONFAULTHANDLER=0` stays off).
    SetIfUnset,
}

/// What tracer adds to a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// A word as it is (a plugin's module name).
    Word(&'static str),
    /// The integrations' directory.
    Dir,
    /// `--require <dir>/<file>`, for Node.
    Require(&'static str),
}

/// One variable an integration is loaded through.
#[derive(Clone, Copy, Debug)]
pub struct Var {
    pub name: &'static str,
    pub join: Join,
    pub part: Part,
}

/// One runner's integration: its files (name, content) and its variables.
#[derive(Clone, Copy, Debug)]
pub struct Integration {
    pub runner: &'static str,
    pub files: &'static [(&'static str, &'static str)],
    pub env: &'static [Var],
}

/// The pytest plugin and the distribution metadata that makes it a
/// `pytest11` entry point (the name `tracer_pytest`, the module's own: a
/// `-p tracer_pytest` of the job's then finds it loaded, not twice).
pub const PYTEST_FILES: &[(&str, &str)] = &[
    (
        "tracer_pytest.py",
        include_str!("../../../integrations/pytest/tracer_pytest.py"),
    ),
    (
        "tracer_pytest.dist-info/METADATA",
        include_str!("../../../integrations/pytest/tracer_pytest.dist-info/METADATA"),
    ),
    (
        "tracer_pytest.dist-info/entry_points.txt",
        include_str!("../../../integrations/pytest/tracer_pytest.dist-info/entry_points.txt"),
    ),
];

/// Every integration `--tests` injects.
pub const INTEGRATIONS: &[Integration] = &[
    Integration {
        runner: "pytest",
        files: PYTEST_FILES,
        // PYTHONPATH only: pytest's plugin autoload finds the entry point
        // of the `.dist-info` beside the plugin. A job that replaces
        // PYTHONPATH (`PYTHONPATH=src pytest`) or turns the autoload off
        // then runs without it, as it would without tracer; through
        // PYTEST_PLUGINS it failed instead ("Error importing plugin
        // tracer_pytest", exit 4), and the report now says which pytest
        // ran without test names (labels/status.rs).
        env: &[Var {
            name: "PYTHONPATH",
            join: Join::PathPrepend,
            part: Part::Dir,
        }],
    },
    Integration {
        runner: "node",
        // One self-contained file: vitest (forks and threads pools) and jest.
        files: &[(
            "tracer-node.js",
            include_str!("../../../integrations/node/preload.js"),
        )],
        // NODE_OPTIONS, not a `--require` on a command line: a vitest
        // threads-pool worker started with `execArgv: []` runs the preload
        // only through the environment it inherits (measured, Node 20).
        env: &[Var {
            name: "NODE_OPTIONS",
            join: Join::NodeOptionsAppend,
            part: Part::Require("tracer-node.js"),
        }],
    },
];

/// `--runtime-stacks`: the runtimes' own crash evidence, asked for through
/// their variables (no files).
pub const RUNTIME_STACKS: &[Integration] = &[
    Integration {
        runner: "python",
        files: &[],
        // faulthandler's traceback on SIGSEGV/SIGABRT/SIGBUS/SIGILL/SIGFPE
        // is what a Python crash's certificate quotes first.
        env: &[Var {
            name: "PYTHONFAULTHANDLER",
            join: Join::SetIfUnset,
            part: Part::Word("1"),
        }],
    },
    Integration {
        runner: "node",
        files: &[],
        // Functions only: the full `--perf-basic-prof` also logs every
        // stub and handler V8 makes, a map several times larger.
        env: &[Var {
            name: "NODE_OPTIONS",
            join: Join::NodeOptionsAppend,
            part: Part::Word("--perf-basic-prof-only-functions"),
        }],
    },
];

/// Which tables a run asked for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wanted {
    pub tests: bool,
    pub runtime_stacks: bool,
}

/// What `--tests` and `--runtime-stacks` made for one run: the directory
/// (removed when this is dropped, at the run's end; none when no
/// integration has files) and the variables.
pub struct Injected {
    pub dir: Option<IntegrationDir>,
    pub env: Vec<Planned>,
}

impl Injected {
    /// Every integration of the tables `wanted`, for a command that would
    /// get tracer's own environment; `owner`: the command's user, when it
    /// is not tracer's.
    pub fn prepare(owner: Option<(Uid, Gid)>, wanted: Wanted) -> Result<Self, TracerError> {
        let mut tables: Vec<Integration> = Vec::new();
        if wanted.tests {
            tables.extend_from_slice(INTEGRATIONS);
        }
        if wanted.runtime_stacks {
            tables.extend_from_slice(RUNTIME_STACKS);
        }
        let files: Vec<(&str, &str)> = tables
            .iter()
            .flat_map(|i| i.files.iter().copied())
            .collect();
        let dir = match files.is_empty() {
            true => None,
            false => Some(IntegrationDir::create(
                &files,
                owner,
                std::env::var_os("TMPDIR").as_deref(),
            )?),
        };
        // No table's part names the directory when there is none.
        let at = dir.as_ref().map_or(Path::new("/"), IntegrationDir::path);
        let env = plan(&tables, at, |v| std::env::var_os(v));
        Ok(Self { dir, env })
    }

    /// The changes, as the log header lists them.
    pub fn changes(&self) -> Vec<EnvChange> {
        self.env.iter().map(|p| p.change.clone()).collect()
    }

    /// The variables to set in the command.
    pub fn vars(&self) -> Vec<(&'static str, OsString)> {
        self.env.iter().map(|p| (p.var, p.value.clone())).collect()
    }
}

/// One variable's new value, and the change as the header records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub var: &'static str,
    pub value: OsString,
    pub change: EnvChange,
}

/// The environment changes that load `integrations` from `dir`, given the
/// environment the command would have had (`env`). A variable two
/// integrations share is joined once per part, in table order. A part
/// already present changes nothing and is not listed.
pub fn plan(
    integrations: &[Integration],
    dir: &Path,
    env: impl Fn(&str) -> Option<OsString>,
) -> Vec<Planned> {
    let mut out: Vec<Planned> = Vec::new();
    for var in integrations.iter().flat_map(|i| i.env) {
        let old = match out.iter().find(|p| p.var == var.name) {
            Some(p) => Some(p.value.clone()),
            None => env(var.name),
        };
        let Some((value, how)) = join(var.join, old.as_deref(), &part(var.part, dir)) else {
            continue;
        };
        match out.iter_mut().find(|p| p.var == var.name) {
            Some(p) => {
                p.change.new = lossy(&value);
                p.value = value;
            }
            None => out.push(Planned {
                var: var.name,
                change: EnvChange {
                    var: var.name.to_string(),
                    how: how.to_string(),
                    old: old.as_deref().map(lossy),
                    new: lossy(&value),
                },
                value,
            }),
        }
    }
    out
}

/// Most bytes of a value the header keeps: the command gets it whole,
/// the log a bounded copy (a variable may be up to 128 KiB).
pub const MAX_SHOWN: usize = 4096;

/// A value as the header shows it: lossy UTF-8, cut at [`MAX_SHOWN`]
/// bytes with what was cut said.
fn lossy(s: &OsStr) -> String {
    let b = s.as_bytes();
    if b.len() <= MAX_SHOWN {
        return String::from_utf8_lossy(b).into_owned();
    }
    format!(
        "{}… ({} bytes in all)",
        String::from_utf8_lossy(&b[..MAX_SHOWN]),
        b.len()
    )
}

fn part(p: Part, dir: &Path) -> OsString {
    match p {
        Part::Word(w) => w.into(),
        Part::Dir => dir.as_os_str().to_owned(),
        Part::Require(file) => {
            let mut o = b"--require \"".to_vec();
            for &b in dir.join(file).as_os_str().as_bytes() {
                if b == b'"' || b == b'\\' {
                    o.push(b'\\');
                }
                o.push(b);
            }
            o.push(b'"');
            OsString::from_vec(o)
        }
    }
}

/// `old` with `add` joined in, and how (`set`, `appended`, `prepended`);
/// `None`: `add` is there already. Unset and empty are alike: each
/// runner reads an empty value as no value.
pub fn join(j: Join, old: Option<&OsStr>, add: &OsStr) -> Option<(OsString, &'static str)> {
    let old = old.map(OsStr::as_bytes).filter(|o| !o.is_empty());
    let add = add.as_bytes();
    let Some(old) = old else {
        return Some((OsString::from_vec(add.to_vec()), "set"));
    };
    let (sep, first): (&[u8], bool) = match j {
        Join::ListAppend => {
            // pytest splits on commas, nothing more (` a` is a module
            // named " a").
            if old.split(|&b| b == b',').any(|n| n == add) {
                return None;
            }
            (b",", false)
        }
        Join::PathPrepend => {
            if old.split(|&b| b == b':').next() == Some(add) {
                return None;
            }
            (b":", true)
        }
        Join::NodeOptionsAppend => {
            if old.split(|&b| b == b' ').any(|w| w == add) {
                return None;
            }
            (b" ", false)
        }
        Join::SetIfUnset => return None,
    };
    let v = if first {
        [add, sep, old].concat()
    } else if old.ends_with(sep) {
        // `a,` stays one separator: tracer adds no empty entry of its own.
        [old, add].concat()
    } else {
        [old, sep, add].concat()
    };
    Some((
        OsString::from_vec(v),
        if first { "prepended" } else { "appended" },
    ))
}

#[cfg(test)]
mod tests;
