//! `cargo xtask`: the project's build and test entry point.
//!
//! Everything a fresh machine needs (rust-src, bpf-linker, the eBPF object)
//! is set up here, idempotently, so `cargo xtask run` and `cargo xtask test`
//! are the only commands anyone has to know. See docs/building.md.

mod bench;
mod bootstrap;
mod build;
mod cmd;
mod dist;
mod ebpf;
mod kernel_tests;
mod privilege;
mod run;
mod runner_versions;
mod screenshot;
mod target;
mod test;
mod test_deps;
mod vm;
mod workspace;

use std::{ffi::OsString, process::ExitCode, time::Duration};

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "xtask",
    bin_name = "cargo xtask",
    about = "Build, run and test tracer"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make sure rust-src and bpf-linker 0.10.4 are installed (no-op when present).
    Bootstrap,
    /// Build the eBPF object (release unless --debug).
    BuildEbpf {
        /// Build the eBPF object with the dev profile.
        #[arg(long)]
        debug: bool,
    },
    /// Build the eBPF object and the `tracer` binary (dev profile unless --release).
    Build {
        /// Build `tracer` with the release profile.
        #[arg(long)]
        release: bool,
    },
    /// Build, then run `tracer` with the given arguments (through `sudo -E` when not root).
    Run {
        /// Use the release `tracer` (`cargo xtask build --release`).
        #[arg(long)]
        release: bool,
        /// Arguments for `tracer`, after `--`: `cargo xtask run -- record -- <cmd>`.
        #[arg(last = true)]
        args: Vec<OsString>,
    },
    /// Measure tracer's overhead against the bare workloads (root; ~10 min). See BENCHMARKS.md.
    Bench {
        /// Repetitions per configuration (medians; bpftrace/strace use at most 3).
        #[arg(long, default_value_t = 5)]
        reps: usize,
        /// Quarter-size workloads and 2 repetitions: checks the bench itself.
        #[arg(long)]
        quick: bool,
        /// Skip the bpftrace and `strace -f` reference points.
        #[arg(long)]
        no_reference: bool,
        /// Only the daemon soak: a busy job under `tracer daemon` with metrics
        /// on, CPU per 1,000 events and RSS sampled over time.
        #[arg(long)]
        soak: bool,
        /// How long the soak's job runs.
        #[arg(long, default_value_t = 300, value_name = "SECONDS")]
        soak_secs: u64,
        /// The soak's job in its own memory cgroup, watched with `daemon --cgroup` (the
        /// resources sampler on), churning memory too.
        #[arg(long, requires = "soak")]
        soak_cgroup: bool,
        /// Only this section of the bench (repeatable; the start-up always runs): e.g.
        /// `--only suites` for the real runners' rows alone.
        #[arg(long, value_enum, value_name = "SECTION", conflicts_with = "soak")]
        only: Vec<bench::Section>,
        /// Only the guest bench: the workloads in a Debian guest of `vm-test` (5.10, 6.1,
        /// 6.12), bare vs tracer as it attaches there (fentry) vs the raw_syscalls rung, and
        /// the programs' ns per run (TCG: ratios only); repeatable.
        #[arg(long = "vm", value_name = "KERNEL", conflicts_with_all = ["soak", "only"])]
        vm: Vec<String>,
    },
    /// A static, stripped `tracer` with its SHA-256 and a tarball (target/dist/).
    Dist {
        /// x86_64-unknown-linux-musl or aarch64-unknown-linux-musl (default: this machine's).
        #[arg(long)]
        target: Option<String>,
        /// Then run the core kernel scenarios of the integration suite with that binary (root).
        #[arg(long)]
        check: bool,
    },
    /// Build the eBPF object, then run unit and kernel integration tests as root, then every VM
    /// suite in one Debian 6.12 guest with cgroup v2 only (not with `-- ARGS`: docs/kernels.md).
    Test {
        /// Test the release profile (`cargo test --release`).
        #[arg(long)]
        release: bool,
        /// Skip the 6.12 guest (local quick runs only: CI runs it).
        #[arg(long)]
        no_vm: bool,
        /// Extra arguments for `cargo test`, after `--`.
        #[arg(last = true)]
        args: Vec<OsString>,
    },
    /// Check the runner suites' pins against npm and PyPI: every major of vitest, jest, mocha,
    /// Playwright, Node, pytest and pytest-xdist still in use pinned at its newest release
    /// (needs the registries; not part of `test`).
    RunnerVersions,
    /// Regenerate docs/images/report.png: report.html of a fixture log in headless Chromium
    /// (installed from Debian when missing).
    Screenshot,
    /// Run the kernel tests in qemu VMs on other kernels, and on the host (docs/kernels.md).
    VmTest {
        /// Architecture of the VMs: x86_64 (this machine's; KVM when it has it) or arm64
        /// (Debian's arm64 kernels under qemu-system-aarch64, TCG; a cross-built userland).
        #[arg(long, default_value = "x86_64")]
        arch: String,
        /// Kernel to boot: 5.10, 6.1, 6.12 (Debian packages; arm64: 6.1, 6.12) or an image path; repeatable.
        #[arg(long = "kernel", value_name = "VERSION")]
        kernels: Vec<String>,
        /// Module of the kernel test binary to run, every test under it but the host-only ones
        /// (default: capture oom fallback errors leaks last_words pidns debug_ebpf compat
        /// crash_stacks resources; crash_stacks on x86-64 only; xtask/src/vm/suites.rs); repeatable.
        #[arg(long = "test", value_name = "MODULE")]
        tests: Vec<String>,
        /// Skip the host column.
        #[arg(long)]
        no_host: bool,
        /// Seconds per kernel before the VM is killed (default 1800; arm64 5400).
        #[arg(long)]
        timeout: Option<u64>,
        /// VM memory in MiB.
        #[arg(long, default_value_t = 2048)]
        memory: u32,
        /// VM CPUs.
        #[arg(long, default_value_t = 2)]
        cpus: u32,
        /// Debian mirror URI (default: the one in this machine's apt sources).
        #[arg(long)]
        mirror: Option<String>,
        /// Only re-render the table from the logs of the last run (target/vm/*.log).
        #[arg(long)]
        report_only: bool,
        /// Also check the static release binary (`cargo xtask dist`) in a chroot without libc.
        #[arg(long)]
        dist: bool,
        /// Boot with the memory controller on cgroup v2 only (cgroup_no_v1=all), as GitHub's
        /// runners; columns are labelled <kernel>-cgroup2.
        #[arg(long)]
        cgroup_v2: bool,
        /// Only the CI guest `cargo xtask test` boots (every VM suite on 6.12 with cgroup v2
        /// only; target/vm/ci/), without the tests before it.
        #[arg(long, conflicts_with_all = ["arch", "kernels", "tests", "report_only", "dist", "cgroup_v2", "mirror"])]
        ci: bool,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("xtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    let ws = workspace::Workspace::locate()?;
    match cli.command {
        Command::Bootstrap => bootstrap::run(&ws).map(drop),
        Command::BuildEbpf { debug } => ebpf::build(&ws, !debug).map(drop),
        Command::Build { release } => build::run(&ws, release).map(drop),
        Command::Run { release, args } => run::run(&ws, release, &args),
        Command::Test {
            release,
            no_vm,
            args,
        } => test::run(&ws, release, !no_vm, &args),
        Command::RunnerVersions => runner_versions::run(&ws),
        Command::Screenshot => screenshot::run(&ws),
        Command::Dist { target, check } => {
            let target = match target {
                Some(name) => target::Target::named(&name)?,
                None => target::Target::host()?,
            };
            dist::run(&ws, target, check).map(drop)
        }
        Command::Bench {
            reps,
            quick,
            no_reference,
            soak,
            soak_secs,
            soak_cgroup,
            only,
            vm,
        } => bench::run(
            &ws,
            &bench::BenchOpts {
                reps,
                quick,
                no_reference,
                soak: soak.then_some(bench::soak::SoakOpts {
                    secs: soak_secs,
                    period: if soak_secs >= 60 { 10 } else { 2 },
                    cgroup: soak_cgroup,
                }),
                only,
                vm,
            },
        ),
        Command::VmTest { ci: true, .. } => vm::ci_guest(&ws),
        Command::VmTest {
            arch,
            kernels,
            tests,
            no_host,
            timeout,
            memory,
            cpus,
            mirror,
            report_only,
            dist,
            cgroup_v2,
            ci: false,
        } => {
            let or = |v: Vec<String>, d: &[&str]| {
                if v.is_empty() {
                    d.iter().map(|s| s.to_string()).collect()
                } else {
                    v
                }
            };
            let arch = vm::arch::VmArch::named(&arch)?;
            vm::run(
                &ws,
                vm::Options {
                    arch,
                    kernels: or(kernels, arch.default_kernels),
                    tests: or(tests, vm::CORE_TESTS),
                    no_host,
                    timeout: Duration::from_secs(timeout.unwrap_or(arch.default_timeout)),
                    memory_mb: memory,
                    cpus,
                    mirror,
                    report_only,
                    dist,
                    cgroup_v2,
                    out: None,
                },
            )
        }
    }
}
