//! `cargo xtask dist`: the release a CI job downloads instead of building.
//!
//! A static, stripped `tracer` for x86_64 or aarch64 (musl: its libc reads
//! /etc/passwd itself, where a static glibc would need the build machine's
//! NSS modules at run time for `--user`), the eBPF object embedded (bpfel:
//! one object for both), its SHA-256, and a tarball with README and licences.
//! `--check` then runs the core kernel scenarios of the integration suite
//! against that very binary (on this machine's architecture only).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::{cmd, ebpf, kernel_tests, workspace::Workspace};

/// A release target: the Rust triple, the name its tarball carries, and how
/// its one piece of C (signal-hook's siginfo shim) and its link are made.
pub(crate) struct Target {
    pub(crate) triple: &'static str,
    /// The architecture as `uname -m` and the tarball name say it.
    pub(crate) arch: &'static str,
    /// ELF `e_machine` of its executables.
    machine: u16,
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

    fn is_host(&self) -> bool {
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

/// The modules of the kernel test binary `--check` runs with the dist binary:
/// capture, certificates, errors and the attacks of the security suite.
const CHECK_TESTS: &[&str] = &["capture", "certificates", "errors", "security"];

pub(crate) fn run(ws: &Workspace, target: &Target, check: bool) -> Result<PathBuf> {
    if check && !target.is_host() {
        bail!(
            "--check runs the kernel tests with the binary on this machine's kernel: \
             only for {} here, not {} (for arm64 kernels: cargo xtask vm-test --arch arm64)",
            Target::host().map_or(std::env::consts::ARCH, |t| t.triple),
            target.triple
        );
    }
    let bin = build_static(ws, target)?;
    let elf = fs::read(&bin)?;

    let version = version_of(target, &bin)?;
    let name = target.release_name();
    let dist = ws.target_dir.join("dist");
    let stage = dist.join(&name);
    if stage.exists() {
        fs::remove_dir_all(&stage)?;
    }
    fs::create_dir_all(&stage)?;
    fs::copy(&bin, stage.join("tracer"))?;
    for doc in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
        fs::copy(ws.root.join(doc), stage.join(doc))
            .with_context(|| format!("copying {doc} into the tarball"))?;
    }
    let tarball = dist.join(format!("{name}.tar.gz"));
    cmd::run(
        Command::new("tar")
            .arg("--owner=0")
            .arg("--group=0")
            .arg("--sort=name")
            .arg("-czf")
            .arg(&tarball)
            .arg("-C")
            .arg(&dist)
            .arg(&name),
    )?;
    for file in [&stage.join("tracer"), &tarball] {
        write_checksum(file)?;
    }
    eprintln!("xtask: {version}");
    eprintln!(
        "xtask: static binary {} ({} bytes), tarball {} (+ .sha256 files)",
        stage.join("tracer").display(),
        elf.len(),
        tarball.display()
    );
    if check {
        check_with(ws, &stage.join("tracer"))?;
    }
    Ok(tarball)
}

/// The static, stripped binary (built when out of date); checked to ask for
/// no dynamic loader.
pub(crate) fn build_static(ws: &Workspace, target: &Target) -> Result<PathBuf> {
    let mut cargo = Command::new("cargo");
    cargo.current_dir(&ws.root).args([
        "build",
        "--release",
        "-p",
        "tracer-user",
        "--target",
        target.triple,
    ]);
    cross_env(ws, target, &mut cargo)?;
    cargo.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    cmd::run(&mut cargo)?;
    let bin = ws.target_dir.join(target.triple).join("release/tracer");
    crate::workspace::require_file(&bin, "static tracer binary")?;
    check_static(target, &bin)?;
    Ok(bin)
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

/// Static (no PT_INTERP) and built for `target`'s machine.
fn check_static(target: &Target, bin: &Path) -> Result<()> {
    let elf = fs::read(bin).with_context(|| format!("reading {}", bin.display()))?;
    if has_interpreter(&elf)? {
        bail!(
            "{} asks for a dynamic loader: it is not a static binary",
            bin.display()
        );
    }
    let machine = elf_machine(&elf)?;
    if machine != target.machine {
        bail!(
            "{} is an ELF file for machine {machine}, not {} ({})",
            bin.display(),
            target.machine,
            target.arch
        );
    }
    Ok(())
}

/// ELF `e_machine` (checked to be a little-endian 64-bit ELF file).
fn elf_machine(elf: &[u8]) -> Result<u16> {
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" || elf[4] != 2 || elf[5] != 1 {
        bail!("not a little-endian 64-bit ELF file");
    }
    Ok(u16::from_le_bytes([elf[18], elf[19]]))
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

/// Whether a 64-bit ELF file has a PT_INTERP program header (asks for
/// ld.so): a static binary has none.
pub(crate) fn has_interpreter(elf: &[u8]) -> Result<bool> {
    const PT_INTERP: u32 = 3;
    elf_machine(elf)?;
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[32..40].try_into()?) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        let p_type = elf
            .get(at..at + 4)
            .context("program header table runs past the end of the file")?;
        if u32::from_le_bytes(p_type.try_into()?) == PT_INTERP {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `tracer --version` (under qemu's user-mode emulator for another
/// architecture), which must name the target; `--help` must run too.
fn version_of(target: &Target, bin: &Path) -> Result<String> {
    let out = cmd::output(target.runner(bin)?.arg("--version"))?;
    if !out.status.success() {
        bail!("{} --version failed: {}", bin.display(), out.status);
    }
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !version.contains(target.triple) {
        bail!("`{version}` does not name the target {}", target.triple);
    }
    let help = cmd::output(target.runner(bin)?.arg("--help"))?;
    if !help.status.success() || !String::from_utf8_lossy(&help.stdout).contains("record") {
        bail!("{} --help failed: {}", bin.display(), help.status);
    }
    Ok(version)
}

/// `FILE.sha256` in `sha256sum` format, so `sha256sum -c` verifies it.
fn write_checksum(file: &Path) -> Result<()> {
    let hash: String = Sha256::digest(fs::read(file)?)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let name = file.file_name().context("no file name")?.to_string_lossy();
    let mut sum = file.as_os_str().to_owned();
    sum.push(".sha256");
    fs::write(&sum, format!("{hash}  {name}\n"))?;
    Ok(())
}

/// The core kernel scenarios, with every test's `tracer` being the dist binary.
fn check_with(ws: &Workspace, bin: &Path) -> Result<()> {
    let tests = kernel_tests::build(ws, None)?;
    let modules: Vec<String> = CHECK_TESTS.iter().map(|m| m.to_string()).collect();
    let names = kernel_tests::select(&tests, None, &modules)?;
    cmd::run(
        Command::new(&tests)
            .current_dir(ws.root.join("tracer-user"))
            .arg("--exact")
            .args(&names)
            .env("TRACER_BIN", bin),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_has_an_interpreter() {
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(has_interpreter(&me).unwrap(), "test binaries are dynamic");
        assert!(has_interpreter(b"not an elf").is_err());
        assert_eq!(elf_machine(&me).unwrap(), Target::host().unwrap().machine);
    }

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
