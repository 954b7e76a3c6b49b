//! What the bench runs: the workloads, their C driver, and the tools they run under.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result};

use crate::cmd;

const DRIVER_SRC: &str = include_str!("driver.c");

/// One workload: a program (the driver unless named) and its arguments,
/// sized to run 2–3 s bare on our 2-core machine.
pub(crate) struct Workload {
    pub name: &'static str,
    pub what: String,
    pub program: Option<PathBuf>,
    pub args: Vec<String>,
}

pub(crate) fn workloads(scale: f64) -> Vec<Workload> {
    let n = |x: f64| ((x * scale) as u64).max(10).to_string();
    vec![
        Workload {
            name: "fork storm",
            what: format!("{} × fork+exec /bin/true, 2 workers", n(1500.0)),
            program: None,
            args: vec!["fork".into(), n(1500.0), "2".into()],
        },
        Workload {
            name: "signal storm",
            what: format!("{} signals ping-ponged parent<->child", n(200_000.0)),
            program: None,
            args: vec!["signal".into(), n(200_000.0)],
        },
        Workload {
            name: "self-signal storm",
            what: format!("{} signals a process sends itself, caught", n(400_000.0)),
            program: None,
            args: vec!["selfsig".into(), n(400_000.0)],
        },
        Workload {
            name: "long argv",
            what: format!("{} × exec /bin/true with 64 args of 1 KiB", n(1000.0)),
            program: None,
            args: vec!["argv".into(), n(1000.0), "64".into(), "1024".into()],
        },
        Workload {
            name: "stderr-heavy",
            what: format!("{} processes × 2000 writes of 100 B to fd 2", n(1000.0)),
            program: None,
            args: vec!["stderr".into(), n(1000.0), "2000".into(), "100".into()],
        },
    ]
}

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Tool {
    Bare,
    Tracer,
    Bpftrace,
    Strace,
    /// The release a CI job downloads (`cargo xtask dist`: static, musl),
    /// run like `Tracer`, the glibc build.
    TracerStatic,
    /// `tracer record --tests`: the test integrations handed to the
    /// command (the suite rows).
    TracerTests,
}

impl Tool {
    /// How many tools there are: the size of arrays indexed by `Tool as usize`.
    pub(crate) const COUNT: usize = 6;

    pub(crate) fn label(self) -> &'static str {
        match self {
            Tool::Bare => "bare",
            Tool::Tracer => "tracer",
            Tool::Bpftrace => "bpftrace",
            Tool::Strace => "strace -f",
            Tool::TracerStatic => "tracer (static release)",
            Tool::TracerTests => "tracer --tests",
        }
    }
}

/// bpftrace with the tracepoints tracer uses, scoped to the command's tree
/// like tracer is, printing one line per event (tracer writes one per event).
const BPFTRACE_SCRIPT: &str = r#"
BEGIN { @t[cpid] = 1; }
tracepoint:sched:sched_process_fork /@t[pid]/ { @t[args->child_pid] = 1; printf("fork %d %d\n", pid, args->child_pid); }
tracepoint:sched:sched_process_exec /@t[pid]/ { printf("exec %d %s\n", pid, str(args->filename)); }
tracepoint:sched:sched_process_exit /@t[pid]/ { printf("exit %d %d\n", pid, tid); if (pid == tid) { delete(@t[pid]); } }
tracepoint:signal:signal_generate /@t[pid] || @t[args->pid]/ { printf("signal %d %d %d %d\n", pid, args->pid, args->sig, args->result); }
tracepoint:syscalls:sys_exit_kill, tracepoint:syscalls:sys_exit_tkill, tracepoint:syscalls:sys_exit_tgkill /@t[pid]/ { printf("kill %d %d\n", pid, args->ret); }
tracepoint:syscalls:sys_enter_write /@t[pid] && args->fd == 2/ { @stderr_bytes[pid] = sum(args->count); }
END { clear(@t); clear(@stderr_bytes); }
"#;

pub(crate) struct Ctx {
    pub tracer: PathBuf,
    /// `cargo xtask dist`'s static binary, timed beside `tracer`.
    pub tracer_static: PathBuf,
    pub driver: PathBuf,
    pub scratch: PathBuf,
    pub bpftrace: Option<PathBuf>,
    pub strace: Option<PathBuf>,
    pub out: String,
}

