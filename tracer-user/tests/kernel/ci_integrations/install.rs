//! Installing tracer as CI jobs do: install.sh from a URL, the GitHub
//! Action from a pinned release, each verified against its checksum first,
//! over a real local HTTP server.
use std::{path::Path, process::Command};

use super::{both, python, repo};

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
