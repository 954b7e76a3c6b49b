//! What the offline tests share: `tracer report` on a log, and the check
//! that tracer neither panicked nor died of a signal.
use std::{
    path::Path,
    process::{Command, Output},
};

/// `tracer report LOG --output OUT`.
pub(crate) fn report_cmd(log: &Path, out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tracer"))
        .arg("report")
        .arg(log)
        .arg("--output")
        .arg(out)
        .output()
        .expect("run tracer report")
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
