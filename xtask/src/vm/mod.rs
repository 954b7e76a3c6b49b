//! `cargo xtask vm-test`: the same tracer binary and kernel tests on several
//! kernels, each booted with qemu from a minimal initramfs, plus the host.
//! See docs/kernels.md. One idea per file: the architectures (`arch.rs`),
//! Debian's kernels and busybox (`kernel.rs`), the initramfs (`initramfs.rs`),
//! booting and reading a run (`qemu.rs`), the results table (`report.rs`), a
//! guest running one script instead of the suite (`guest.rs`: the guest bench).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

pub(crate) mod arch;
mod crashers;
pub(crate) mod guest;
mod initramfs;
mod kernel;
mod qemu;
mod report;
pub(crate) mod suites;

use arch::VmArch;
use initramfs::Initramfs;
use kernel::{Kernel, Mirror};
use qemu::{Run, Vm};
pub(crate) use suites::CORE_TESTS;

use crate::{
    bootstrap, build, cmd, dist, kernel_tests, privilege,
    target::{self, Target, NO_DEBUG_INFO},
    workspace::Workspace,
};

pub(crate) struct Options {
    /// Which VMs: x86-64 (this machine's kind) or arm64 (cross-built, TCG).
    pub arch: &'static VmArch,
    pub kernels: Vec<String>,
    pub tests: Vec<String>,
    pub no_host: bool,
    pub timeout: Duration,
    pub memory_mb: u32,
    pub cpus: u32,
    pub mirror: Option<String>,
    /// Re-render the table from the logs of the last run; build and boot nothing.
    pub report_only: bool,
    /// Also run the static release binary (`cargo xtask dist`) alone in a
    /// chroot without libc: the "static" column.
    pub dist: bool,
    /// Boot with `cgroup_no_v1=all`: the memory controller on cgroup v2
    /// only, as on GitHub's runners and Kubernetes 1.25+ nodes. Each column
    /// is then labelled `<kernel>-cgroup2`.
    pub cgroup_v2: bool,
    /// A folder under the VM directory for this run's initramfs, logs and
    /// results (`cargo xtask test`'s guest: `ci`, apart from the matrix's);
    /// the kernels and apt state stay shared.
    pub out: Option<&'static str>,
}

/// A kernel's column (and console log) label.
fn label(version: &str, opts: &Options) -> String {
    match opts.cgroup_v2 {
        true => format!("{version}-cgroup2"),
        false => version.to_string(),
    }
}

