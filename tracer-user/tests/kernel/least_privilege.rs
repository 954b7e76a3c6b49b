//! The wrapped command runs as the invoking user under sudo (or `--user`);
//! only the tracer keeps root, and the certificates are as complete.
use std::os::unix::fs::PermissionsExt;

use crate::common::*;
use nix::unistd::User;
use serde_json::Value;
use tracer_user::{eventlog::Task, run::leaks};

/// Prints the command's credentials and environment, one per line, then
/// tries to write into `$1`, a directory only root may write to.
const WHO: &str = r#"id -u; id -g; id -G; echo "$HOME $USER $LOGNAME $KEEP"; touch "$1/x" 2>/dev/null && echo wrote || echo denied"#;

fn nobody() -> User {
    User::from_name("nobody")
        .unwrap()
        .expect("the test machine has a `nobody` user")
}

/// A directory root alone can write to (readable by all, so the command
/// under test gets as far as trying).
fn root_only_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// The lines `WHO` printed.
fn who(extra: &[&str], env: &[(&str, &str)]) -> (Recorded, Vec<String>) {
    let dir = root_only_dir();
    let target = dir.path().to_str().unwrap();
    let mut all = vec![("KEEP", "kept")];
    all.extend_from_slice(env);
    let r = record_env(extra, &["sh", "-c", WHO, "sh", target], &all);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let lines = String::from_utf8_lossy(&r.output.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    (r, lines)
}

fn sudo_as_nobody() -> Vec<(&'static str, String)> {
    let n = nobody();
    vec![
        ("SUDO_UID", n.uid.to_string()),
        ("SUDO_GID", n.gid.to_string()),
        ("SUDO_USER", "nobody".into()),
    ]
}

fn report_run(r: &Recorded) -> Value {
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    json["run"].clone()
}

#[test]
fn user_option_runs_the_command_as_that_user() {
    let n = nobody();
    let (r, lines) = who(&["--user", "nobody"], &[]);
    assert_eq!(lines[0], n.uid.to_string(), "{lines:?}");
    assert_eq!(lines[1], n.gid.to_string(), "{lines:?}");
    // initgroups: the user's groups, not root's.
    assert!(!lines[2].split(' ').any(|g| g == "0"), "{lines:?}");
    assert_eq!(
        lines[3],
        format!("{} nobody nobody kept", n.dir.display()),
        "HOME/USER/LOGNAME are the user's, the rest is passed on"
    );
    assert_eq!(lines[4], "denied", "the command has no root left");
    let want = format!("nobody (uid {})", n.uid);
    assert_eq!(r.log.header.command_user.as_deref(), Some(want.as_str()));
    assert_eq!(report_run(&r)["command_user"], want.as_str());
    // By numeric uid, the same.
    let (_, by_uid) = who(&["--user", &n.uid.to_string()], &[]);
    assert_eq!(by_uid[0], n.uid.to_string());
}

#[test]
fn under_sudo_the_command_runs_as_the_invoking_user() {
    let n = nobody();
    let sudo = sudo_as_nobody();
    let env: Vec<(&str, &str)> = sudo.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (r, lines) = who(&[], &env);
    assert_eq!(lines[0], n.uid.to_string(), "{lines:?}");
    assert_eq!(lines[1], n.gid.to_string(), "{lines:?}");
    assert_eq!(lines[4], "denied");
    assert_eq!(
        r.log.header.command_user,
        Some(format!("nobody (uid {})", n.uid))
    );
    // The report is handed to the user whose run it is; the directory the
    // test made keeps its owner.
    use std::os::unix::fs::MetadataExt;
    for f in ["events.ndjson", "report.json", "report.md", "report.html"] {
        let m = std::fs::metadata(r.path(f)).unwrap();
        assert_eq!((m.uid(), m.gid()), (n.uid.as_raw(), n.gid.as_raw()), "{f}");
    }
    assert_eq!(std::fs::metadata(r.dir.path()).unwrap().uid(), 0);
}

#[test]
fn user_root_keeps_root_even_under_sudo() {
    let sudo = sudo_as_nobody();
    let env: Vec<(&str, &str)> = sudo.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (r, lines) = who(&["--user", "root"], &env);
    assert_eq!(lines[0], "0", "{lines:?}");
    assert_eq!(lines[4], "wrote");
    assert_eq!(r.log.header.command_user.as_deref(), Some("root (uid 0)"));
    // Not under sudo: root stays root, unasked.
    let (r, lines) = who(&[], &[]);
    assert_eq!(lines[0], "0", "{lines:?}");
    assert_eq!(r.log.header.command_user.as_deref(), Some("root (uid 0)"));
}

#[test]
fn unknown_user_is_one_line_and_a_usage_error() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    let out = record_command(&out_dir, &["--user", "no-such-user-tracer-test"], &["true"])
        .output()
        .unwrap();
    // The command line is wrong: EX_USAGE (README's exit table), one line.
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("tracer: error: no such user: no-such-user-tracer-test"),
        "{stderr}"
    );
    assert!(!out_dir.exists(), "nothing started, nothing written");
}

/// Unprivileged, the run's story is as complete: a child killed by its
/// parent, last words, and a leaked daemon the tracer (still root) kills.
#[test]
fn certificates_and_leak_kills_hold_for_an_unprivileged_command() {
    let r = record(
        &["--user", "nobody", "--leaks", "kill", "--leak-grace", "2s"],
        &[
            "sh",
            "-c",
            "sleep 30 & victim=$!; sleep 0.2; kill -9 $victim; echo \"victim=$victim\"; \
             (setsid sleep 300 >/dev/null 2>&1 &); sleep 0.2; echo 'worker: out of luck' >&2; exit 4",
        ],
    );
    assert_eq!(r.code(), Some(4), "{}", r.stderr());
    assert_no_loss(&r);
    let stdout = String::from_utf8_lossy(&r.output.stdout);
    let victim: u32 = stdout
        .trim()
        .strip_prefix("victim=")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    let rep: Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let certs = rep["certificates"].as_array().unwrap();
    let cert = certs
        .iter()
        .find(|c| c["victim"]["pid"] == victim)
        .unwrap_or_else(|| panic!("no certificate for the killed sleep: {certs:#?}"));
    assert_eq!(cert["cause"]["kind"], "killed_in_run", "{cert:#}");
    assert_eq!(cert["killer"]["relation"], "parent", "{cert:#}");
    assert_eq!(cert["killer"]["process"]["pid"], root(&r).pid);
    let root_cert = certs
        .iter()
        .find(|c| c["victim"]["pid"] == root(&r).pid)
        .expect("the command's exit 4");
    assert_eq!(root_cert["last_words"]["line"], "worker: out of luck");
    // The daemon was nobody's; the tracer kept root and removed it.
    let leak: Vec<&Task> = r.events().leaks().map(|l| &l.task).collect();
    assert_eq!(leak.len(), 1, "{leak:?}");
    assert!(
        leaks::inspect(leak[0].key(), 0, None).is_none(),
        "the leaked daemon is gone"
    );
}
