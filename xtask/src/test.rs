//! `cargo xtask test`: unit tests plus the kernel integration tests, as root,
//! then one Debian guest (6.12, cgroup v2 only) running every VM suite.
use std::{ffi::OsString, process::Command};

use anyhow::{bail, Context, Result};

use crate::{cmd, ebpf, privilege, test_deps, vm, workspace::Workspace};

/// The programs the CI guest needs (`vm::ci_guest`).
const VM_NEEDED: [(&str, &str); 2] = [
    ("qemu-system-x86_64", "qemu-system-x86"),
    ("busybox", "busybox-static"),
];

/// `vm`: boot the CI guest after the tests (`vm::ci_guest`): the whole
/// command only, not a subset (`-- ARGS`), and not with `--no-vm`.
pub(crate) fn run(ws: &Workspace, release: bool, vm: bool, args: &[OsString]) -> Result<()> {
    let vm = vm && args.is_empty();
    if vm && std::env::consts::ARCH != "x86_64" {
        bail!(
            "the CI guest boots x86-64 kernels from this machine's build: on {} run \
             `cargo xtask test --no-vm` and `cargo xtask vm-test --arch arm64`",
            std::env::consts::ARCH
        );
    }
    // Settle root before spending minutes on a build.
    let runner = if privilege::is_root()? {
        None
    } else {
        Some(sudo_runner(ws)?)
    };
    test_deps::ensure()?;
    if vm {
        test_deps::ensure_programs(&VM_NEEDED)?;
    }
    test_deps::ensure_runner_suites(ws)?;
    check_format(ws)?;
    ebpf::build(ws, true)?;
    check_lints(ws)?;

    let mut cargo = Command::new("cargo");
    cargo.current_dir(&ws.root).args(["test", "--workspace"]);
    if release {
        cargo.arg("--release");
    }
    if let Some((key, value)) = ws.ebpf_object_env() {
        cargo.env(key, value);
    }
    if let Some((key, value)) = runner {
        cargo.env(key, value);
    }
    cargo.args(args);
    cmd::run(&mut cargo)?;
    if vm {
        let started = std::time::Instant::now();
        eprintln!(
            "xtask: the CI guest: every VM suite on {} with cgroup v2 only",
            vm::CI_KERNEL
        );
        vm::ci_guest(ws).context("the CI guest's VM suites failed (target/vm/ci/)")?;
        eprintln!(
            "xtask: the CI guest passed in {} s",
            started.elapsed().as_secs()
        );
    }
    Ok(())
}

/// rustfmt, in both workspaces: `cargo fmt --all` at the root does not
/// reach tracer-ebpf (a workspace of its own), which drifted once unseen.
fn check_format(ws: &Workspace) -> Result<()> {
    for dir in [ws.root.clone(), ws.root.join("tracer-ebpf")] {
        cmd::run(
            Command::new("cargo")
                .current_dir(&dir)
                .args(["fmt", "--all", "--check"]),
        )
        .with_context(|| {
            format!(
                "{} is not rustfmt-formatted: run `cargo fmt --all` there",
                dir.display()
            )
        })?;
    }
    Ok(())
}

/// clippy with every warning an error, in both workspaces: the root's
/// (`[workspace.lints]` in Cargo.toml) and tracer-ebpf's, for its target.
fn check_lints(ws: &Workspace) -> Result<()> {
    let mut root = Command::new("cargo");
    root.current_dir(&ws.root).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    if let Some((key, value)) = ws.ebpf_object_env() {
        root.env(key, value);
    }
    cmd::run(&mut root).context(
        "clippy found warnings in the workspace: fix them (cargo clippy --workspace --all-targets)",
    )?;
    let mut kernel = ebpf::cargo(ws, "clippy", true)?;
    kernel.args(["--", "-D", "warnings"]);
    cmd::run(&mut kernel).context("clippy found warnings in tracer-ebpf: fix them")?;
    Ok(())
}

/// Not root: compile as ourselves, but run the test executables through
/// `sudo -E` (a cargo target runner), so target/ stays ours. Authenticates
/// once up front.
fn sudo_runner(ws: &Workspace) -> Result<(String, String)> {
    let sudo = privilege::sudo().context(
        "the kernel integration tests need root: run `cargo xtask test` as root, \
         or install sudo (not found on PATH)",
    )?;
    // cargo splits the runner on whitespace.
    if sudo.to_string_lossy().contains(char::is_whitespace) {
        bail!(
            "cannot use sudo at {}: its path has a space",
            sudo.display()
        );
    }
    cmd::run(Command::new(&sudo).arg("-v"))
        .context("sudo failed: the kernel integration tests need root")?;
    let runner = format!("{} -E", sudo.display());
    Ok((runner_env(&host_triple(ws)?), runner))
}

/// `CARGO_TARGET_<TRIPLE>_RUNNER` for this triple.
fn runner_env(triple: &str) -> String {
    let triple = triple.to_ascii_uppercase().replace(['-', '.'], "_");
    format!("CARGO_TARGET_{triple}_RUNNER")
}

fn host_triple(ws: &Workspace) -> Result<String> {
    let out = cmd::output(Command::new("rustc").arg("-vV").current_dir(&ws.root))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_string())
        .context("no `host:` line in `rustc -vV`")
}

#[cfg(test)]
mod tests {
    use super::runner_env;

    #[test]
    fn runner_env_name() {
        assert_eq!(
            runner_env("x86_64-unknown-linux-gnu"),
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER"
        );
    }
}
