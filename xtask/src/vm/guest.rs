//! A guest that runs one script of `vm/` instead of the suite: the guest
//! bench (`cargo xtask bench --vm KERNEL`). The same kernels, busybox, /init
//! and qemu command line as `vm-test`; an initramfs with the given programs
//! (at their host paths, with their shared libraries) and data files.
use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{Context, Result};

use super::{
    arch, check_config, console_log, guest_tools, initramfs::Initramfs, kernel, qemu, qemu::Vm,
};
use crate::workspace::Workspace;

pub(crate) struct Script<'a> {
    /// The x86-64 Debian kernel to boot (`vm-test`'s names: 5.10, 6.1, 6.12).
    pub kernel: &'a str,
    /// The file of `vm/` /init runs (as `vm/<name>`) with `args`.
    pub script: &'a str,
    pub args: Vec<String>,
    /// Programs, copied at their host paths with their libraries.
    pub programs: Vec<PathBuf>,
    /// (path in the guest, content) of more files.
    pub data: Vec<(String, String)>,
    pub timeout: Duration,
}

/// Boot `s.kernel` on x86-64 with `s`'s initramfs (2 CPUs, 2 GiB, cgroup as
/// `vm-test` mounts it): the console log's lines, once the guest is off.
pub(crate) fn run(ws: &Workspace, s: &Script) -> Result<Vec<String>> {
    let arch = &arch::X86_64;
    let vm_dir = arch.dir(&ws.target_dir.join("vm"));
    let out = vm_dir.join(s.script.trim_end_matches(".sh"));
    fs::create_dir_all(&out)?;
    let (mirror, (busybox, runner)) = guest_tools(arch, &vm_dir, None)?;
    let k = kernel::get(&vm_dir, s.kernel, mirror.as_ref(), arch.debian)?;
    check_config(&k, arch);

    let mut img = Initramfs::base(&busybox, runner)?;
    for p in &s.programs {
        img.elf_from(p, p)?;
    }
    for (at, text) in &s.data {
        img.data(at, text.as_bytes(), 0o644);
    }
    let read = |f: &str| {
        let p = ws.root.join("vm").join(f);
        fs::read(&p).with_context(|| format!("reading {}", p.display()))
    };
    img.data("init", read("init.sh")?, 0o755);
    img.data(&format!("vm/{}", s.script), read(s.script)?, 0o755);
    img.data("vm/args", s.args.join("\n") + "\n", 0o644);
    let initrd = out.join("initramfs.cpio");
    let size = img.write(&initrd)?;
    eprintln!("xtask: initramfs {} ({} MiB)", initrd.display(), size >> 20);

    let log = console_log(&out, &k.label);
    let vm = Vm {
        arch,
        cgroup_v2: false,
        vmlinuz: &k.vmlinuz,
        initrd: &initrd,
        memory_mb: 2048,
        cpus: 2,
        timeout: s.timeout,
    };
    eprintln!(
        "xtask: kernel {} ({}), console: {}",
        k.label,
        k.origin,
        log.display()
    );
    let booted = qemu::boot(&vm, &log)?;
    if booted.timed_out {
        eprintln!(
            "xtask: the guest ran out of its {} s: its lines so far",
            s.timeout.as_secs()
        );
    }
    lines(&log)
}

fn lines(log: &Path) -> Result<Vec<String>> {
    let text = fs::read(log).with_context(|| format!("reading {}", log.display()))?;
    Ok(String::from_utf8_lossy(&text)
        .lines()
        .map(|l| l.trim_end_matches('\r').to_string())
        .collect())
}
