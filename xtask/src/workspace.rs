//! Where things are: repository root, target dir, pinned toolchain.
use std::{
    env,
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};

/// The eBPF crate's target triple: where its object lands under target/.
pub(crate) const EBPF_TARGET: &str = "bpfel-unknown-none";

pub(crate) struct Workspace {
    /// Repository root (the workspace `Cargo.toml`).
    pub root: PathBuf,
    /// Cargo target dir shared by the workspace and the eBPF crate.
    pub target_dir: PathBuf,
    /// Toolchain channel pinned in `rust-toolchain.toml`.
    pub toolchain: String,
    /// `RUSTUP_TOOLCHAIN` as the user set it (not as rustup set it for us).
    pub user_toolchain_env: Option<OsString>,
}

impl Workspace {
    pub(crate) fn locate() -> Result<Self> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .context("xtask has no parent directory")?
            .to_path_buf();
        let target_dir = match env::var_os("CARGO_TARGET_DIR") {
            Some(dir) => root.join(dir),
            None => root.join("target"),
        };
        let file = root.join("rust-toolchain.toml");
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let toolchain = pinned_channel(&text)
            .with_context(|| format!("no `channel = \"...\"` in {}", file.display()))?;
        let user_toolchain_env = match env::var_os("RUSTUP_TOOLCHAIN_SOURCE") {
            Some(source) if source == "env" => env::var_os("RUSTUP_TOOLCHAIN"),
            _ => None,
        };
        // Every child (cargo, rustc, rustup, and bpf-linker via rustc) uses the
        // pinned toolchain, even under `cargo +other xtask`: bpf-linker loads that
        // toolchain's libLLVM, so bitcode and linker must come from the same one.
        let current = env::var("RUSTUP_TOOLCHAIN").unwrap_or_default();
        if !current.starts_with(&toolchain) {
            if !current.is_empty() {
                eprintln!("xtask: using the pinned toolchain {toolchain}, not {current}");
            }
            env::set_var("RUSTUP_TOOLCHAIN", &toolchain);
        }
        Ok(Self {
            root,
            target_dir,
            toolchain,
            user_toolchain_env,
        })
    }

    /// The `tracer` binary `cargo build`/`cargo test` produce for this profile.
    pub(crate) fn tracer_bin(&self, release: bool) -> PathBuf {
        let profile = if release { "release" } else { "debug" };
        self.target_dir.join(profile).join("tracer")
    }

    /// The eBPF object `ebpf::build` produces.
    pub(crate) fn ebpf_object(&self, release: bool) -> PathBuf {
        let profile = if release { "release" } else { "debug" };
        self.target_dir
            .join(EBPF_TARGET)
            .join(profile)
            .join("tracer-ebpf")
    }

    /// Environment for building tracer-user: its build.rs looks for the release
    /// eBPF object under `../target`; point it elsewhere only when the target
    /// dir moved (so plain `cargo build` and xtask share one fingerprint).
    pub(crate) fn ebpf_object_env(&self) -> Option<(&'static str, PathBuf)> {
        if self.target_dir == self.root.join("target") {
            None
        } else {
            Some(("TRACER_EBPF_OBJECT", self.ebpf_object(true)))
        }
    }
}

/// The `channel = "..."` value of a rust-toolchain.toml.
pub(crate) fn pinned_channel(toml: &str) -> Option<String> {
    toml.lines().find_map(|line| {
        let (key, value) = line.split_once('=')?;
        if key.trim() != "channel" {
            return None;
        }
        let value = value.trim().strip_prefix('"')?;
        let end = value.find('"')?;
        Some(value[..end].to_string())
    })
}

/// `bail!` unless `path` exists.
pub(crate) fn require_file(path: &Path, what: &str) -> Result<()> {
    if !path.is_file() {
        bail!("{what} not found at {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::pinned_channel;

    #[test]
    fn reads_channel() {
        let toml = "# c\n[toolchain]\nchannel = \"1.95.0\"\ncomponents = [\"rust-src\"]\n";
        assert_eq!(pinned_channel(toml).as_deref(), Some("1.95.0"));
        assert_eq!(pinned_channel("[toolchain]\n"), None);
    }
}
