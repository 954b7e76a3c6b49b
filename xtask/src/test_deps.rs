//! Programs the integration tests drive besides the tracer: installed from
//! Debian's packages when missing (idempotent: a present tool costs a lookup);
//! then the test runners of the runner suites (tests/kernel/runners): vitest,
//! jest, pytest with xdist through the suites' own setup script, and
//! cargo-nextest through `cargo install`.
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use crate::{cmd, privilege, workspace::Workspace};

/// (program the tests run, Debian package that provides it)
const NEEDED: [(&str, &str); 12] = [
    ("chromium", "chromium"), // report.html checked in headless Chromium (/usr/bin/chromium)
    ("pkill", "procps"),      // the `pkill -f` scenario
    ("python3", "python3"),   // hang and snapshot scenarios
    ("python3 -m venv", "python3-venv"), // the ci/ tests' venv of pinned lint tools
    ("jq", "jq"),             // ci/ scripts and their end-to-end test
    ("sudo", "sudo"),         // ci/ end-to-end: a runner user with sudo, as on GitHub
    ("nsenter", "util-linux"), // pid-namespace tests (unshare, nsenter); ci/ scripts (setsid)
    ("node", "nodejs"),       // caught-and-re-raised scenarios: Node's own SIGTERM/SIGINT handling
    ("prometheus", "prometheus"), // daemon --metrics-listen scraped by a real server
    ("go", "golang-go"),      // runners::go: a real `go test` suite
    ("npm", "npm"),           // runners: `npm ci` of vitest and jest (setup.sh)
    ("strace", "strace"),     // pipe_idiom: a wrapper re-raising its tracee's fatal signal
];

/// The cargo-nextest `cargo install` puts on a machine without one; any
/// version already there is used as it is (the suite needs nothing newer
/// than `-E` filters and process-per-test).
const NEXTEST_VERSION: &str = "0.9.143";

/// The suites' setup script and where it puts the runners: under the target
/// dir's tmp/, which the kernel tests know as `CARGO_TARGET_TMPDIR` (they run
/// the same script there, a no-op once this has).
const SUITES_SETUP: &str = "tracer-user/tests/fixtures/suites/setup.sh";
const SUITES_CACHE: &str = "tmp/runner-suites";

fn on_path(program: &str) -> bool {
    // A file a package provides (a header), not a program.
    if program.starts_with('/') {
        return Path::new(program).exists();
    }
    // The Chromium test runs /usr/bin/chromium itself.
    if program == "chromium" {
        return Path::new("/usr/bin/chromium").exists();
    }
    // Debian's python3 makes venvs only with python3-venv (ensurepip).
    if program == "python3 -m venv" {
        return Command::new("python3")
            .args(["-c", "import ensurepip, venv"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
    }
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

pub(crate) fn ensure() -> Result<()> {
    ensure_programs(&NEEDED)
}

/// cargo-nextest, then vitest, jest, pytest and pytest-xdist at their pinned
/// versions (setup.sh: `npm ci` and a venv, outside the repository). Measured
/// on the 2-core test machine: cold 32 s (npm ci 18 s), warm 0.03 s.
pub(crate) fn ensure_runner_suites(ws: &Workspace) -> Result<()> {
    ensure_nextest(ws)?;
    suites_cache(ws).map(drop)
}

/// setup.sh's cache of vitest, jest, pytest and pytest-xdist (the path
/// above, made or reused as it is): what `cargo xtask test` installs for the
/// runner suites, and the bench's suite rows run.
pub(crate) fn suites_cache(ws: &Workspace) -> Result<PathBuf> {
    let started = Instant::now();
    let cache = ws.target_dir.join(SUITES_CACHE);
    cmd::run(
        Command::new(ws.root.join(SUITES_SETUP))
            .arg(&cache)
            .stdout(std::process::Stdio::null()),
    )
    .context("installing the runner suites' test runners (vitest, jest, pytest, pytest-xdist)")?;
    let took = started.elapsed();
    if took > Duration::from_secs(1) {
        eprintln!("xtask: the runner suites' runners set up in {took:.1?}");
    }
    Ok(cache)
}

fn ensure_nextest(ws: &Workspace) -> Result<()> {
    let present = |ws: &Workspace| {
        Command::new("cargo")
            .args(["nextest", "--version"])
            .current_dir(&ws.root)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if present(ws) {
        return Ok(());
    }
    eprintln!("xtask: cargo-nextest not found: installing {NEXTEST_VERSION} (takes a few minutes)");
    cmd::run(
        Command::new("cargo")
            .args([
                "install",
                "cargo-nextest",
                "--version",
                NEXTEST_VERSION,
                "--locked",
            ])
            .current_dir(&ws.root),
    )?;
    if !present(ws) {
        bail!("`cargo nextest --version` still fails after `cargo install cargo-nextest`: is cargo's bin dir on PATH?");
    }
    Ok(())
}

/// Install the Debian package of each (program, package) whose program is
/// missing; a no-op when all are there.
pub(crate) fn ensure_programs(needed: &[(&str, &str)]) -> Result<()> {
    let missing: Vec<&str> = needed
        .iter()
        .filter(|(prog, _)| !on_path(prog))
        .map(|(_, pkg)| *pkg)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let apt = |args: &[&str]| -> Command {
        let mut c = if privilege::is_root().unwrap_or(false) {
            Command::new("apt-get")
        } else {
            let mut s = Command::new("sudo");
            s.arg("apt-get");
            s
        };
        c.env("DEBIAN_FRONTEND", "noninteractive").args(args);
        c
    };
    cmd::run(&mut apt(&["update", "-q"])).context("apt-get update (to install test tools)")?;
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend(&missing);
    cmd::run(&mut apt(&install)).with_context(|| format!("installing {}", missing.join(" ")))
}
