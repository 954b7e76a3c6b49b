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

use crate::{
    cmd, kernel_tests,
    target::{self, Target},
    workspace::Workspace,
};

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
    target::cross_env(ws, target, &mut cargo)?;
    cargo.env("CARGO_PROFILE_RELEASE_STRIP", "symbols");
    cmd::run(&mut cargo)?;
    let bin = ws.target_dir.join(target.triple).join("release/tracer");
    crate::workspace::require_file(&bin, "static tracer binary")?;
    check_static(target, &bin)?;
    Ok(bin)
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
}
