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

/// `python ci/test/junit.py [--names] FILES`: ci/test/junit.xsd validation
/// (xmlschema), and the test cases as `classname\tname\tfailed|passed`.
fn junit_py(names: bool, files: &[PathBuf]) -> String {
    let mut cmd = Command::new(python());
    cmd.arg(repo().join("ci/test/junit.py"));
    if names {
        cmd.arg("--names");
    }
    let out = cmd.args(files).output().expect("run ci/test/junit.py");
    assert!(out.status.success(), "ci/test/junit.py:\n{}", both(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Every fixture's JUnit file (`tracer report --junit`) is valid against
/// ci/test/junit.xsd, and a schema-invalid file is caught (the
/// validator is not a formality).
#[test]
fn tracer_junit_files_are_valid_junit_10() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = repo().join("tracer-user/tests/fixtures");
    let mut files = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&fixtures)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .collect();
    names.sort();
    for log in names {
        let stem = log.file_stem().unwrap().to_string_lossy().into_owned();
        let out_dir = tmp.path().join(&stem);
        let junit = out_dir.join("junit.xml");
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .arg("report")
            .arg(&log)
            .arg("--output")
            .arg(&out_dir)
            .arg("--junit")
            .arg(&junit)
            .output()
            .unwrap();
        // A fixture tracer refuses to read (bad logs) has no JUnit file.
        if out.status.success() {
            files.push(junit);
        }
    }
    assert!(files.len() > 30, "only {} fixtures rendered", files.len());
    junit_py(false, &files);
    // With hostile strings in every record, still valid.
    let seed = std::fs::read_to_string(fixtures.join("seed000_group_kill.ndjson")).unwrap();
    let hostile = seed.replace("worker.js", "w\\u001b[31m\\u0007\\ufffe<o>&\\\"\\u202e.js");
    let dir = tmp.path().join("hostile");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("events.ndjson"), hostile).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .arg("report")
        .arg(dir.join("events.ndjson"))
        .arg("--junit")
        .arg(dir.join("junit.xml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", both(&out));
    let listed = junit_py(true, &[dir.join("junit.xml")]);
    assert!(
        listed.contains("w\\e[31m\\x07\\u{fffe}<o>&\"\\u{202e}.js"),
        "{listed}"
    );
    // The canary: a suite without its required `errors` is refused.
    let bad = tmp.path().join("bad.xml");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    std::fs::write(&bad, text.replacen(" errors=\"0\" skipped", " skipped", 1)).unwrap();
    let out = Command::new(python())
        .arg(repo().join("ci/test/junit.py"))
        .arg(&bad)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "an invalid file passed:\n{}",
        both(&out)
    );
}

/// Two runs of one scenario (a worker SIGKILLed by its sibling: the CI
/// test's workload) give identical test-case names: no pid, time or temp
/// path in them, so a CI system's history of a test builds up.
#[test]
fn two_runs_of_one_scenario_give_the_same_junit_names() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let mut listed = Vec::new();
    let mut files = Vec::new();
    for run in ["first", "second"] {
        let dir = tmp.path().join(run);
        std::fs::create_dir(&dir).unwrap();
        let junit = tmp.path().join(format!("{run}.xml"));
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .args(["record", "--output"])
            .arg(dir.join("tracer-report"))
            .arg("--junit")
            .arg(&junit)
            .arg("--")
            .arg("sh")
            .arg(repo().join("ci/test/workload.sh"))
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
        let report: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("tracer-report/report.json")).unwrap(),
        )
        .unwrap();
        let pids: Vec<String> = report["certificates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["victim"]["pid"].to_string())
            .collect();
        let names = junit_py(true, std::slice::from_ref(&junit));
        for pid in &pids {
            assert!(
                !names.contains(pid.as_str()),
                "pid {pid} in a name:\n{names}"
            );
        }
        assert!(
            names.contains("tracer.unexpected_death\tsleep <n> killed by SIGKILL from a sibling"),
            "{names}"
        );
        listed.push(names);
        files.push(junit);
    }
    assert_eq!(listed[0], listed[1], "the names differ between runs");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(
        text.contains("(pid "),
        "the pid belongs in the message:\n{text}"
    );
}

