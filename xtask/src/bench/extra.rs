//! The bench's workloads that are real programs rather than driver modes: Go's
//! SIGURG preemption (a Go binary, or the driver's imitation of it) and a real
//! test suite (this repository's own unit tests).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use super::workloads::Workload;
use crate::{cmd, workspace::Workspace};

const GO_SRC: &str = include_str!("preempt.go");

/// Busy goroutines on the Go runtime: sysmon sends SIGURG to a thread whose
/// goroutine ran 10 ms, so a busy program takes ~100 signals/s per thread.
/// With no Go toolchain (and none installable), the driver's `preempt` mode
/// does what sysmon does: tgkill(SIGURG) to each busy thread every 10 ms.
pub(crate) fn preempt(scale: f64, go: Option<&Path>) -> Workload {
    // Sized for ~2 s bare on 2 cores: Go's loop runs ~1.5 ns an iteration,
    // the C driver's ~0.7.
    let millions = |m: f64| ((m * scale) as u64).max(10).to_string();
    match go {
        Some(bin) => {
            let millions = millions(700.0);
            Workload {
                name: "Go preemption",
                what: format!("Go: 4 busy goroutines × {millions}M iterations, SIGURG from sysmon"),
                program: Some(bin.to_path_buf()),
                args: vec!["4".into(), millions],
            }
        }
        None => {
            let millions = millions(3000.0);
            let what = format!(
                "C imitation of Go (no Go toolchain): 4 threads × {millions}M iterations, \
                 SIGURG every 10 ms each"
            );
            Workload {
                name: "Go-style preemption",
                what,
                program: None,
                args: vec!["preempt".into(), "4".into(), millions],
            }
        }
    }
}

/// Build the Go workload into the scratch dir, installing Debian's Go
/// toolchain first when `go` is missing and apt-get is there (idempotent:
/// a second run finds `go`). `None` (with the reason printed) when neither
/// works: the bench then uses the driver's imitation.
pub(crate) fn build_go(scratch: &Path) -> Option<PathBuf> {
    match try_build_go(scratch) {
        Ok(bin) => Some(bin),
        Err(e) => {
            eprintln!("bench: no Go workload ({e:#}); using the C driver's SIGURG imitation");
            None
        }
    }
}

fn try_build_go(scratch: &Path) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let go = match crate::bootstrap::which("go", &path) {
        Some(go) => go,
        None => {
            crate::bootstrap::which("apt-get", &path).context("`go` not found, no apt-get")?;
            cmd::run(
                Command::new("apt-get")
                    .args(["install", "-y", "--no-install-recommends", "golang-go"])
                    .env("DEBIAN_FRONTEND", "noninteractive"),
            )
            .context("apt-get install golang-go")?;
            crate::bootstrap::which("go", &path)
                .or_else(|| Some(PathBuf::from("/usr/bin/go")).filter(|p| p.exists()))
                .context("`go` still not found after installing golang-go")?
        }
    };
    let src = scratch.join("gopreempt.go");
    let bin = scratch.join("gopreempt");
    let fresh = fs::read_to_string(&src).ok().as_deref() == Some(GO_SRC) && bin.exists();
    if !fresh {
        fs::write(&src, GO_SRC)?;
        // A file, not a module: nothing is fetched. The cache stays in
        // target/ (root's home may not be writable in CI).
        cmd::run(
            Command::new(&go)
                .arg("build")
                .arg("-o")
                .arg(&bin)
                .arg(&src)
                .env("GOCACHE", scratch.join("gocache"))
                .env("GO111MODULE", "off")
                .env("GOTOOLCHAIN", "local"),
        )
        .context("go build")?;
    }
    Ok(bin)
}

/// This repository's own unit tests (`cargo test -p tracer-user --lib`),
/// run from their pre-built test binary: a thread-pooled Rust test harness
/// reading fixtures and /proc, offline and deterministic.
pub(crate) fn test_suite(ws: &Workspace) -> Result<Workload> {
    let out = cmd::output(Command::new("cargo").current_dir(&ws.root).args([
        "test",
        "-p",
        "tracer-user",
        "--lib",
        "--no-run",
        "--message-format=json",
    ]))?;
    if !out.status.success() {
        bail!(
            "building the unit tests failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let bin = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["profile"]["test"] == true)
        .filter(|v| v["target"]["name"] == "tracer_user")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .context("cargo named no test executable for tracer-user's unit tests")?;
    Ok(Workload {
        name: "test suite",
        what: "tracer-user's own unit tests (pre-built, `--test-threads=2`)".into(),
        program: Some(bin),
        args: vec!["--test-threads=2".into(), "-q".into()],
    })
}
