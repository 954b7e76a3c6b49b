//! Build the eBPF object (crate `tracer-ebpf`, outside the workspace).
use std::{path::PathBuf, process::Command};

use anyhow::Result;

use crate::{
    bootstrap, cmd,
    workspace::{Workspace, EBPF_TARGET},
};

/// `cargo SUBCOMMAND` for the eBPF crate, as it must be run: bootstrapped
/// tools on PATH, its own lock file, the BPF target with build-std.
pub(crate) fn cargo(ws: &Workspace, subcommand: &str, release: bool) -> Result<Command> {
    let tools = bootstrap::run(ws)?;
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(ws.root.join("tracer-ebpf"))
        // Stable rustc + rust-src: `-Z build-std` and aya-ebpf's unstable
        // feature need RUSTC_BOOTSTRAP, for this crate only.
        .env("RUSTC_BOOTSTRAP", "1")
        // rustc runs the linker `bpf-linker` from PATH.
        .env("PATH", &tools.path)
        // BTF in the object (from the profiles' debug info): the kernel
        // takes a helper's callback (`bpf_loop`, the exec program's envp
        // walk) only from a program with func_info. Set here, not in a
        // config file, so a RUSTFLAGS meant for the host never reaches the
        // BPF target (it would take precedence over a config).
        .env_remove("RUSTFLAGS")
        .env("CARGO_ENCODED_RUSTFLAGS", "-Clink-arg=--btf")
        // Its own Cargo.lock pins aya-build 0.2.0 (0.2.1 refuses rustc 1.95).
        .args([subcommand, "--locked"]);
    if release {
        cargo.arg("--release");
    }
    cargo
        .args([
            "--target",
            EBPF_TARGET,
            "-Z",
            "build-std=core",
            "--target-dir",
        ])
        .arg(&ws.target_dir);
    Ok(cargo)
}

/// Bootstrap, then build; returns the object's path. The release object is
/// the one tracer-user embeds.
pub(crate) fn build(ws: &Workspace, release: bool) -> Result<PathBuf> {
    let mut cargo = cargo(ws, "build", release)?;
    cmd::run(&mut cargo)?;

    let object = ws.ebpf_object(release);
    crate::workspace::require_file(&object, "eBPF object")?;
    eprintln!("xtask: eBPF object: {}", object.display());
    Ok(object)
}
