//! `cargo xtask run -- <tracer args>`: build, then become `tracer` (as root).
use std::{
    env,
    ffi::{OsStr, OsString},
    path::Path,
    process::Command,
};

use anyhow::{Context, Result};

use crate::{build, cmd, privilege, workspace::Workspace};

/// Returns only on failure: on success this process *becomes* tracer (exec),
/// so the caller sees tracer's exit status (128+N for signal N) and signals
/// from the terminal reach tracer alone.
pub(crate) fn run(ws: &Workspace, release: bool, args: &[OsString]) -> Result<()> {
    // Know how to become root before spending minutes on a build.
    let sudo =
        if privilege::is_root()? {
            None
        } else {
            Some(privilege::sudo().context(
                "tracer needs root: run this as root, or install sudo (not found on PATH)",
            )?)
        };
    let bin = build::run(ws, release)?;
    let mut tracer = match sudo {
        None => Command::new(&bin),
        Some(sudo) => {
            // sudo resets PATH (secure_path); the traced command should see ours.
            let mut sudo = Command::new(sudo);
            sudo.args(["-E", "env"])
                .arg(concat("PATH=", &env::var_os("PATH").unwrap_or_default()))
                .arg(&bin);
            sudo
        }
    };
    tracer.args(args);
    scrub_env(ws, &mut tracer);
    Err(cmd::exec(&mut tracer))
}

/// Drop what `cargo run` and rustup added to our environment, so the traced
/// command sees the environment `cargo xtask` was started with.
fn scrub_env(ws: &Workspace, cmd: &mut Command) {
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let added = matches!(
            key,
            "CARGO"
                | "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "RUSTUP_TOOLCHAIN"
                | "RUSTUP_TOOLCHAIN_SOURCE"
                | "RUST_RECURSION_COUNT"
        ) || key.starts_with("CARGO_PKG_");
        if added {
            cmd.env_remove(key);
        }
    }
    if let Some(value) = &ws.user_toolchain_env {
        cmd.env("RUSTUP_TOOLCHAIN", value);
    }
    // cargo prepends the target dir and the toolchain's lib dirs.
    if let Some(value) = env::var_os("LD_LIBRARY_PATH") {
        let rustup_home = env::var_os("RUSTUP_HOME").map(|h| Path::new(&h).join("toolchains"));
        let kept: Vec<_> = env::split_paths(&value)
            .filter(|dir| {
                !dir.starts_with(&ws.target_dir)
                    && !rustup_home.as_ref().is_some_and(|h| dir.starts_with(h))
            })
            .collect();
        match env::join_paths(&kept) {
            Ok(joined) if !kept.is_empty() => cmd.env("LD_LIBRARY_PATH", joined),
            _ => cmd.env_remove("LD_LIBRARY_PATH"),
        };
    }
}

fn concat(a: &str, b: &OsStr) -> OsString {
    let mut s = OsString::from(a);
    s.push(b);
    s
}
