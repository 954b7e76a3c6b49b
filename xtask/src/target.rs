//! The targets tracer is built for (x86_64 and aarch64, musl) and what a
//! cargo build for one needs: the release (`dist`), the kernel test binary
//! (`kernel_tests`) and the VM's cross-built userland (`vm`) all read it here.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result};

use crate::{cmd, ebpf, workspace::Workspace};

/// The cross-built dev profile without debug info: the initramfs strips it
/// anyway, and with it the test binaries took gigabytes of a shared disk
/// (one build ran out of space). A panic still names its file and line.
pub(crate) const NO_DEBUG_INFO: &str = "0";

/// A release target: the Rust triple, the name its tarball carries, and how
/// its one piece of C (signal-hook's siginfo shim) and its link are made.
pub(crate) struct Target {
    pub(crate) triple: &'static str,
    /// The architecture as `uname -m` and the tarball name say it.
    pub(crate) arch: &'static str,
    /// ELF `e_machine` of its executables.
    pub(crate) machine: u16,
    /// The C compiler for signal-hook's shim (`CC_<triple>`) when building
    /// on another architecture, and what it needs: (program or file that
    /// must exist, Debian package that provides it). On its own
    /// architecture the shim is compiled by musl's gcc wrapper (musl-tools),
    /// against musl's own headers, and the C compiler links.
    cross_cc: (&'static str, &'static [(&'static str, &'static str)]),
    /// `strip` for its ELF files (the VM's initramfs strips debug info;
    /// this machine's `strip` reads no other architecture's).
    pub(crate) strip: &'static str,
    /// What runs one of its executables on this machine (`qemu-aarch64`) when
    /// it is not this machine's architecture.
    emulator: (&'static str, &'static str),
}

pub(crate) const X86_64: Target = Target {
    triple: "x86_64-unknown-linux-musl",
    arch: "x86_64",
    machine: 62, // EM_X86_64
    cross_cc: (
        "x86_64-linux-gnu-gcc",
        &[
            ("x86_64-linux-gnu-gcc", "gcc-x86-64-linux-gnu"),
            (
                "/usr/x86_64-linux-gnu/include/signal.h",
                "libc6-dev-amd64-cross",
            ),
        ],
    ),
    strip: "x86_64-linux-gnu-strip",
    emulator: ("qemu-x86_64", "qemu-user"),
};

/// Built on arm64 (a `ubuntu-24.04-arm` runner) as x86_64 is on x86_64.
/// From x86_64, no cross gcc links it: rust-lld does, with the musl crt
/// objects and libc the rustup target ships (self-contained). Only the shim
/// needs a C compiler for arm64, and Debian has no musl one: its glibc
/// cross gcc is enough, since the shim only reads siginfo_t's fields and
/// SI_*/CLD_* constants (the kernel's ABI, the same under musl) and calls
/// nothing (`nm` of its object: no undefined symbol).
pub(crate) const AARCH64: Target = Target {
    triple: "aarch64-unknown-linux-musl",
    arch: "aarch64",
    machine: 183, // EM_AARCH64
    cross_cc: (
        "aarch64-linux-gnu-gcc",
        &[
            ("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"),
            (
                "/usr/aarch64-linux-gnu/include/signal.h",
                "libc6-dev-arm64-cross",
            ),
        ],
    ),
    // binutils-aarch64-linux-gnu, which gcc-aarch64-linux-gnu brings.
    strip: "aarch64-linux-gnu-strip",
    emulator: ("qemu-aarch64", "qemu-user"),
};

pub(crate) const TARGETS: [&Target; 2] = [&X86_64, &AARCH64];

