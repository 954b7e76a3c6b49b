//! The runner suites (tests/fixtures/suites): real test runners on real
//! suites whose cleanup test SIGKILLs what a sibling test owns. The runners
//! (vitest, jest, pytest with xdist) come from the suites' own setup.sh, into
//! the target dir's tmp/ (`cargo xtask test` runs it first; here it is a
//! no-op then); go and cargo-nextest from `cargo xtask test` too. A runner
//! that is missing fails the test loudly: none is skipped.
//!
//! Each run gets a fresh `SUITE_DIR`: the sibling writes the pid of what it
//! owns there (`worker.pid` or `helper.pid`), the cleanup test its own pid
//! (`killer.pid`) and then kills the pid it read, so the suite only ever
//! signals a process of its own run. `SUITE_KILL=0` leaves it alone: the
//! suite passes, as it does without tracer.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
    time::{Duration, Instant},
};

use super::{record_command, require_root, Recorded};

/// tests/fixtures/suites.
pub(crate) fn suites() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/suites")
}

/// Where setup.sh put the runners: made on first use, then reused as it is.
pub(crate) fn cache() -> &'static Path {
    static CACHE: OnceLock<PathBuf> = OnceLock::new();
    CACHE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("runner-suites");
        let out = Command::new(suites().join("setup.sh"))
            .arg(&dir)
            .output()
            .expect("run tests/fixtures/suites/setup.sh");
        assert!(
            out.status.success(),
            "tests/fixtures/suites/setup.sh (installs vitest, jest, pytest, pytest-xdist) failed:\n{}",
            both(&out)
        );
        dir
    })
}

/// `program` on PATH, or a loud failure naming what installs it.
pub(crate) fn require(program: &str, installed_by: &str) {
    let found = std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()));
    assert!(
        found,
        "{program} is not on PATH: this test runs a real {program} suite ({installed_by})"
    );
}

