//! Programs the integration tests drive besides the tracer: installed from
//! Debian's packages when missing (idempotent: a present tool costs a lookup).
use std::{path::Path, process::Command};

use anyhow::{Context, Result};

use crate::{cmd, privilege};

/// (program the tests run, Debian package that provides it)
const NEEDED: [(&str, &str); 9] = [
    ("chromium", "chromium"), // report.html checked in headless Chromium (/usr/bin/chromium)
    ("pkill", "procps"),      // the `pkill -f` scenario
    ("python3", "python3"),   // hang and snapshot scenarios
    ("python3 -m venv", "python3-venv"), // the ci/ tests' venv of pinned lint tools
    ("jq", "jq"),             // ci/ scripts and their end-to-end test
    ("sudo", "sudo"),         // ci/ end-to-end: a runner user with sudo, as on GitHub
    ("nsenter", "util-linux"), // pid-namespace tests (unshare, nsenter); ci/ scripts (setsid)
    ("node", "nodejs"),       // caught-and-re-raised scenarios: Node's own SIGTERM/SIGINT handling
    ("prometheus", "prometheus"), // daemon --metrics-listen scraped by a real server
];

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
