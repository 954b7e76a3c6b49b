//! Which kernel tests the VMs run: the modules of the kernel test binary
//! (`tracer-user/tests/kernel/main.rs`) in the VM suite, and every other
//! module or test with the reason it runs on the host only. `vm/suite.sh`
//! runs every test under a suite's module but the host-only ones it is
//! handed (`skip=PATH`); the guard below (`cargo xtask test`) checks, from
//! the test sources, that each suite selects a test on each architecture
//! it runs on and that no module is left out unsaid.
use std::{
    io::Write,
    path::Path,
    process::{Command, Stdio},
};

use anyhow::{bail, Context, Result};

use super::arch::VmArch;
use crate::cmd;

/// The modules of the kernel test binary that run in a VM, in order.
pub(crate) const CORE_TESTS: &[&str] = &[
    "capture",
    "oom",
    "fallback",
    "errors",
    "leaks",
    "last_words",
    "pidns",
    // Loads every program with its aya-log calls live: the verifiers must
    // accept those too, not only the default (logging off, dead code).
    "debug_ebpf",
    // Compat syscalls on the raw rung: ia32 on x86-64 (`compat::ia32`),
    // AArch32 on arm64 (`compat::aarch32`).
    "compat",
    // The crash hook and its fallback rung, DWARF unwinding, symbols.
    "crash_stacks",
    // The memory curve to an OOM kill (a leak, a spike) and the daemon's
    // watched cgroup: v1 or v2 as the guest boots (`--cgroup-v2`).
    "resources",
];

/// Suites that run on x86-64 VMs only, and why.
pub(crate) const X86_64_ONLY: &[(&str, &str)] = &[(
    "crash_stacks",
    "its crashers are this machine's glibc binaries; arm64 would need them cross-built with \
     the arm64 glibc beside them",
)];

/// Modules and tests (full paths) that run on the host only, with the
/// reason: what the initramfs (busybox, root only, no compiler) lacks.
pub(crate) const HOST_ONLY: &[(&str, &str)] = &[
    ("crash_stacks::debug_files", "objcopy"),
    ("crash_stacks::runtimes", "python3, node and a C compiler"),
    ("crash_stacks::trust", "a C compiler, nm and the nobody user"),
    (
        "crash_stacks::deleted",
        "a race with the parent's rm that busybox under TCG always won (0 of 10 on 5.10, 6.1, 6.12)",
    ),
    ("cascades", "python3 and node"),
    ("ci_integrations", "go, python3 and a release tarball's install"),
    ("caught", "python3, node and bash"),
    ("hangs", "python3"),
    ("kernel_causes", "python3"),
    ("last_words::dest", "node"),
    (
        "last_words::fd2",
        "python3 and bash (last_words proves fd 2's moves in sh)",
    ),
    (
        "last_words::writev",
        "python3 and bash (fallback proves the rungs in the VMs)",
    ),
    ("least_privilege", "sudo and the nobody user"),
    ("metrics", "prometheus"),
    ("otlp", "python3 with opentelemetry-proto"),
    ("pipe_idiom", "go, python3, node, strace and sudo"),
    ("quiet_helpers", "bash, perl and tput"),
    (
        "resources::a_throttled_timeout_says_it_was_throttled",
        "a cpu controller: the guests mount only the memory one",
    ),
    ("runners", "cargo, go, node and pytest"),
    ("security", "python3 and the nobody user"),
    ("signal_floods", "python3"),
    ("snapshot", "python3"),
    ("test_names", "python3, node and bash"),
    ("verdict", "python3 and node"),
    // Nothing missing in the VMs: analysis and output over the hooks that
    // capture, oom, fallback and last_words prove there; kept out of the
    // suites for the CI guest's time.
    ("certificates", "kernel-independent analysis; CI time"),
    ("daemon", "kernel-independent rotation and restart; CI time"),
    ("fail_on", "kernel-independent exit status policy; CI time"),
    ("redact", "kernel-independent output filtering; CI time"),
    ("reliability", "kernel-independent failure handling; CI time"),
    ("teardown", "the classic tracepoints' detach, on the host's kernel; CI time"),
];

/// `skip=PATH` arguments of `vm/suite.sh` for the host-only paths inside
/// the `modules` it runs.
pub(crate) fn skip_args(modules: &[String]) -> Vec<String> {
    HOST_ONLY
        .iter()
        .map(|(path, _)| *path)
        .filter(|p| modules.iter().any(|m| p.starts_with(&format!("{m}::"))))
        .map(|p| format!("skip={p}"))
        .collect()
}

/// Why `module` as a whole runs on the host only (`HOST_ONLY`), if it does:
/// asked for with `--test`, it would run in guests that lack what it needs
/// and fail every test after the whole build and boot.
pub(crate) fn host_only_module(module: &str) -> Option<&'static str> {
    HOST_ONLY
        .iter()
        .find(|(path, _)| *path == module)
        .map(|(_, why)| *why)
}

/// The first of `tests` that runs on the host only, as one line a user can
/// act on.
pub(crate) fn refuse_host_only(tests: &[String]) -> Result<()> {
    for module in tests {
        if let Some(why) = host_only_module(module) {
            bail!(
                "`{module}` runs on the host only ({why}): run it with `cargo test -p \
                 tracer-user --test kernel -- {module}::`, or drop `--test {module}`"
            );
        }
    }
    Ok(())
}

/// Whether `module` runs on `arch`'s VMs.
pub(crate) fn runs_on(module: &str, arch: &VmArch) -> bool {
    arch.cross.is_none() || !X86_64_ONLY.iter().any(|(m, _)| *m == module)
}

/// What `vm/suite.sh` runs of `module`, given the test binary's
/// `--list --format terse` output: the suite's own selection, not a copy.
pub(crate) fn select(
    suite: &Path,
    list: &str,
    module: &str,
    skips: &[String],
) -> Result<Vec<String>> {
    let mut sh = Command::new("sh");
    sh.arg(suite).args(["--select", module]).args(skips);
    let mut child = sh
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start `{}`", cmd::display(&sh)))?;
    let mut stdin = child.stdin.take().context("suite.sh's stdin")?;
    let list = list.to_string();
    // Written from a thread: a long list and a long answer would otherwise
    // each wait for the other's pipe.
    let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()));
    let out = child.wait_with_output()?;
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("writing to suite.sh panicked"))??;
    if !out.status.success() {
        bail!("`{}` failed ({})", cmd::display(&sh), out.status);
    }
    Ok(String::from_utf8(out.stdout)
        .context("suite.sh --select printed non-UTF-8")?
        .lines()
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
mod guard;
