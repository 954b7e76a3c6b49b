//! Build the `tracer` binary (with the release eBPF object embedded).
use std::{path::PathBuf, process::Command};

use anyhow::Result;

use crate::{cmd, ebpf, workspace::Workspace};

pub(crate) fn run(ws: &Workspace, release: bool) -> Result<PathBuf> {
    ebpf::build(ws, true)?;
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(&ws.root)
        .args(["build", "-p", "tracer-user"]);
    if release {
        cargo.arg("--release");
    }
    if let Some((key, value)) = ws.ebpf_object_env() {
        cargo.env(key, value);
    }
    cmd::run(&mut cargo)?;

    let bin = ws.tracer_bin(release);
    crate::workspace::require_file(&bin, "tracer binary")?;
    eprintln!("xtask: tracer binary: {}", bin.display());
    Ok(bin)
}
