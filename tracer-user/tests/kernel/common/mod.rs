//! Harness for the kernel tests: run the real `tracer record` around a
//! command or a scenario (`scenario.rs`) and hand back its parsed event log.
//! One way to spell a record command line (`record_args`), one ready
//! handshake (`ready.rs`), identities from /proc through procfs (`proc.rs`).
//! Scenarios signal only processes they spawned themselves.

use std::{
    ffi::{OsStr, OsString},
    path::{Path, PathBuf},
    process::{Command, Output},
};

use tracer_user::eventlog::{read_log, EventLog, Record};

pub(crate) mod cgroup;
#[path = "../../shared/records.rs"]
pub(crate) mod records;
pub(crate) use records::Records;
pub(crate) mod metrics_daemon;
pub(crate) mod native;
pub(crate) mod proc;
pub(crate) mod ready;
pub(crate) mod rss;
pub(crate) mod scenario;
pub(crate) mod suites;

pub(crate) use ready::{spawn_ready, wait_ready};
pub(crate) use scenario::{scenario, Scenario, SCENARIO_ENV};

/// Kernel tests need root. They fail loudly rather than skip: a suite that
/// quietly skips its kernel tests proves nothing.
pub(crate) fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this kernel test loads eBPF programs and needs root: run `cargo xtask test` (it uses sudo when you are not root)"
    );
}

pub(crate) struct Recorded {
    pub dir: tempfile::TempDir,
    pub output: Output,
    pub log: EventLog,
}

impl Recorded {
    /// The run that wrote `dir`, ended with `output`: its log, read and
    /// checked (sequence numbers without gaps, the trailer's count).
    pub(crate) fn read(dir: tempfile::TempDir, output: Output) -> Recorded {
        let log = read_log(&dir.path().join("events.ndjson")).unwrap_or_else(|e| {
            panic!(
                "no readable event log ({e}); tracer stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        assert_seq_contiguous(&log);
        Recorded { dir, output, log }
    }

    pub(crate) fn events(&self) -> impl Iterator<Item = &Record> {
        self.log.events.iter()
    }
    pub(crate) fn code(&self) -> Option<i32> {
        self.output.status.code()
    }
    pub(crate) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    pub(crate) fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }
}

/// The tracer binary the tests run: the one cargo built, or `TRACER_BIN`
/// (`cargo xtask dist --check` runs the suite against the static release
/// binary).
fn tracer_bin() -> OsString {
    std::env::var_os("TRACER_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_tracer").into())
}

/// The tracer binary, with the command kept as root: under `sudo cargo
/// xtask test` the SUDO_* variables would otherwise make every recorded
/// command run as the invoking user. Tests of that default set them again.
pub(crate) fn tracer() -> Command {
    let mut c = Command::new(tracer_bin());
    for var in ["SUDO_UID", "SUDO_GID", "SUDO_USER"] {
        c.env_remove(var);
    }
    c
}

/// `daemon --all FLAG`, for a flag only `record` takes: refused with a
/// usage error (64) before anything loads or is written; its stderr.
pub(crate) fn daemon_refuses(flag: &str) -> String {
    let out_dir = tempfile::tempdir().unwrap();
    let out = tracer()
        .args(["daemon", "--all", flag, "--output"])
        .arg(out_dir.path().join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(64), "{err}");
    assert!(!out_dir.path().join("out").exists(), "nothing written");
    err
}

/// `record --output OUT [extra...] -- cmd...`: the one spelling of a record
/// command line, for `tracer()` or a wrapper (`unshare ... tracer`).
pub(crate) fn record_args<S: AsRef<OsStr>>(out: &Path, extra: &[&str], cmd: &[S]) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec!["record".into(), "--output".into(), out.into()];
    args.extend(extra.iter().map(OsString::from));
    args.push("--".into());
    args.extend(cmd.iter().map(|a| a.as_ref().to_owned()));
    args
}

/// `tracer record --output OUT [extra...] -- cmd...`, for a caller that
/// spawns it itself (stdio, signals, another user).
pub(crate) fn record_command<S: AsRef<OsStr>>(out: &Path, extra: &[&str], cmd: &[S]) -> Command {
    let mut c = tracer();
    c.args(record_args(out, extra, cmd));
    c
}

/// `tracer record [extra...] -- cmd...` into a fresh directory.
pub(crate) fn record<S: AsRef<OsStr>>(extra: &[&str], cmd: &[S]) -> Recorded {
    record_env(extra, cmd, &[])
}

pub(crate) fn record_env<S: AsRef<OsStr>>(
    extra: &[&str],
    cmd: &[S],
    env: &[(&str, &str)],
) -> Recorded {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let output = record_command(dir.path(), extra, cmd)
        .envs(env.iter().copied())
        .output()
        .expect("run tracer");
    Recorded::read(dir, output)
}

/// The run's root process: forked by the tracer itself.
pub(crate) fn root(r: &Recorded) -> tracer_user::eventlog::Task {
    r.events()
        .forks()
        .find(|f| f.parent.pid == r.log.header.tracer_pid)
        .map(|f| f.child.clone())
        .expect("the tracer's fork of the command is in the log")
}