pub(crate) fn run(ws: &Workspace, opts: Options) -> Result<()> {
    suites::refuse_host_only(&opts.tests)?;
    let started = Instant::now();
    let arch = opts.arch;
    let vm_dir = arch.dir(&ws.target_dir.join("vm"));
    let out = opts.out.map_or_else(|| vm_dir.clone(), |d| vm_dir.join(d));
    fs::create_dir_all(&out)?;
    if opts.report_only {
        return report_from_logs(&out, &opts);
    }
    let (mirror, (busybox, busybox_runner)) = guest_tools(arch, &vm_dir, opts.mirror.as_ref())?;

    let tracer = match arch.cross {
        None => build::run(ws, false)?,
        Some(target) => cross_tracer(ws, target)?,
    };
    let mut wanted = opts.tests.clone();
    for (module, why) in suites::X86_64_ONLY {
        if !suites::runs_on(module, arch) && wanted.iter().any(|t| t == module) {
            eprintln!(
                "xtask: no {module} on {}: x86-64 VMs only ({why})",
                arch.name
            );
            wanted.retain(|t| t != module);
        }
    }
    let crashers = match wanted.iter().any(|t| t == "crash_stacks") {
        true => crashers::build(ws, &out.join("stage").join(crashers::IN_VM))?,
        false => Vec::new(),
    };
    let skips = suites::skip_args(&wanted);
    let mut tests = test_binaries(ws, &wanted, &skips, arch.cross)?;
    if opts.dist {
        let target = arch.cross.unwrap_or(&target::X86_64);
        tests.push(("static".into(), dist::build_static(ws, target)?));
    }

    let mut kernels = Vec::new();
    for version in &opts.kernels {
        let k = kernel::get(&vm_dir, version, mirror.as_ref(), arch.debian)?;
        check_config(&k, arch);
        kernels.push(k);
    }

    let initrd = out.join("initramfs.cpio");
    let mut args = vec![tracer.to_string_lossy().into_owned()];
    args.extend(skips);
    args.extend(tests.iter().map(|(n, p)| format!("{n}={}", p.display())));
    let strip = arch.cross.map_or("strip", |t| t.strip);
    let size = initramfs(
        ws,
        &out,
        (&busybox, busybox_runner),
        &tracer,
        (&tests, &crashers),
        &args,
        strip,
    )?
    .write(&initrd)?;
    eprintln!("xtask: initramfs {} ({} MiB)", initrd.display(), size >> 20);

    let mut runs: Vec<(String, Run)> = Vec::new();
    if !opts.no_host && arch.cross.is_some() {
        eprintln!(
            "xtask: no host column: this machine is {}, the VMs {}",
            std::env::consts::ARCH,
            arch.name
        );
    } else if !opts.no_host {
        if privilege::is_root()? {
            eprintln!("xtask: host kernel");
            let log = out.join("host.log");
            let suite = ws.root.join("vm/suite.sh");
            runs.push((
                "host".into(),
                qemu::host(&suite, &args, &log, opts.timeout)?,
            ));
        } else {
            eprintln!("xtask: not root: no host column (run as root for it)");
        }
    }
    for k in &kernels {
        eprintln!("xtask: kernel {} ({})", k.label, k.origin);
        let label = label(&k.label, &opts);
        let vm = Vm {
            arch,
            cgroup_v2: opts.cgroup_v2,
            vmlinuz: &k.vmlinuz,
            initrd: &initrd,
            memory_mb: opts.memory_mb,
            cpus: opts.cpus,
            timeout: opts.timeout,
        };
        let log = console_log(&out, &label);
        let run = qemu::boot(&vm, &log)?;
        eprintln!("  console: {}", log.display());
        runs.push((label, run));
    }

    let names: Vec<String> = tests.iter().map(|(n, _)| n.clone()).collect();
    finish(&out, &runs, &names, started.elapsed())
}

/// qemu (installed when missing), the Debian mirror (`mirror` or this
/// machine's), and busybox with a command that runs it here: this machine's,
/// or Debian's static one for the VM's architecture (listed under qemu's
/// user-mode emulator).
fn guest_tools(
    arch: &VmArch,
    vm_dir: &Path,
    mirror: Option<&String>,
) -> Result<(Option<Mirror>, (PathBuf, Command))> {
    let qemu = tool(arch.qemu.0, arch.qemu.1)?;
    eprintln!("xtask: qemu {}, accel {}", qemu.display(), arch.accel());
    let mirror = match mirror {
        Some(uri) => Some(Mirror {
            uri: uri.clone(),
            signed_by: None,
        }),
        None => kernel::host_mirror()
            .map_err(|e| eprintln!("xtask: {e:#}"))
            .ok(),
    };
    let busybox = match arch.cross {
        None => {
            let b = tool("busybox", "busybox-static")?;
            (b.clone(), Command::new(b))
        }
        Some(target) => {
            let b = kernel::busybox(vm_dir, "bookworm", mirror.as_ref(), arch.debian)?;
            let runner = target.runner(&b)?;
            (b, runner)
        }
    };
    Ok((mirror, busybox))
}

/// The CI guest's seconds before it is killed: its suites took 6 to 7
/// minutes of a quiet 2-core machine under TCG (6.12: 270-308 s for nine
/// suites, 84 s for crash_stacks) and about 4 times that with the machine
/// at load 16 (docs/building.md); a hang still ends inside CI's 90 minutes.
const CI_TIMEOUT: u64 = 2700;

/// The kernel `cargo xtask test` boots: Debian's 6.12 with the memory
/// controller on cgroup v2 only, where fentry attaches and
/// `memory.oom.group` works, so no VM suite skips a test there.
pub(crate) const CI_KERNEL: &str = "6.12";

