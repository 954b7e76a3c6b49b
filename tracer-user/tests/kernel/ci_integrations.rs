//! ci/: the integrations users copy (the GitHub Action and example workflow,
//! the GitLab job templates, the Kubernetes pod and DaemonSet, the container
//! build), linted offline and run end to end against the real tracer. The
//! work is in ci/test/ (lint.py, e2e.sh); this file is how `cargo xtask test`
//! runs it.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    sync::OnceLock,
};

use crate::common::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// The venv of pinned lint tools (ci/test/requirements.txt) under target/:
/// made on first use, then reused as it is.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ci-venv");
        let out = Command::new(repo().join("ci/test/venv.sh"))
            .arg(&dir)
            .output()
            .expect("run ci/test/venv.sh");
        assert!(out.status.success(), "ci/test/venv.sh:\n{}", both(&out));
        dir.join("bin/python")
    })
}

fn both(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// yamllint, the GitHub/GitLab/Kubernetes schemas, shellcheck on every
/// script and embedded snippet, the Containerfile read; canaries prove each
/// validator rejects a broken file.
#[test]
fn ci_files_lint_and_validate() {
    let out = Command::new(python())
        .arg(repo().join("ci/test/lint.py"))
        .output()
        .expect("run ci/test/lint.py");
    assert!(out.status.success(), "ci/test/lint.py:\n{}", both(&out));
}

/// The example GitHub workflow (through the composite action), the example
/// GitLab pipeline (through the templates), the CI pod's sidecar and CI
/// commands, the DaemonSet's arguments and the container build script, run
/// as written around a worker killed by its sibling.
#[test]
fn ci_integrations_end_to_end() {
    require_root();
    let out = Command::new(repo().join("ci/test/e2e.sh"))
        .arg(python())
        .arg(env!("CARGO_BIN_EXE_tracer"))
        .output()
        .expect("run ci/test/e2e.sh");
    assert!(out.status.success(), "ci/test/e2e.sh:\n{}", both(&out));
}

/// A local HTTP server for `dir` (python3's http.server on 127.0.0.1, port
/// chosen by the kernel), killed on drop.
struct Served {
    child: std::process::Child,
    port: u16,
}

impl Served {
    fn dir(dir: &Path) -> Self {
        use std::io::BufRead;
        let mut child = Command::new("python3")
            .args([
                "-u",
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                "0",
                "--directory",
            ])
            .arg(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start python3 -m http.server");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        // "Serving HTTP on 127.0.0.1 port 41235 (http://127.0.0.1:41235/) ..."
        let port = line
            .split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        Served { child, port }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// install.sh --url --sha256: the release tarball's layout (as `cargo xtask
/// dist` makes it), downloaded over real HTTP, installed only when its
/// checksum matches; a wrong checksum installs nothing.
#[test]
fn install_from_a_url_verifies_the_checksum_first() {
    let tmp = tempfile::tempdir().unwrap();
    let name = "tracer-0.1.0-x86_64-linux-musl";
    let stage = tmp.path().join("srv").join(name);
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_tracer"), stage.join("tracer")).unwrap();
    std::fs::copy(repo().join("README.md"), stage.join("README.md")).unwrap();
    let tarball = format!("{name}.tar.gz");
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(tmp.path().join("srv").join(&tarball))
        .arg("-C")
        .arg(tmp.path().join("srv"))
        .arg(name)
        .output()
        .unwrap();
    assert!(tar.status.success(), "{}", both(&tar));
    let sum = Command::new("sha256sum")
        .arg(tmp.path().join("srv").join(&tarball))
        .output()
        .unwrap();
    let sha = String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let served = Served::dir(&tmp.path().join("srv"));
    let url = format!("http://127.0.0.1:{}/{tarball}", served.port);
    let install = |sha: &str, bin_dir: &Path| {
        Command::new(repo().join("ci/scripts/install.sh"))
            .args(["--url", &url, "--sha256", sha, "--bin-dir"])
            .arg(bin_dir)
            .env_remove("GITHUB_PATH")
            .env_remove("GITHUB_OUTPUT")
            .output()
            .unwrap()
    };

    let good = tmp.path().join("good");
    let out = install(&sha, &good);
    assert!(out.status.success(), "{}", both(&out));
    // The served copy, not target/debug/tracer: another test of this run
    // may rebuild that while this one runs.
    assert!(
        std::fs::read(good.join("tracer")).unwrap() == std::fs::read(stage.join("tracer")).unwrap(),
        "the installed tracer is not the one in the tarball"
    );
    assert!(good.join("tracer-record").exists());

    let bad = tmp.path().join("bad");
    let wrong = format!("{}0", &sha[..63]);
    let wrong = if wrong == sha {
        format!("{}1", &sha[..63])
    } else {
        wrong
    };
    let out = install(&wrong, &bad);
    assert!(!out.status.success(), "a wrong checksum was accepted");
    assert!(both(&out).contains("checksum mismatch"), "{}", both(&out));
    assert!(
        !bad.join("tracer").exists(),
        "installed despite the mismatch"
    );
}
