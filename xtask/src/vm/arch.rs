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
    /// More of the kernel's command line, for this architecture only (an
    /// unknown parameter would reach /init as an argument).
    pub cmdline: &'static str,
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
    // A 5.10 guest on a host at load 6+ (four guests and builds at once)
    // panicked at boot, "IO-APIC + timer doesn't work!": under TCG the
    // emulated timer can miss the kernel's check window. `no_timer_check`
    // skips that check, as cloud images do for their VMs.
    cmdline: " no_timer_check",
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
    cmdline: "",
    cross: Some(&target::AARCH64),
    default_kernels: &["6.1", "6.12"],
    default_timeout: 5400,
};

/// An x86-64 guest under TCG runs its vCPUs in turn on one host thread.
/// With one thread per vCPU (QEMU's default, MTTCG), a 6.12 guest died in
/// CI's run inside the `fallback` suite, which attaches and detaches the
/// syscall hooks many times: a fatal exception with RIP one byte into the
/// 2-byte NOP of the `sys_enter` tracepoint's static key in
/// `syscall_trace_enter` (the image holds `66 90` there), that is an int3
/// executed after the kernel's text_poke_bp had put the NOP back and
/// synchronised every CPU, which a real CPU cannot do: a stale translation
/// of the patched code on the other vCPU. Once in three 6.1 runs before, a
/// 730 s soft lockup after the same suite. With vCPUs taking turns, no
/// vCPU runs a translation while another rewrites its code; on an idle
/// machine the CI guest took 532 s so, 602 s with a thread per vCPU
/// (docs/kernels.md, "Cross-modifying code under TCG"). KVM (real CPUs) is
/// untouched.
const TCG_ONE_THREAD: &str = "tcg,thread=single";

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
                let (accel, cpu) = match accel {
                    "kvm" => ("kvm", "host"),
                    _ => (TCG_ONE_THREAD, "max"),
                };
                qemu.args(["-accel", accel, "-cpu", cpu]);
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