impl Ctx {
    /// Print a line and keep it for results.md.
    pub(crate) fn say(&mut self, line: impl AsRef<str>) {
        println!("{}", line.as_ref());
        self.out.push_str(line.as_ref());
        self.out.push('\n');
    }

    pub(crate) fn tmp(&self, name: &str) -> PathBuf {
        let dir = self.scratch.join(name);
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    /// The command for `argv` under `tool`, writing into `dir`.
    pub(crate) fn command(
        &self,
        tool: Tool,
        argv: &[String],
        dir: &Path,
        ring: Option<u32>,
    ) -> Command {
        match tool {
            Tool::Bare => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
            Tool::Tracer | Tool::TracerStatic | Tool::TracerTests => {
                let bin = match tool {
                    Tool::TracerStatic => &self.tracer_static,
                    _ => &self.tracer,
                };
                let mut c = Command::new(bin);
                c.arg("record").arg("--output").arg(dir);
                // Like for like: the bare run is root's, so is the traced one
                // (under `sudo -E`, tracer would otherwise drop to SUDO_UID).
                c.args(["--user", "root"]);
                if tool == Tool::TracerTests {
                    c.arg("--tests");
                }
                if let Some(bytes) = ring {
                    c.arg("--ring-buffer-size").arg(bytes.to_string());
                }
                c.arg("--").args(argv);
                c
            }
            Tool::Bpftrace => {
                let _ = fs::create_dir_all(dir);
                let mut c = Command::new(self.bpftrace.as_ref().expect("bpftrace"));
                c.arg("-o")
                    .arg(dir.join("bpftrace.out"))
                    .arg("-e")
                    .arg(BPFTRACE_SCRIPT)
                    .arg("-c")
                    .arg(argv.join(" "));
                c
            }
            Tool::Strace => {
                let _ = fs::create_dir_all(dir);
                let mut c = Command::new(self.strace.as_ref().expect("strace"));
                c.args(["-f", "-qq", "-o"])
                    .arg(dir.join("strace.out"))
                    .args(argv);
                c
            }
        }
    }

    /// `tracer record --program-stats` of `argv` into `dir` (root's, as
    /// the timed runs are).
    pub(crate) fn stats_command(&self, argv: &[String], dir: &Path) -> Command {
        let mut c = Command::new(&self.tracer);
        c.arg("record").arg("--output").arg(dir);
        c.args(["--user", "root", "--program-stats", "--"])
            .args(argv);
        c
    }

    pub(crate) fn driver_argv(&self, args: &[String]) -> Vec<String> {
        let mut v = vec![self.driver.to_string_lossy().into_owned()];
        v.extend(args.iter().cloned());
        v
    }

    /// The command line of a workload: its own program, or the driver.
    pub(crate) fn argv(&self, w: &Workload) -> Vec<String> {
        match &w.program {
            Some(p) => std::iter::once(p.to_string_lossy().into_owned())
                .chain(w.args.iter().cloned())
                .collect(),
            None => self.driver_argv(&w.args),
        }
    }
}

/// Compile the workload driver (C, `cc -O2`) into the scratch dir.
pub(crate) fn build_driver(scratch: &Path) -> Result<PathBuf> {
    let src = scratch.join("benchdrv.c");
    let bin = scratch.join("benchdrv");
    let fresh = fs::read_to_string(&src).ok().as_deref() == Some(DRIVER_SRC) && bin.exists();
    if !fresh {
        fs::write(&src, DRIVER_SRC)?;
        cmd::run(
            Command::new("cc")
                .args(["-O2", "-Wall", "-pthread", "-o"])
                .arg(&bin)
                .arg(&src),
        )
        .context("the bench compiles its workload driver with `cc`: install a C compiler")?;
    }
    Ok(bin)
}

/// CPU model, cores, kernel, memory.
pub(crate) fn machine() -> String {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem_kb: u64 = fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    format!(
        "machine: {model}, {cores} cores, kernel {}, {:.1} GiB RAM",
        kernel.trim(),
        mem_kb as f64 / 1048576.0
    )
}
