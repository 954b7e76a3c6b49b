//! A child's peak RSS, measured so that it is the child's own. wait4(2)'s
//! `ru_maxrss` of a child counts the memory it had between fork and exec, a
//! copy of its parent's: forked from this test binary (all the kernel tests
//! in one process, hundreds of MB), a 10 MB `tracer` reads as hundreds.
//! So the command runs under a small python3 shim that forks and execs it,
//! waits for it with wait4 and writes its peak to a file: the pre-exec part
//! is then the shim's few MB. The shim exits as the command did (its signal
//! re-raised), so the caller's status checks are unchanged.
use std::{path::PathBuf, process::Command};

const SHIM: &str = r#"
import os, signal, sys
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"#;

/// Where the shim writes the child's peak RSS.
pub(crate) struct PeakRss {
    _dir: tempfile::TempDir,
    file: PathBuf,
}

impl PeakRss {
    /// The child's peak RSS in KiB, once it has exited.
    pub(crate) fn kib(&self) -> u64 {
        let text = std::fs::read_to_string(&self.file)
            .unwrap_or_else(|e| panic!("no peak RSS from the shim ({e}): did the command run?"));
        text.trim().parse().expect("a number of KiB")
    }
}

/// `cmd` run under the measuring shim: the same program, arguments,
/// environment and directory; set its stdio on the result, then spawn it.
pub(crate) fn with_peak_rss(cmd: &Command) -> (Command, PeakRss) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("maxrss");
    let mut shim = Command::new("python3");
    shim.args(["-c", SHIM]).arg(&file).arg(cmd.get_program());
    shim.args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => shim.env(k, v),
            None => shim.env_remove(k),
        };
    }
    if let Some(d) = cmd.get_current_dir() {
        shim.current_dir(d);
    }
    (shim, PeakRss { _dir: dir, file })
}
