//! The capture options `record` and `daemon` share, declared (and their
//! help written) once.
use crate::capture::LoadOptions;

#[derive(clap::Args, Debug, Clone)]
pub struct CaptureOptions {
    /// Ring buffer size in bytes (rounded up to a power of two pages).
    #[arg(long, default_value_t = crate::capture::DEFAULT_RING_BYTES)]
    pub ring_buffer_size: u32,
    /// Bytes of stderr kept per process as its "last words" (0 disables).
    #[arg(long, default_value_t = 4096)]
    pub last_words_bytes: usize,
    /// Skip a hook or one attach method, to exercise fallbacks (testing and
    /// diagnosis): `kill_syscalls:fentry`, `kill_syscalls:raw_syscalls`,
    /// `kill_syscalls:tracepoint`, `kill_syscalls`, `oom_mark_victim`, `last_words`.
    #[arg(long = "disable-hook", value_name = "HOOK", hide = true,
          value_parser = crate::capture::hooks::parse_disabled)]
    pub disable_hooks: Vec<String>,
    /// Where a crashed module without DWARF of its own has its separate
    /// debug file, by build id (`DIR/.build-id/xx/yyyy.debug`, as
    /// distributions install them); read as the command's user.
    #[arg(
        long = "debug-dir",
        value_name = "DIR",
        default_value = "/usr/lib/debug"
    )]
    pub debug_dirs: Vec<std::path::PathBuf>,
    /// Log every signal delivery. By default a flood of signals that the
    /// receiving process handles or ignores (past the first 8 from one
    /// sender) is counted in the kernel and logged as `signal_summary`
    /// records (docs/event-log.md).
    #[arg(long)]
    pub all_signals: bool,
    /// Log the eBPF side's rare failures (unreadable memory, full maps, wrong
    /// kernel offsets) to stderr; also on with TRACER_LOG=debug.
    #[arg(long)]
    pub debug_ebpf: bool,
    /// Name the tests: hand the command tracer's test-runner integrations
    /// (a pytest plugin, a Node preload), written into a private directory
    /// for the run and loaded through the runners' own variables
    /// (PYTHONPATH, NODE_OPTIONS), each joined to the value it had. The report header
    /// lists every change (docs/report.md, "Which test"). `record` only: a
    /// daemon starts no command (its jobs load the plugin with one line).
    #[arg(long)]
    pub tests: bool,
    /// Ask the runtimes for their own crash evidence: PYTHONFAULTHANDLER=1
    /// (Python prints every thread's traceback on a fatal signal: its
    /// words lead the certificate) and Node's
    /// `--perf-basic-prof-only-functions` in NODE_OPTIONS (V8 writes
    /// /tmp/perf-PID.map, which names the JIT frames of a crash stack; the
    /// maps stay in /tmp, as under perf). A variable the command already
    /// set is kept. The report header lists every change. `record` only.
    #[arg(long)]
    pub runtime_stacks: bool,
    /// Do not sample the run's cgroup (memory, CPU, pressure, the largest
    /// processes' RSS) into the log. By default `record` samples the
    /// command's cgroups once a second (docs/event-log.md, `resources`),
    /// and `daemon --cgroup` the watched one.
    #[arg(long)]
    pub no_resources: bool,
    /// Measure tracer's own kernel time: the kernel counts each of tracer's
    /// eBPF programs' runs and their time while tracer runs
    /// (BPF_ENABLE_STATS; a few ns per run, so off by default), and the
    /// log's trailer says them (`program_stats`). For benchmarks and
    /// diagnosis (`cargo xtask bench` uses it).
    #[arg(long)]
    pub program_stats: bool,
}

impl CaptureOptions {
    /// What the kernel side is loaded with; the tracer's own process is
    /// never traced. `redacting`: `--redact` wants slack beyond the cut.
    pub fn load_options(&self, tracer_tgid: u32, redacting: bool) -> LoadOptions {
        LoadOptions {
            ring_buffer_bytes: self.ring_buffer_size,
            tracer_tgid,
            disabled: self.disable_hooks.clone(),
            last_words: self.last_words_bytes > 0,
            last_words_per_write: super::last_words::per_write(self.last_words_bytes, redacting),
            all_signals: self.all_signals,
            debug_ebpf: self.debug_ebpf,
            program_stats: self.program_stats,
        }
    }
}
