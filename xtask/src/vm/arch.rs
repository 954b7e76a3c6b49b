//! The architectures `cargo xtask vm-test --arch` boots: what differs
//! between an x86-64 VM (this machine's kind, KVM when it has it) and an
//! arm64 one (always TCG here: Debian's arm64 kernels under
//! `qemu-system-aarch64 -M virt`, a static aarch64 userland).
use std::{path::Path, process::Command};

use crate::target::{self, Target};

pub(crate) struct VmArch {
    /// As `--arch` takes it.
    pub name: &'static str,
    /// Debian's name: `linux-image-<debian>`, `APT::Architecture`.
    pub debian: &'static str,
    /// (qemu program, Debian package).
    pub qemu: (&'static str, &'static str),
    /// The kernel's serial console.
    pub console: &'static str,
    /// Cross-built static userland (tracer, tests, busybox from Debian), or
    /// `None`: this machine's own build and busybox.
    pub cross: Option<&'static Target>,
    pub default_kernels: &'static [&'static str],
    /// Default seconds per kernel before the VM is killed.
    pub default_timeout: u64,
}

pub(crate) const X86_64: VmArch = VmArch {
    name: "x86_64",
    debian: "amd64",
    qemu: ("qemu-system-x86_64", "qemu-system-x86"),
    console: "ttyS0",
    cross: None,
    default_kernels: &["5.10", "6.1", "6.12"],
    default_timeout: 1800,
};

/// `-cpu max,pauth-impdef=on`: the pointer-authentication algorithm QEMU
/// emulates by default (QARMA) costs every kernel function entry and return
/// a long computation under TCG; the implementation-defined one is cheap.
pub(crate) const ARM64: VmArch = VmArch {
    name: "arm64",
    debian: "arm64",
    qemu: ("qemu-system-aarch64", "qemu-system-arm"),
    console: "ttyAMA0",
    cross: Some(&target::AARCH64),
    default_kernels: &["6.1", "6.12"],
    default_timeout: 5400,
};

impl VmArch {
    pub(crate) fn named(name: &str) -> anyhow::Result<&'static VmArch> {
        match name {
            "x86_64" | "amd64" | "x86-64" => Ok(&X86_64),
            "arm64" | "aarch64" => Ok(&ARM64),
            other => anyhow::bail!("unknown --arch {other}: use x86_64 or arm64"),
        }
    }

    /// Where this architecture's kernels, apt state, initramfs and logs
    /// live: `target/vm` for x86-64 (as before arm64 existed), `target/vm/arm64`.
    pub(crate) fn dir(&self, vm: &Path) -> std::path::PathBuf {
        match self.cross {
            None => vm.to_path_buf(),
            Some(_) => vm.join(self.name),
        }
    }

    /// The qemu command line before `-kernel`: machine, CPU, accelerator.
    pub(crate) fn machine(&self, qemu: &mut Command, accel: &str) {
        match self.cross {
            None => {
                qemu.args(["-accel", accel, "-cpu"]);
                qemu.arg(if accel == "kvm" { "host" } else { "max" });
            }
            Some(_) => {
                qemu.args(["-M", "virt", "-accel", "tcg", "-cpu", "max,pauth-impdef=on"]);
            }
        }
    }

    /// The accelerator: KVM only for this machine's own architecture.
    pub(crate) fn accel(&self) -> &'static str {
        match self.cross {
            None => host_accel(),
            Some(_) => "tcg",
        }
    }
}

/// KVM when this machine's CPU has it (vmx/svm) and /dev/kvm exists, else TCG.
fn host_accel() -> &'static str {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let hw = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    if hw && Path::new("/dev/kvm").exists() {
        "kvm"
    } else {
        "tcg"
    }
}
