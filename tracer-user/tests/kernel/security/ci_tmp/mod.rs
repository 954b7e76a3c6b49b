//! Hole 10: the ci/ scripts used fixed names in a shared /tmp. Another local
//! user (here `nobody`) makes the directory first: `mkdir -p` accepted it, so
//! the `tracer` that later ran as root was theirs to swap, and root wrote the
//! daemon's state files through links they planted there. Each test plants
//! the trap as that user and asserts the script refuses it or never touches
//! it, and that nothing of theirs ran as root. Round 3, finding 2 is the
//! same trap one step earlier: install.sh's download directory in a TMPDIR
//! that user owns.
use std::{
    fs,
    os::unix::{
        fs::{MetadataExt, PermissionsExt},
        process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Command, Output},
};

use crate::common::*;

mod download;

const NOBODY: u32 = 65534;

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ci/scripts")
        .join(name)
}

/// A stand-in for the machine's /tmp (root's, sticky, world-writable: what
/// the attacker gets to use), and a directory of the test's own.
struct Trap {
    _top: tempfile::TempDir,
    tmp: PathBuf,
    private: PathBuf,
}

impl Trap {
    fn new() -> Trap {
        require_root();
        let top = tempfile::tempdir().unwrap();
        // Searchable by all, as the path to a machine's /tmp is: the
        // attacker must reach the shared tmp to plant anything in it.
        fs::set_permissions(top.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let tmp = top.path().join("tmp");
        let private = top.path().join("private");
        fs::create_dir(&tmp).unwrap();
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).unwrap();
        fs::create_dir(&private).unwrap();
        fs::set_permissions(&private, fs::Permissions::from_mode(0o700)).unwrap();
        // A root file the attacker would like root to overwrite.
        fs::write(private.join("precious"), "precious\n").unwrap();
        Trap {
            _top: top,
            tmp,
            private,
        }
    }

    /// The marker the attacker's `tracer` leaves when anyone runs it.
    fn marker(&self) -> PathBuf {
        self.private.join("evil-ran")
    }

    /// `name` in the shared tmp, made first by the attacker, open to all.
    fn planted_dir(&self, name: &str) -> PathBuf {
        let d = self.tmp.join(name);
        fs::create_dir(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(NOBODY), Some(NOBODY)).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
        d
    }

    /// An executable of the attacker's at `path`: it only leaves a marker.
    fn evil(&self, path: &Path) {
        let body = format!("#!/bin/sh\ntouch '{}'\n", self.marker().display());
        fs::write(path, body).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    }

    /// A CI script as the job would run it, outside GitHub (no RUNNER_TEMP),
    /// with this trap's tmp as TMPDIR.
    fn run(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(script(name));
        for var in [
            "RUNNER_TEMP",
            "TRACER",
            "TRACER_BIN_DIR",
            "TRACER_BINARY",
            "TRACER_STATE_DIR",
            "GITHUB_ENV",
            "GITHUB_OUTPUT",
            "GITHUB_PATH",
            "SUDO_UID",
            "SUDO_GID",
            "SUDO_USER",
        ] {
            c.env_remove(var);
        }
        c.env("TMPDIR", &self.tmp)
            .env_remove("TRACER_URL")
            .env_remove("TRACER_SHA256")
            .current_dir(&self.private)
            .args(args)
            .envs(env.iter().copied())
            .output()
            .unwrap()
    }