pub(crate) fn assert_no_loss(r: &Recorded) {
    let t = r.log.trailer.as_ref().expect("log has a trailer");
    assert_eq!(t.lost.total(), 0, "events were lost: {:?}", t.lost);
}

/// Sequence numbers run 1..=n without gaps and the trailer agrees.
fn assert_seq_contiguous(log: &EventLog) {
    let seqs: Vec<u64> = log
        .events
        .iter()
        .filter_map(|e| e.stamp().map(|s| s.seq))
        .collect();
    let want: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert!(seqs == want, "sequence numbers have gaps or repeats");
    if let Some(t) = &log.trailer {
        assert_eq!(t.events, seqs.len() as u64, "trailer event count");
    }
}

/// `tracer report LOG --output OUT`.
pub(crate) fn report_cmd(log: &std::path::Path, out: &std::path::Path) -> Output {
    tracer()
        .arg("report")
        .arg(log)
        .arg("--output")
        .arg(out)
        .output()
        .expect("run tracer report")
}

/// The header's entry for hook `name`.
/// This kernel's (major, minor), from its release string.
pub(crate) fn kernel_version() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = release
        .split(['.', '-'])
        .map(|n| n.trim().parse::<u32>().unwrap_or(0));
    (v.next().unwrap_or(0), v.next().unwrap_or(0))
}

/// This kernel is `major.minor` or later.
pub(crate) fn kernel_at_least(major: u32, minor: u32) -> bool {
    kernel_version() >= (major, minor)
}

pub(crate) fn hook<'a>(log: &'a EventLog, name: &str) -> &'a tracer_user::eventlog::HookStatus {
    log.header
        .hooks
        .iter()
        .find(|h| h.name == name)
        .unwrap_or_else(|| panic!("no hook {name} in the header"))
}

/// A failure of tracer itself, as users are promised it: exit 70 and one
/// line on stderr. Returns that line for the caller's wording checks.
pub(crate) fn one_line_failure(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// Whether a tracer's log in `dir` (rotated files too) mentions `needle` now.
pub(crate) fn log_shows(dir: &Path, needle: &str) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|f| {
            f.file_name().to_string_lossy().ends_with(".ndjson")
                && std::fs::read_to_string(f.path())
                    .unwrap_or_default()
                    .contains(needle)
        })
}

/// Bounded wait until a running tracer's log in `dir` (rotated files too)
/// mentions `needle`.
pub(crate) fn wait_for_log(dir: &Path, needle: &str) {
    // Generous: a daemon's start (the verifier's load of every program)
    // took over 30 s in an arm64 guest under TCG with three other guests
    // running; waiting costs time only when the line never comes.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(180);
    while !log_shows(dir, needle) {
        assert!(
            std::time::Instant::now() < deadline,
            "the log in {dir:?} never showed {needle}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Neither a panic nor a death by signal: a clean exit, error or not.
pub(crate) fn no_panic(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stderr.contains("panicked") && out.status.code().is_some(),
        "tracer panicked or died of a signal ({:?}): {stderr}",
        out.status
    );
    stderr
}

/// The real python3 binary (a version manager's `python3` is a shim: a bash
/// script that forks before it execs, which gives "python" children and
/// costs hundreds of milliseconds before the program runs).
pub(crate) fn python3() -> String {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("python3 must be installed for the kernel tests");
        let path = String::from_utf8(out.stdout).unwrap().trim().to_string();
        assert!(!path.is_empty(), "python3 did not say where it lives");
        path
    })
    .clone()
}

/// `verdict` leads with `want`, as far as the 300-character verdict keeps it:
/// whole, or cut (a shortened clause ends in "…" where it leaves `want`)
/// after at least its first 60 characters. The certificate keeps every word
/// the verdict cut.
pub(crate) fn assert_verdict_leads(verdict: &str, want: &str) {
    let same = verdict
        .char_indices()
        .zip(want.chars())
        .take_while(|((_, a), b)| a == b)
        .last()
        .map_or(0, |((i, c), _)| i + c.len_utf8());
    assert!(
        same == want.len() || (same >= 60.min(want.len()) && verdict[same..].starts_with('…')),
        "the verdict does not lead with {want:?}:\n{verdict}"
    );
}

/// The report of a recorded run, with default options.
pub(crate) fn default_report(r: &Recorded) -> tracer_user::report::Report {
    tracer_user::report::build_report(&r.log, &tracer_user::report::ReportOptions::default())
}

/// The one certificate whose argv starts with `argv` (the first word
/// compared by basename), never a fork that did not exec.
pub(crate) fn cert_by_argv<'a>(
    rep: &'a tracer_user::report::Report,
    argv: &[&str],
) -> &'a tracer_user::analysis::Certificate {
    let found: Vec<_> = rep
        .analysis
        .certificates
        .iter()
        .filter(|c| {
            let a = &c.victim.process.argv;
            !c.victim.process.argv_inherited
                && a.len() >= argv.len()
                && a[0].rsplit('/').next() == Some(argv[0])
                && a[1..argv.len()] == argv[1..]
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one certificate for {argv:?}; verdict: {}; headlines: {:#?}",
        rep.verdict,
        rep.analysis
            .certificates
            .iter()
            .map(|c| &c.headline)
            .collect::<Vec<_>>()
    );
    found[0]
}
