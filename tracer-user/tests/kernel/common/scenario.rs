//! Scenarios: a test that is also the command it records. `scenario(body)`,
//! called first thing in a `#[test]`, hands back the command line that runs
//! this same test binary on that very test (`--exact` its own name) with
//! `TRACER_SCENARIO=<its name>`. In that child, `scenario` runs `body` and
//! exits: the checks after it run only in the test. The name is written
//! nowhere: it is the test's own, as libtest names the thread it runs the
//! test on (with `--test-threads=1` too).
use std::io::Write;

use super::{record_command, record_env, Recorded};

pub(crate) const SCENARIO_ENV: &str = "TRACER_SCENARIO";

/// The running test, re-run as a command.
pub(crate) struct Scenario {
    name: String,
}

/// In the re-run child: runs `body`, then exits 0 (or as `body` exits).
/// In the test: the scenario to record.
pub(crate) fn scenario(body: impl FnOnce()) -> Scenario {
    let name = this_test();
    if std::env::var_os(SCENARIO_ENV).is_some_and(|v| v == name.as_str()) {
        body();
        std::io::stdout().flush().unwrap();
        std::process::exit(0);
    }
    Scenario { name }
}

impl Scenario {
    /// The command line of the child: this binary, this test alone, its
    /// output not captured (the body's lines reach the recording's stdout).
    pub(crate) fn argv(&self) -> Vec<String> {
        let exe = std::env::current_exe().unwrap();
        let exe = exe.to_str().expect("the test binary's path is UTF-8");
        [
            exe,
            "--exact",
            &self.name,
            "--nocapture",
            "--test-threads=1",
            "-q",
        ]
        .map(str::to_string)
        .to_vec()
    }

    /// The variable that makes the child run the body.
    pub(crate) fn env(&self) -> (&'static str, &str) {
        (SCENARIO_ENV, &self.name)
    }

    /// Runs under `tracer record [extra...]`.
    pub(crate) fn record(&self, extra: &[&str]) -> Recorded {
        self.record_env(extra, &[])
    }

    /// Runs under `tracer record [extra...]`, with `env` for the child too.
    pub(crate) fn record_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Recorded {
        let mut all = vec![self.env()];
        all.extend_from_slice(env);
        record_env(extra, &self.argv(), &all)
    }

    /// `tracer record --output OUT [extra...] -- <the child>`, for a caller
    /// that spawns it itself.
    pub(crate) fn command(&self, out: &std::path::Path, extra: &[&str]) -> std::process::Command {
        let mut cmd = record_command(out, extra, &self.argv());
        let (key, value) = self.env();
        cmd.env(key, value);
        cmd
    }
}

/// The running test's name, as `--exact` takes it.
fn this_test() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => panic!(
            "scenario() runs on a test's own thread (libtest names it after the test): \
             call it from the #[test] fn itself"
        ),
    }
}