    fn assert_untouched(&self) {
        assert!(!self.marker().exists(), "the attacker's tracer ran as root");
        assert_eq!(
            fs::read_to_string(self.private.join("precious")).unwrap(),
            "precious\n",
            "root wrote through the attacker's link"
        );
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn tracer() -> &'static str {
    env!("CARGO_BIN_EXE_tracer")
}

#[test]
fn install_never_uses_a_bin_dir_another_user_made_first() {
    let t = Trap::new();
    let planted = t.planted_dir("tracer-bin");
    t.evil(&planted.join("tracer"));

    // The default is a fresh directory, not the planted fixed name.
    let out = t.run("install.sh", &[], &[("TRACER_BINARY", tracer())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let installed = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let bin = installed.parent().unwrap().to_path_buf();
    assert_ne!(bin, planted);
    assert!(bin.starts_with(&t.tmp), "{bin:?}");
    let meta = fs::metadata(&bin).unwrap();
    assert_eq!(meta.uid(), 0);
    assert_eq!(meta.mode() & 0o077, 0, "only its owner may change it");

    // The attacker cannot swap the tracer in it...
    let swap = Command::new("cp")
        .arg(planted.join("tracer"))
        .arg(&installed)
        .uid(NOBODY)
        .gid(NOBODY)
        .output()
        .unwrap();
    assert!(
        !swap.status.success(),
        "nobody replaced the installed tracer"
    );
    // ...so what tracer-record then runs as root is the real one.
    let out_dir = t.private.join("report");
    let rec = Command::new(bin.join("tracer-record"))
        .env_remove("TRACER")
        .env_remove("SUDO_UID")
        .env_remove("SUDO_GID")
        .env_remove("SUDO_USER")
        .args(["--output", out_dir.to_str().unwrap(), "--", "true"])
        .output()
        .unwrap();
    assert_eq!(rec.status.code(), Some(0), "{}", stderr(&rec));
    assert!(out_dir.join("report.json").exists());

    // Named explicitly, the planted directory is refused, untouched.
    let out = t.run(
        "install.sh",
        &["--bin-dir", planted.to_str().unwrap()],
        &[("TRACER_BINARY", tracer())],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is not yours alone"), "{err}");
    assert!(fs::read_to_string(planted.join("tracer"))
        .unwrap()
        .contains("evil-ran"));
    t.assert_untouched();
}

#[test]
fn record_refuses_a_tracer_another_user_could_swap() {
    let t = Trap::new();
    let planted = t.planted_dir("tools");
    // Theirs outright, and root's but in their directory (they can rename
    // it away and put theirs in its place).
    t.evil(&planted.join("tracer"));
    let rootfile = planted.join("tracer-root");
    fs::copy(tracer(), &rootfile).unwrap();
    for candidate in [planted.join("tracer"), rootfile] {
        let out = t.run(
            "record.sh",
            &[
                "--output",
                t.private.join("r").to_str().unwrap(),
                "--",
                "true",
            ],
            &[("TRACER", candidate.to_str().unwrap())],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(70), "{candidate:?}: {err}");
        assert!(err.contains("can be changed by another user"), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
    t.assert_untouched();
}

#[test]
fn daemon_state_never_goes_through_a_dir_another_user_made_first() {
    let t = Trap::new();
    let planted = t.planted_dir("tracer-daemon");
    // Every name root wrote in the old state directory, linked to a root file.
    let precious = t.private.join("precious");
    for name in [
        "output",
        "pid",
        "pid.tmp",
        "start",
        "rc",
        "rc.tmp",
        "daemon.log",
        "run",
    ] {
        let link = planted.join(name);
        std::os::unix::fs::symlink(&precious, &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let mut job = Command::new("sleep").arg("30").spawn().unwrap();
    let scope = format!("root-pid:{}", job.id());
    let output = t.private.join("daemon-report");
    let output = output.to_str().unwrap();
    let env = [("TRACER", tracer())];

    // Named explicitly: refused before anything runs as root.
    let out = t.run(
        "daemon-start.sh",
        &["--scope", &scope, "--output", output],
        &[
            ("TRACER", tracer()),
            ("TRACER_STATE_DIR", planted.to_str().unwrap()),
        ],
    );
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is not yours alone"), "{err}");

    // By default: a fresh state directory, announced for daemon-stop.sh.
    let out = t.run(
        "daemon-start.sh",
        &["--scope", &scope, "--output", output],
        &env,
    );
    let err = stderr(&out);
    let state = err
        .lines()
        .find_map(|l| l.split("pass --state ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string);
    let stopped = state
        .as_ref()
        .map(|s| t.run("daemon-stop.sh", &["--state", s], &env));
    let _ = job.kill();
    let _ = job.wait();
    assert!(out.status.success(), "{err}");
    let state = PathBuf::from(state.expect("daemon-start.sh names its state directory"));
    assert_ne!(state, planted);
    let stopped = stopped.unwrap();
    assert!(stopped.status.success(), "{}", stderr(&stopped));
    assert_eq!(fs::read_to_string(state.join("rc")).unwrap().trim(), "0");
    assert!(Path::new(output).join("report.json").exists());
    // The job log shows the verdict: daemon.log's first line is
    // "tracer: daemon watching …", which the stop step's filter once took
    // for the start of a range and deleted everything after.
    let rep: serde_json::Value =
        serde_json::from_slice(&fs::read(Path::new(output).join("report.json")).unwrap()).unwrap();
    let verdict = rep["verdict"].as_str().unwrap();
    assert!(
        stderr(&stopped).contains(verdict),
        "the stop step prints the verdict ({verdict}): {}",
        stderr(&stopped)
    );
    // The planted links are as they were: nothing followed or replaced them.
    for entry in fs::read_dir(&planted).unwrap() {
        let p = entry.unwrap().path();
        assert_eq!(fs::read_link(&p).unwrap(), precious, "{p:?}");
    }
    t.assert_untouched();
    fs::remove_dir_all(&state).unwrap();
}
