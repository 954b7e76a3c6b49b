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

/// The report of `tests/fixtures/NAME.ndjson`, with default options.
pub(crate) fn fixture_report(name: &str) -> tracer_user::report::Report {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.ndjson"));
    tracer_user::report::build_report(
        &tracer_user::eventlog::read_log(&path).unwrap(),
        &tracer_user::report::ReportOptions::default(),
    )
}

/// The one certificate whose victim's argv starts with these words (the
/// first one's basename), never a fork that did not exec.
pub(crate) fn cert<'a>(
    r: &'a tracer_user::report::Report,
    argv: &[&str],
) -> &'a tracer_user::analysis::Certificate {
    let found: Vec<_> = r
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
        "one certificate for {argv:?}; headlines: {:#?}",
        r.analysis
            .certificates
            .iter()
            .map(|c| &c.headline)
            .collect::<Vec<_>>()
    );
    found[0]
}
