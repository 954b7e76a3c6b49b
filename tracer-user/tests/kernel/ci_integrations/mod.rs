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

mod install;
mod junit;
mod summarize;

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