pub(crate) fn both(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// One run of a suite: its `SUITE_DIR`, and the directory it runs in.
pub(crate) struct Suite {
    pub dir: tempfile::TempDir,
    /// The runner's working directory.
    pub cwd: PathBuf,
    /// Variables of this run on top of `env`'s, in both runs: the Node
    /// preload's `NODE_OPTIONS`.
    pub extra: Vec<(&'static str, String)>,
}

impl Suite {
    /// A suite run in place (`suites()/name`): one that writes nothing there
    /// (go with its caches in `cache()`, pytest without its cache and
    /// bytecode, cargo with its target dir in `cache()`).
    pub(crate) fn in_place(name: &str) -> Self {
        Suite {
            dir: tempfile::tempdir().unwrap(),
            cwd: suites().join(name),
            extra: Vec::new(),
        }
    }

    /// A JavaScript suite: its test files copied into `SUITE_DIR` beside a
    /// link to setup.sh's node_modules, so nothing is written into the
    /// repository (the runners' own caches are off: `--no-cache`).
    pub(crate) fn copied(name: &str) -> Self {
        Self::copied_with(name, &cache().join("node/node_modules"))
    }

    /// `copied`, its `node_modules` a link to `modules` (a version of the
    /// matrix, setup.sh's `matrix/<name>`).
    pub(crate) fn copied_with(name: &str, modules: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        for f in std::fs::read_dir(suites().join(name)).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), dir.path().join(f.file_name())).unwrap();
        }
        std::os::unix::fs::symlink(modules, dir.path().join("node_modules")).unwrap();
        let cwd = dir.path().to_path_buf();
        Suite {
            dir,
            cwd,
            extra: Vec::new(),
        }
    }

    /// The same suite with `key=value` set for the runner, with and
    /// without tracer.
    pub(crate) fn with_env(mut self, key: &'static str, value: String) -> Self {
        self.extra.push((key, value));
        self
    }

    /// The variables the suite reads, and its runners' caches out of the
    /// repository and out of root's home.
    pub(crate) fn env(&self, kill: bool) -> Vec<(&'static str, String)> {
        let c = cache();
        vec![
            ("SUITE_DIR", self.dir.path().display().to_string()),
            ("SUITE_KILL", if kill { "1" } else { "0" }.to_string()),
            ("PYTHONDONTWRITEBYTECODE", "1".to_string()),
            ("GOCACHE", c.join("go-build").display().to_string()),
            ("GOPATH", c.join("gopath").display().to_string()),
            ("GOFLAGS", "-mod=mod".to_string()),
            // The suite has no dependencies: go must not look for any.
            ("GOPROXY", "off".to_string()),
            ("CI", "true".to_string()),
        ]
    }

    /// The pid the suite wrote into `file` (`worker.pid`, `helper.pid`,
    /// `killer.pid`).
    pub(crate) fn pid(&self, file: &str) -> u32 {
        let path = self.dir.path().join(file);
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("the suite wrote no {path:?}: {e}"))
            .trim()
            .parse()
            .unwrap()
    }

    fn command(&self, mut cmd: Command, kill: bool) -> Command {
        cmd.current_dir(&self.cwd)
            .envs(self.env(kill))
            .envs(self.extra.iter().cloned());
        cmd
    }

    /// The suite without tracer and without its kill: it must pass.
    pub(crate) fn passes_without_the_kill(&self, argv: &[&str]) -> Duration {
        self.passes_without_the_kill_env(argv, &[]).0
    }

    /// As `passes_without_the_kill`, with `env` on top of the suite's; the
    /// wall time and the runner's output.
    pub(crate) fn passes_without_the_kill_env(
        &self,
        argv: &[&str],
        env: &[(&str, String)],
    ) -> (Duration, Output) {
        let started = Instant::now();
        let mut cmd = self.command(argv_command(argv), false);
        let out = cmd
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap_or_else(|e| panic!("run {argv:?}: {e}"));
        assert!(
            out.status.success(),
            "{argv:?} with SUITE_KILL=0 failed ({}):\n{}",
            out.status,
            both(&out)
        );
        (started.elapsed(), out)
    }

    /// `tracer record [extra...] -- argv` on the suite, its kill on; the
    /// wall time.
    pub(crate) fn record(&self, extra: &[&str], argv: &[&str]) -> (Recorded, Duration) {
        self.record_env(extra, argv, &[])
    }

    /// As `record`, with `env` on top of the suite's.
    pub(crate) fn record_env(
        &self,
        extra: &[&str],
        argv: &[&str],
        env: &[(&str, String)],
    ) -> (Recorded, Duration) {
        self.record_env_kill(extra, argv, env, true)
    }

    /// `record_env`, the kill on or off (`SUITE_KILL`).
    pub(crate) fn record_env_kill(
        &self,
        extra: &[&str],
        argv: &[&str],
        env: &[(&str, String)],
        kill: bool,
    ) -> (Recorded, Duration) {
        require_root();
        let out = tempfile::tempdir().unwrap();
        let started = Instant::now();
        let cmd = record_command(out.path(), extra, argv);
        let output = self
            .command(cmd, kill)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .output()
            .expect("run tracer");
        let took = started.elapsed();
        (Recorded::read(out, output), took)
    }

    /// As `record`, with the runner's stdout and stderr one file, as a CI
    /// job's log is (GitLab's, `2>&1`): tracer's last words then read what
    /// a runner prints on stdout too. The log comes back as `stdout`.
    pub(crate) fn record_as_one_log(&self, extra: &[&str], argv: &[&str]) -> (Recorded, Duration) {
        require_root();
        let out = tempfile::tempdir().unwrap();
        let log_path = self.dir.path().join("job.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let started = Instant::now();
        let mut cmd = self.command(record_command(out.path(), extra, argv), true);
        let status = cmd
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .status()
            .expect("run tracer");
        let took = started.elapsed();
        let output = Output {
            status,
            stdout: std::fs::read(&log_path).unwrap(),
            stderr: Vec::new(),
        };
        (Recorded::read(out, output), took)
    }
}

fn argv_command(argv: &[&str]) -> Command {
    let mut c = Command::new(argv[0]);
    c.args(&argv[1..]);
    c
}