/// A flaky-death dashboard's input: the same scenario in three CI runs,
/// each a test that signals a pid written into it (above pid_max here, so
/// it can only fail: ESRCH, whoever runs it). `tracer summarize` keeps the
/// literal pid and flags it, and lists each run with the CI context that
/// `record` read from the CI's environment into the log header.
#[test]
fn summarize_flags_a_hard_coded_pid_across_ci_runs() {
    require_root();
    let max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = (max + 4242).to_string();
    let tmp = tempfile::tempdir().unwrap();
    for attempt in 1..=3 {
        let dir = tmp.path().join(format!("run-{attempt}"));
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .args(["record", "--output"])
            .arg(&dir)
            .args(["--", "sh", "-c", "kill -TERM \"$0\" 2>/dev/null; exit 0"])
            .arg(&pid)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_SERVER_URL", "https://github.example")
            .env("GITHUB_REPOSITORY", "team/app")
            .env("GITHUB_RUN_ID", "7001")
            .env("GITHUB_RUN_ATTEMPT", attempt.to_string())
            .env("GITHUB_SHA", "0123456789abcdef0123456789abcdef01234567")
            .env("GITHUB_REF_NAME", "main")
            .env("GITHUB_HEAD_REF", "")
            .env("GITHUB_JOB", "test")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
    }
    let summarize = |format: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_tracer"))
            .args(["summarize", "--format", format])
            .arg(tmp.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let v: serde_json::Value = serde_json::from_str(&summarize("json")).unwrap();
    let miss = v["near_misses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["errno"] == "ESRCH")
        .unwrap_or_else(|| panic!("no ESRCH near miss: {v:#}"));
    assert_eq!(miss["call_shape"], "kill(<pid>)");
    assert_eq!(
        miss["repeated_targets"],
        serde_json::json!([{ "call": format!("kill({pid})"), "runs": 3, "of": 3 }])
    );
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for (i, r) in runs.iter().enumerate() {
        let ci = &r["ci"];
        assert_eq!(ci["commit"], "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(ci["branch"], "main");
        assert_eq!(ci["job"], "test");
        assert_eq!(ci["attempt"], (i + 1).to_string());
        assert_eq!(
            ci["run_url"],
            format!(
                "https://github.example/team/app/actions/runs/7001/attempts/{}",
                i + 1
            )
        );
        // A date to the second, not the log's nanoseconds.
        let at = r["started_at"].as_str().unwrap();
        assert!(at.len() == 20 && at.ends_with('Z'), "{at}");
    }
    let md = summarize("md");
    assert!(
        md.contains(&format!("kill({pid}) in 3/3 runs: a hard-coded pid?")),
        "{md}"
    );
    assert!(
        md.contains("[run-1](https://github.example/team/app/actions/runs/7001/attempts/1)"),
        "{md}"
    );
}

/// A release tarball laid out as `cargo xtask dist` makes it, with this
/// build's tracer in it, under `srv/vVERSION/`; returns its SHA-256.
fn serve_release(srv: &Path, version: &str) -> String {
    let name = format!("tracer-{version}-x86_64-linux-musl");
    let dir = srv.join(format!("v{version}"));
    let stage = dir.join(&name);
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_tracer"), stage.join("tracer")).unwrap();
    std::fs::copy(repo().join("README.md"), stage.join("README.md")).unwrap();
    let tarball = dir.join(format!("{name}.tar.gz"));
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&dir)
        .arg(&name)
        .output()
        .unwrap();
    assert!(tar.status.success(), "{}", both(&tar));
    std::fs::remove_dir_all(&stage).unwrap();
    let sum = Command::new("sha256sum").arg(&tarball).output().unwrap();
    String::from_utf8_lossy(&sum.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// The GitHub Action as a job uses it, through ci/test/gha.py: by default it
/// installs the release its commit pins (ci/release.env: version, URL,
/// checksum) from a real HTTP server with a real tarball, verified first;
/// `version` + `sha256-x86_64` install another; a wrong pinned checksum
/// installs nothing and fails the step. The matrix legs upload distinct
/// artifacts without being told a name.
#[test]
fn the_action_installs_a_pinned_release_verified_first() {
    let tmp = tempfile::tempdir().unwrap();
    let srv = tmp.path().join("srv");
    let pinned = serve_release(&srv, "0.1.0");
    let other = serve_release(&srv, "0.2.0");
    let served = Served::dir(&srv);
    let base = format!("http://127.0.0.1:{}", served.port);
    // The action's own checkout, with ci/release.env pinning the served one.
    let src = tmp.path().join("src");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(repo().join("ci"))
        .arg(&src)
        .output()
        .unwrap();
    assert!(cp.status.success(), "{}", both(&cp));
    let pin = |sha: &str| {
        let env = std::fs::read_to_string(repo().join("ci/release.env")).unwrap();
        let env: String = env
            .lines()
            .map(|l| {
                if l.starts_with("TRACER_RELEASE_URL=") {
                    format!("TRACER_RELEASE_URL={base}\n")
                } else if l.starts_with("TRACER_RELEASE_SHA256_X86_64=") {
                    format!("TRACER_RELEASE_SHA256_X86_64={sha}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        std::fs::write(src.join("release.env"), env).unwrap();
    };
    let fixture = repo().join("tracer-user/tests/fixtures/seed000_group_kill.ndjson");
    let workflow = tmp.path().join("wf.yml");
    std::fs::write(
        &workflow,
        format!(
            r#"name: action test
on: push
jobs:
  pinned:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        leg: [a, b]
    steps:
      - id: tracer
        uses: OWNER/tracer/ci/github@<commit-sha>
        with:
          mode: install
      - run: |
          tracer --version
          test "$(command -v tracer)" = "${{{{ steps.tracer.outputs.tracer }}}}"
          tracer report {fixture} --output "$GITHUB_WORKSPACE/tracer-report" 2>/dev/null
      - uses: OWNER/tracer/ci/github@<commit-sha>
        if: always()
        with:
          mode: report
          fail-on: ''
  explicit:
    runs-on: ubuntu-latest
    steps:
      - uses: OWNER/tracer/ci/github@<commit-sha>
        with:
          mode: install
          version: 0.2.0
          sha256-x86_64: {other}
      - run: tracer --version
"#,
            fixture = fixture.display(),
        ),
    )
    .unwrap();
    let gha = |work: &Path| {
        std::fs::create_dir_all(work).unwrap();
        let result = work.join("result.json");
        let out = Command::new(python())
            .arg(repo().join("ci/test/gha.py"))
            .arg("--workflow")
            .arg(&workflow)
            .arg("--work")
            .arg(work)
            .arg("--result")
            .arg(&result)
            .arg("--action")
            .arg(format!(
                "OWNER/tracer/ci/github@<commit-sha>={}",
                src.join("github").display()
            ))
            .env("TMPDIR", work)
            .env_remove("TRACER_RELEASES")
            .output()
            .unwrap();
        let log = both(&out);
        let result: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&result).unwrap_or_default())
                .unwrap_or_else(|e| panic!("no result ({e}):\n{log}"));
        (result, log)
    };

    pin(&pinned);
    let work = tmp.path().join("good");
    let (r, log) = gha(&work);
    for job in ["pinned (a)", "pinned (b)", "explicit"] {
        assert_eq!(r[job]["conclusion"], "success", "{job}:\n{log}");
    }
    assert!(log.contains("downloading http://127.0.0.1:"), "{log}");
    assert!(
        log.contains("/v0.2.0/tracer-0.2.0-x86_64-linux-musl.tar.gz"),
        "{log}"
    );
    for name in ["tracer-report-pinned-1", "tracer-report-pinned-2"] {
        assert!(
            work.join("artifacts")
                .join(name)
                .join("report.json")
                .exists(),
            "no artifact {name}:\n{log}"
        );
    }

    // The pinned checksum off by one digit: nothing is installed.
    let wrong = format!(
        "{}{}",
        &pinned[..63],
        if pinned.ends_with('0') { '1' } else { '0' }
    );
    pin(&wrong);
    let (r, log) = gha(&tmp.path().join("bad"));
    let job = &r["pinned (a)"];
    assert_eq!(job["conclusion"], "failure", "{log}");
    let install = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "install" && s["outcome"] != "skipped")
        .unwrap_or_else(|| panic!("no install step:\n{log}"));
    assert_eq!(install["outcome"], "failure", "{log}");
    assert!(log.contains("checksum mismatch"), "{log}");
    let bin = std::path::PathBuf::from(job["temp"].as_str().unwrap()).join("tracer-bin/tracer");
    assert!(!bin.exists(), "installed despite the mismatch");
}

/// `tracer daemon --junit FILE`: written on the daemon's stop path, valid
/// ci/test/junit.xsd, naming the death the watched job had.
#[test]
fn the_daemon_writes_its_junit_file_when_it_stops() {
    use std::io::{BufRead, BufReader};
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let go = tmp.path().join("go");
    // The job: waits to be watched, then loses a worker to its sibling.
    let mut job = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while [ ! -e {go} ]; do sleep 0.05; done; sh {workload}",
            go = go.display(),
            workload = repo().join("ci/test/workload.sh").display()
        ))
        .current_dir(tmp.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let out = tmp.path().join("out");
    let junit = tmp.path().join("junit.xml");
    let mut daemon = Command::new(env!("CARGO_BIN_EXE_tracer"))
        .args(["daemon", "--root-pid", &job.id().to_string(), "--output"])
        .arg(&out)
        .arg("--junit")
        .arg(&junit)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(daemon.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("daemon watching") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "the daemon ended early"
        );
    }
    std::fs::write(&go, "").unwrap();
    assert!(job.wait().unwrap().success());
    assert!(!junit.exists(), "written before the stop");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    let status = daemon.wait().unwrap();
    assert!(status.success(), "{status}");
    let names = junit_py(true, &[junit]);
    assert!(
        names.contains("tracer.unexpected_death\tsleep <n> killed by SIGKILL from a sibling"),
        "{names}"
    );
    // Its own stop is not a foreign signal of the job.
    assert!(!names.contains("tracer.foreign_signal"), "{names}");
}

/// install.sh on runners of both architectures: a release's tarball is the
/// one for this machine (`uname -m`), with that architecture's checksum
/// (here TRACER_SHA256_X86_64 / TRACER_SHA256_AARCH64 for a `--version`);
/// the other architecture's is never fetched. A binary whose `--version`
/// names the other architecture (a mislabelled tarball) installs nothing.
#[test]
fn install_picks_the_tarball_for_this_machines_architecture() {
    let ours = std::env::consts::ARCH;
    let theirs = if ours == "x86_64" {
        "aarch64"
    } else {
        "x86_64"
    };
    let tmp = tempfile::tempdir().unwrap();
    let srv = tmp.path().join("srv");
    // `srv/v0.3.0/tracer-0.3.0-ARCH-linux-musl.tar.gz` holding `tracer`
    // (written by `put`); its SHA-256.
    let pack = |dir: &str, arch: &str, put: &dyn Fn(&Path)| -> String {
        let name = format!("tracer-0.3.0-{arch}-linux-musl");
        let stage = tmp.path().join("stage").join(dir).join(&name);
        std::fs::create_dir_all(&stage).unwrap();
        put(&stage.join("tracer"));
        let out = srv.join(dir);
        std::fs::create_dir_all(&out).unwrap();
        let tarball = out.join(format!("{name}.tar.gz"));
        let tar = Command::new("tar")
            .arg("-czf")
            .arg(&tarball)
            .arg("-C")
            .arg(stage.parent().unwrap())
            .arg(&name)
            .output()
            .unwrap();
        assert!(tar.status.success(), "{}", both(&tar));
        let sum = Command::new("sha256sum").arg(&tarball).output().unwrap();
        String::from_utf8_lossy(&sum.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_string()
    };
    let stub = |says: String| {
        move |p: &Path| {
            std::fs::write(p, format!("#!/bin/sh\necho '{says}'\n")).unwrap();
            std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
    };
    // Compared with the packed copy, not target/debug/tracer: another test
    // of this run may rebuild that while this one runs.
    let packed = tmp.path().join("packed-tracer");
    std::fs::copy(env!("CARGO_BIN_EXE_tracer"), &packed).unwrap();
    let ours_sha = pack("v0.3.0", ours, &|p: &Path| {
        std::fs::copy(&packed, p).unwrap();
    });
    // Never fetched: it would install a stand-in.
    let theirs_sha = pack(
        "v0.3.0",
        theirs,
        &stub(format!("tracer 0.3.0 ({theirs}-unknown-linux-musl)")),
    );
    // This machine's name on the other architecture's binary.
    let mislabelled = pack(
        "wrong",
        ours,
        &stub(format!(
            "tracer 0.3.0 ({theirs}-unknown-linux-musl, commit x)"
        )),
    );
    let served = Served::dir(&srv);
    let base = format!("http://127.0.0.1:{}", served.port);
    let sha_env = |arch: &str| format!("TRACER_SHA256_{}", arch.to_uppercase());
    let install = |args: &[&str], bin_dir: &Path| {
        Command::new(repo().join("ci/scripts/install.sh"))
            .args(args)
            .arg("--bin-dir")
            .arg(bin_dir)
            .env("TRACER_RELEASES", &base)
            .env(sha_env(ours), &ours_sha)
            .env(sha_env(theirs), &theirs_sha)
            .env_remove("TRACER_SHA256")
            .env_remove("GITHUB_PATH")
            .env_remove("GITHUB_OUTPUT")
            .output()
            .unwrap()
    };

    let good = tmp.path().join("good");
    let out = install(&["--version", "0.3.0"], &good);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        std::fs::read(good.join("tracer")).unwrap() == std::fs::read(&packed).unwrap(),
        "not this machine's tarball: {}",
        both(&out)
    );
    assert!(
        both(&out).contains(&format!("tracer-0.3.0-{ours}-linux-musl.tar.gz")),
        "{}",
        both(&out)
    );

    let wrong = tmp.path().join("wrong");
    let url = format!("{base}/wrong/tracer-0.3.0-{ours}-linux-musl.tar.gz");
    let out = install(&["--url", &url, "--sha256", &mislabelled], &wrong);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        both(&out).contains(&format!("is not built for {ours}")),
        "{}",
        both(&out)
    );
    assert!(!wrong.join("tracer").exists(), "left installed");
}