/// `cargo xtask test`'s guest (CI runs it through `.ci/run`): every VM suite
/// on [`CI_KERNEL`] with cgroup v2 only, x86-64, no host column (the host
/// ran every kernel test already); kernel and apt state cached under
/// `target/vm`, its initramfs, console log and table under `target/vm/ci`.
/// Fails when a suite fails or selects no test.
pub(crate) fn ci_guest(ws: &Workspace) -> Result<()> {
    let arch = &arch::X86_64;
    run(
        ws,
        Options {
            arch,
            kernels: vec![CI_KERNEL.to_string()],
            tests: CORE_TESTS.iter().map(|s| s.to_string()).collect(),
            no_host: true,
            timeout: Duration::from_secs(CI_TIMEOUT),
            memory_mb: 2048,
            cpus: 2,
            mirror: None,
            report_only: false,
            dist: false,
            cgroup_v2: true,
            out: Some("ci"),
        },
    )
}

fn console_log(vm_dir: &Path, label: &str) -> PathBuf {
    vm_dir.join(format!("console-{}.log", label.replace('/', "_")))
}

fn report_from_logs(vm_dir: &Path, opts: &Options) -> Result<()> {
    let mut runs = Vec::new();
    let mut secs = 0;
    if !opts.no_host && opts.arch.cross.is_none() {
        runs.push((
            "host".to_string(),
            qemu::from_log(&vm_dir.join("host.log"))?,
        ));
    }
    for version in &opts.kernels {
        let label = label(version, opts);
        let run = qemu::from_log(&console_log(vm_dir, &label))?;
        runs.push((label, run));
    }
    for (_, r) in &runs {
        secs += r.secs;
    }
    finish(vm_dir, &runs, &opts.tests, Duration::from_secs(secs))
}

fn finish(
    vm_dir: &Path,
    runs: &[(String, Run)],
    tests: &[String],
    elapsed: Duration,
) -> Result<()> {
    let names: Vec<String> = std::iter::once("selftest".to_string())
        .chain(tests.iter().cloned())
        .collect();
    let report = report::render(runs, &names, elapsed);
    println!("{report}");
    fs::write(vm_dir.join("results.md"), &report)?;
    eprintln!("xtask: results in {}", vm_dir.join("results.md").display());
    let failed = runs.iter().any(|(_, r)| {
        !r.done || r.timed_out || names.iter().any(|n| !r.result(n).is_some_and(|x| x.1))
    });
    if failed {
        bail!(
            "vm-test: failures (see the table above and {}/*.log)",
            vm_dir.display()
        );
    }
    Ok(())
}

