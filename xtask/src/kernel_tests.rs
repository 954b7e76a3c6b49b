//! The kernel test binary (`tracer-user/tests/kernel`): one executable whose
//! modules are the subjects (`capture`, `oom`, `security`, ...). `vm-test` and
//! `dist --check` run some of them by module name.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context, Result};

use crate::{
    cmd,
    target::{self, Target},
    workspace::Workspace,
};

/// Cargo's name of the test target.
pub(crate) const TARGET: &str = "kernel";

/// Builds the kernel test binary (`cargo test --no-run`; for `cross`'s
/// target when given, static, without debug info); its path from cargo's
/// JSON messages.
pub(crate) fn build(ws: &Workspace, cross: Option<&Target>) -> Result<PathBuf> {
    let mut cargo = Command::new("cargo");
    cargo.current_dir(&ws.root).args([
        "test",
        "--no-run",
        "-p",
        "tracer-user",
        "--test",
        TARGET,
        "--message-format=json-render-diagnostics",
    ]);
    match cross {
        Some(target) => {
            cargo.args(["--target", target.triple]);
            cargo.env("CARGO_PROFILE_DEV_DEBUG", target::NO_DEBUG_INFO);
            target::cross_env(ws, target, &mut cargo)?;
        }
        None => {
            if let Some((key, value)) = ws.ebpf_object_env() {
                cargo.env(key, value);
            }
        }
    }
    cargo.stderr(Stdio::inherit());
    let out = cmd::output(&mut cargo)?;
    if !out.status.success() {
        bail!("`cargo test --no-run --test {TARGET}` failed");
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["target"]["name"] == TARGET)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("cargo named no executable for the `{TARGET}` test target"))
}

/// The exact names of the tests in `modules` (libtest's own filters match a
/// substring anywhere in a name, so `oom` alone would also pick
/// `certificates::memcg_oom_kill_blames_the_kernel`). A module without tests
/// is an error: a misspelt name must not pass by running nothing. A `cross`
/// binary is listed under qemu's user-mode emulator.
pub(crate) fn select(
    bin: &Path,
    cross: Option<&Target>,
    modules: &[String],
) -> Result<Vec<String>> {
    let all = names(&list(bin, cross)?);
    let mut picked = Vec::new();
    for module in modules {
        let prefix = format!("{module}::");
        let before = picked.len();
        picked.extend(all.iter().filter(|n| n.starts_with(&prefix)).cloned());
        if picked.len() == before {
            bail!("the kernel test binary has no module `{module}` (no test named `{prefix}…`)");
        }
    }
    Ok(picked)
}

/// The binary's `--list --format terse` output (`NAME: test` lines), under
/// qemu's user-mode emulator for a `cross` binary.
pub(crate) fn list(bin: &Path, cross: Option<&Target>) -> Result<String> {
    let mut list = match cross {
        Some(target) => target.runner(bin)?,
        None => Command::new(bin),
    };
    let out = cmd::output(list.args(["--list", "--format", "terse"]))?;
    if !out.status.success() {
        bail!("`{} --list` failed", bin.display());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Test names out of libtest's `--list --format terse` (`NAME: test` lines).
fn names(list: &str) -> Vec<String> {
    list.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn names_are_the_test_lines_only() {
        let list = "capture::a: test\ncapture::b: test\nsome_bench: bench\n";
        assert_eq!(names(list), ["capture::a", "capture::b"]);
    }
}
