//! Round 4, finding 4: `--test-report FORMAT:PATH` names a file the job
//! writes, and the job controls every directory on its path. Only the last
//! component was guarded (no link followed there): a job that turned a
//! parent directory into a link to a root-only directory got the names and
//! classnames of a root-only JUnit file into its own events.ndjson. The file
//! is now opened with the run's user's filesystem ids: through a directory
//! that user cannot search, nothing is read.
use std::{fs, os::unix::fs::PermissionsExt, path::Path};

use crate::common::*;

const NOBODY: u32 = 65534;

fn junit(test: &str) -> String {
    format!(
        r#"<?xml version="1.0"?><testsuites><testsuite name="s" tests="1" time="0.5" timestamp="2026-12-02T00:03:55+00:00"><testcase classname="{test}_class" name="{test}" time="0.5" /></testsuite></testsuites>"#
    )
}

/// `record --user nobody --test-report junit:WORK/reports/report.xml`
/// around `script`, run in WORK (nobody's); what the log and reports hold.
fn recorded_with_report(work: &Path, script: &str) -> String {
    let out = tempfile::tempdir().unwrap();
    let spec = format!("junit:{}", work.join("reports/report.xml").display());
    let run = record_command(
        out.path(),
        &["--user", "nobody", "--test-report", &spec],
        &["sh", "-c", script],
    )
    .current_dir(work)
    .output()
    .unwrap();
    let stderr = no_panic(&run);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let mut all = stderr;
    for f in ["events.ndjson", "report.json", "report.md"] {
        all += &fs::read_to_string(out.path().join(f)).unwrap();
    }
    all
}

#[test]
fn a_test_report_reached_through_a_link_to_root_only_files_is_not_read() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o711)).unwrap();
    // Root's: a directory only root can search, holding a JUnit file.
    let private = tmp.path().join("private");
    fs::create_dir(&private).unwrap();
    fs::write(private.join("report.xml"), junit("root_only_secret_test")).unwrap();
    fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
    // The job's work directory.
    let work = tmp.path().join("work");
    fs::create_dir(&work).unwrap();
    std::os::unix::fs::chown(&work, Some(NOBODY), Some(NOBODY)).unwrap();

    // The control: a report the job wrote itself is read.
    let own = format!(
        "mkdir reports && printf '%s' '{}' > reports/report.xml",
        junit("the_jobs_own_test")
    );
    let seen = recorded_with_report(&work, &own);
    assert!(
        seen.contains("the_jobs_own_test"),
        "the control read nothing: {seen}"
    );

    // The attack: the report's parent directory becomes a link to root's.
    let link = format!("rm -r reports && ln -s {} reports", private.display());
    let seen = recorded_with_report(&work, &link);
    assert!(
        !seen.contains("root_only_secret_test"),
        "a root-only file's test names reached the run's files"
    );
    assert!(
        seen.contains("--test-report junit:") && seen.contains("Permission denied"),
        "the refusal is not said: {seen}"
    );
}
