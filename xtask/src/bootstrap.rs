//! Tools the eBPF build needs beyond the pinned toolchain: rust-src (for
//! `-Z build-std=core`) and bpf-linker 0.10.4. Cheap checks first; install
//! only what is missing, so a second run is a no-op.
use std::{
    env,
    ffi::OsString,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};

use crate::{cmd, workspace::Workspace};

/// Its default features load the running rustc toolchain's own libLLVM, so it
/// always matches the bitcode rustc emits (see docs/building.md).
pub(crate) const BPF_LINKER_VERSION: &str = "0.10.4";

/// What the eBPF build needs from the bootstrap.
pub(crate) struct Tools {
    /// `PATH` with bpf-linker's install directory first.
    pub path: OsString,
}

pub(crate) fn run(ws: &Workspace) -> Result<Tools> {
    ensure_rust_src(ws)?;
    ensure_bpf_linker(ws)
}

fn ensure_rust_src(ws: &Workspace) -> Result<()> {
    if rust_src_present(ws)? {
        eprintln!("xtask: rust-src for {} is present", ws.toolchain);
        return Ok(());
    }
    cmd::run(Command::new("rustup").args([
        "component",
        "add",
        "rust-src",
        "--toolchain",
        &ws.toolchain,
    ]))?;
    if !rust_src_present(ws)? {
        bail!(
            "rust-src still missing for toolchain {} after `rustup component add`",
            ws.toolchain
        );
    }
    Ok(())
}

fn rust_src_present(ws: &Workspace) -> Result<bool> {
    let out = cmd::output(
        Command::new("rustc")
            .args(["--print", "sysroot"])
            .current_dir(&ws.root),
    )?;
    if !out.status.success() {
        bail!(
            "`rustc --print sysroot` failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Ok(sysroot
        .join("lib/rustlib/src/rust/library/core/Cargo.toml")
        .is_file())
}

fn ensure_bpf_linker(ws: &Workspace) -> Result<Tools> {
    let root = install_root()?;
    let bin_dir = root.join("bin");
    let path = prepend_path(&bin_dir);

    match installed_version(&path)? {
        Some((found, version)) if version == BPF_LINKER_VERSION => {
            eprintln!(
                "xtask: bpf-linker {version} is present at {}",
                found.display()
            );
            return Ok(Tools { path });
        }
        Some((found, version)) => eprintln!(
            "xtask: bpf-linker at {} is {version}, need {BPF_LINKER_VERSION}: installing",
            found.display()
        ),
        None => eprintln!(
            "xtask: bpf-linker not found: installing {BPF_LINKER_VERSION} (takes a few minutes)"
        ),
    }

    // --force: replace a binary cargo did not install, or another version.
    cmd::run(
        Command::new("cargo")
            .args(["install", "bpf-linker", "--version", BPF_LINKER_VERSION])
            .args(["--locked", "--force", "--root"])
            .arg(&root)
            .current_dir(&ws.root),
    )?;

    match installed_version(&path)? {
        Some((found, version)) if version == BPF_LINKER_VERSION => {
            eprintln!("xtask: installed bpf-linker {version} at {}", found.display());
            Ok(Tools { path })
        }
        Some((found, version)) => bail!(
            "installed bpf-linker {BPF_LINKER_VERSION} into {}, but {} (version {version}) comes first on PATH",
            bin_dir.display(),
            found.display()
        ),
        None => bail!("bpf-linker not found in {} after `cargo install`", bin_dir.display()),
    }
}

/// Where `cargo install` puts binaries: $CARGO_INSTALL_ROOT, $CARGO_HOME or ~/.cargo.
fn install_root() -> Result<PathBuf> {
    if let Some(root) = env::var_os("CARGO_INSTALL_ROOT") {
        return Ok(root.into());
    }
    if let Some(home) = env::var_os("CARGO_HOME") {
        return Ok(home.into());
    }
    let home =
        env::var_os("HOME").context("none of CARGO_INSTALL_ROOT, CARGO_HOME, HOME is set")?;
    Ok(Path::new(&home).join(".cargo"))
}

fn prepend_path(dir: &Path) -> OsString {
    let rest = env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(dir.to_path_buf()).chain(env::split_paths(&rest));
    env::join_paths(dirs).unwrap_or(rest)
}

/// The bpf-linker that `path` resolves to and the version it reports, if any.
fn installed_version(path: &OsString) -> Result<Option<(PathBuf, String)>> {
    let Some(found) = which("bpf-linker", path) else {
        return Ok(None);
    };
    let out = cmd::output(Command::new(&found).arg("--version"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = match parse_version(&text) {
        Some(v) if out.status.success() => v.to_string(),
        _ => format!("unknown ({}, {:?})", out.status, text.trim()),
    };
    Ok(Some((found, version)))
}

/// `bpf-linker 0.10.4` → `0.10.4`.
pub(crate) fn parse_version(text: &str) -> Option<&str> {
    let mut words = text.lines().next()?.split_whitespace();
    (words.next()? == "bpf-linker").then_some(())?;
    words.next()
}

/// First executable file called `name` in the directories of `path`.
pub(crate) fn which(name: &str, path: &OsString) -> Option<PathBuf> {
    env::split_paths(path)
        .map(|dir| dir.join(name))
        .find(|file| {
            file.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

#[cfg(test)]
mod tests {
    use super::parse_version;

    #[test]
    fn parses_version_line() {
        assert_eq!(parse_version("bpf-linker 0.10.4\n"), Some("0.10.4"));
        assert_eq!(parse_version("bpf-linker 0.13.0"), Some("0.13.0"));
        assert_eq!(parse_version("something 0.10.4"), None);
        assert_eq!(parse_version(""), None);
    }
}