/// The tool on PATH, installed with apt when missing (root only).
fn tool(name: &str, package: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(found) = bootstrap::which(name, &path) {
        return Ok(found);
    }
    if !privilege::is_root()? {
        bail!("{name} not found: install {package} (apt-get install {package}) or run as root");
    }
    cmd::run(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", package]))?;
    bootstrap::which(name, &path)
        .with_context(|| format!("{name} still missing after installing {package}"))
}

/// The debug `tracer` for another architecture: static (musl), the release
/// eBPF object embedded, at the path the cross-built tests name
/// (`target/<triple>/debug/tracer`).
fn cross_tracer(ws: &Workspace, target: &Target) -> Result<PathBuf> {
    let mut cargo = Command::new("cargo");
    cargo
        .current_dir(&ws.root)
        .args(["build", "-p", "tracer-user", "--target", target.triple]);
    target::cross_env(ws, target, &mut cargo)?;
    cmd::run(cargo.env("CARGO_PROFILE_DEV_DEBUG", NO_DEBUG_INFO))?;
    let bin = ws.target_dir.join(target.triple).join("debug/tracer");
    crate::workspace::require_file(&bin, "cross-built tracer")?;
    Ok(bin)
}

/// The kernel test binary (for `cross`'s target when given: static, as the
/// VM has no libc), once for each module `wanted` (`suite.sh` runs each
/// module apart: a row of the table). Checks with `suite.sh`'s own
/// selection that each module runs a test: a misspelt or emptied module
/// must not pass by running nothing.
fn test_binaries(
    ws: &Workspace,
    wanted: &[String],
    skips: &[String],
    cross: Option<&Target>,
) -> Result<Vec<(String, PathBuf)>> {
    let bin = kernel_tests::build(ws, cross)?;
    let list = kernel_tests::list(&bin, cross)?;
    for module in wanted {
        let picked = suites::select(&ws.root.join("vm/suite.sh"), &list, module, skips)?;
        if picked.is_empty() {
            bail!(
                "vm/suite.sh selects no test of `{module}` in {}",
                bin.display()
            );
        }
    }
    Ok(wanted.iter().map(|m| (m.clone(), bin.clone())).collect())
}

/// `busybox`: its path and a command that runs it here (to list its applets).
fn initramfs(
    ws: &Workspace,
    vm_dir: &Path,
    busybox: (&Path, Command),
    tracer: &Path,
    (tests, crashers): (&[(String, PathBuf)], &[PathBuf]),
    args: &[String],
    strip: &str,
) -> Result<Initramfs> {
    let stage = vm_dir.join("stage");
    let mut img = Initramfs::base(busybox.0, busybox.1)?;
    for (name, bin) in tests.iter().filter(|(n, _)| n == "static") {
        // Static: no loader, no libraries, at its host path like the rest.
        let data = fs::read(bin).with_context(|| format!("reading {name} {}", bin.display()))?;
        img.data(bin.to_string_lossy().trim_start_matches('/'), data, 0o755);
    }
    // The kernel test binary is named once per module it runs: copied once.
    let mut dynamic: Vec<&Path> = vec![tracer];
    for (_, bin) in tests.iter().filter(|(n, _)| n != "static") {
        if !dynamic.contains(&bin.as_path()) {
            dynamic.push(bin);
        }
    }
    for bin in dynamic {
        img.elf_from(bin, &initramfs::stripped(bin, &stage, strip)?)?;
    }
    // Unstripped: their symbols and line tables are what the tests check.
    for bin in crashers {
        let name = bin.file_name().context("a crasher without a name")?;
        let at = Path::new(crashers::IN_VM).join(name);
        img.elf_from(&at, bin)?;
    }
    // The fixture logs some kernel tests hand to `tracer report` (errors'
    // usage errors), at their host path as the tests name it
    // (CARGO_MANIFEST_DIR): 46 files, 424 KiB.
    let fixtures = ws.root.join("tracer-user/tests/fixtures");
    for entry in
        fs::read_dir(&fixtures).with_context(|| format!("reading {}", fixtures.display()))?
    {
        let path = entry?.path();
        if path.is_file() {
            let data = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            img.data(path.to_string_lossy().trim_start_matches('/'), data, 0o644);
        }
    }
    let read = |f: &str| {
        let p = ws.root.join("vm").join(f);
        fs::read(&p).with_context(|| format!("reading {}", p.display()))
    };
    img.data("init", read("init.sh")?, 0o755);
    img.data("vm/suite.sh", read("suite.sh")?, 0o755);
    img.data("vm/args", args.join("\n") + "\n", 0o644);
    Ok(img)
}

/// Warn about config options the tracer or the VM boot needs.
fn check_config(k: &Kernel, arch: &VmArch) {
    if k.config.is_none() {
        return;
    }
    let console = match arch.cross {
        None => "CONFIG_SERIAL_8250_CONSOLE",
        Some(_) => "CONFIG_SERIAL_AMBA_PL011_CONSOLE", // -M virt's UART
    };
    let need = [
        ("CONFIG_DEBUG_INFO_BTF", "BTF: tp_btf programs and offsets"),
        ("CONFIG_BPF_SYSCALL", "eBPF"),
        ("CONFIG_BPF_EVENTS", "tracepoint programs"),
        (console, "the serial console"),
        ("CONFIG_DEVTMPFS", "/dev"),
        ("CONFIG_MEMCG", "the memcg OOM test"),
    ];
    for (name, why) in need {
        let value = k.config_value(name).unwrap_or_else(|| "absent".into());
        if value != "y" {
            eprintln!("xtask: warning: kernel {}: {name}={value} ({why})", k.label);
        }
    }
    if k.config_value("CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS")
        .as_deref()
        != Some("y")
    {
        eprintln!(
            "xtask: kernel {}: no DYNAMIC_FTRACE_WITH_DIRECT_CALLS: fentry cannot attach, \
             expect the raw_syscalls rungs",
            k.label
        );
    }
    if k.config_value("CONFIG_MEMCG_V1").as_deref() == Some("n") {
        eprintln!(
            "xtask: kernel {}: no cgroup v1 memcg (CONFIG_MEMCG_V1 is not set): cgroup2 memory",
            k.label
        );
    }
}