impl Target {
    /// The target named by its triple (`aarch64-unknown-linux-musl`) or its
    /// architecture (`aarch64`, `arm64`).
    pub(crate) fn named(name: &str) -> Result<&'static Target> {
        let name = if name == "arm64" { "aarch64" } else { name };
        TARGETS
            .into_iter()
            .find(|t| t.triple == name || t.arch == name)
            .with_context(|| {
                let known: Vec<_> = TARGETS.iter().map(|t| t.triple).collect();
                format!("no release target {name}: use one of {known:?}")
            })
    }

    /// The target of the machine xtask runs on.
    pub(crate) fn host() -> Result<&'static Target> {
        Self::named(std::env::consts::ARCH)
    }

    pub(crate) fn is_host(&self) -> bool {
        self.arch == std::env::consts::ARCH
    }

    /// The shim's C compiler here, with what it needs, and the linker when
    /// it is not that compiler: the toolchain's own lld, which rustc finds
    /// in its sysroot.
    fn c_compiler(
        &self,
    ) -> (
        &'static str,
        &'static [(&'static str, &'static str)],
        Option<&'static str>,
    ) {
        match self.is_host() {
            true => ("musl-gcc", &[("musl-gcc", "musl-tools")], None),
            false => (self.cross_cc.0, self.cross_cc.1, Some("rust-lld")),
        }
    }

    /// `tracer-VERSION-ARCH-linux-musl`: the tarball's name and top directory.
    pub(crate) fn release_name(&self) -> String {
        format!(
            "tracer-{}-{}-linux-musl",
            env!("CARGO_PKG_VERSION"),
            self.arch
        )
    }

    /// `CARGO_TARGET_<TRIPLE>_<KEY>`.
    fn cargo_env(&self, key: &str) -> String {
        format!(
            "CARGO_TARGET_{}_{key}",
            self.triple.to_uppercase().replace('-', "_")
        )
    }

    /// A command running `bin` of this target here: itself, or under
    /// qemu's user-mode emulator (installed when missing).
    pub(crate) fn runner(&self, bin: &Path) -> Result<Command> {
        if self.is_host() {
            return Ok(Command::new(bin));
        }
        crate::test_deps::ensure_programs(&[self.emulator]).with_context(|| {
            format!(
                "running the {} binary on this {} machine needs {} (Debian package {})",
                self.arch,
                std::env::consts::ARCH,
                self.emulator.0,
                self.emulator.1
            )
        })?;
        let mut c = Command::new(self.emulator.0);
        c.arg(bin);
        Ok(c)
    }
}

/// What a cargo build for `target` needs: the rustup target, the shim's C
/// compiler, the linker, and the release eBPF object (built when out of
/// date). Also used for the test binaries an arm64 VM runs.
pub(crate) fn cross_env(ws: &Workspace, target: &Target, cargo: &mut Command) -> Result<()> {
    ensure_target(ws, target.triple)?;
    let (cc, needs, linker) = target.c_compiler();
    crate::test_deps::ensure_programs(needs).with_context(|| {
        format!(
            "signal-hook's C shim for {} is compiled by {cc}: install {} (Debian/Ubuntu packages), \
             or put that compiler on PATH",
            target.triple,
            needs
                .iter()
                .map(|(_, pkg)| *pkg)
                .collect::<Vec<_>>()
                .join(" ")
        )
    })?;
    let object = ebpf::build(ws, true)?;
    cargo
        .env(format!("CC_{}", target.triple.replace('-', "_")), cc)
        .env("TRACER_EBPF_OBJECT", &object);
    if let Some(linker) = linker {
        cargo.env(target.cargo_env("LINKER"), linker);
    }
    Ok(())
}

/// rustup's standard library for `triple` and the pinned toolchain (idempotent).
fn ensure_target(ws: &Workspace, triple: &str) -> Result<()> {
    let out = cmd::output(
        Command::new("rustc")
            .args(["--print", "sysroot"])
            .current_dir(&ws.root),
    )?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if sysroot.join("lib/rustlib").join(triple).is_dir() {
        return Ok(());
    }
    cmd::run(Command::new("rustup").args(["target", "add", triple, "--toolchain", &ws.toolchain]))
        .with_context(|| {
            format!(
                "the Rust standard library for {triple}: rustup could not add it to {}",
                ws.toolchain
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_targets() {
        assert_eq!(Target::named("arm64").unwrap().triple, AARCH64.triple);
        assert_eq!(
            Target::named("aarch64-unknown-linux-musl").unwrap().arch,
            "aarch64"
        );
        assert_eq!(Target::named("x86_64").unwrap().triple, X86_64.triple);
        assert!(Target::named("riscv64").is_err());
        assert_eq!(
            AARCH64.release_name(),
            format!("tracer-{}-aarch64-linux-musl", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(
            AARCH64.cargo_env("LINKER"),
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER"
        );
    }
}
