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
    // The planted links are as they were: nothing followed or replaced them.
    for entry in fs::read_dir(&planted).unwrap() {
        let p = entry.unwrap().path();
        assert_eq!(fs::read_link(&p).unwrap(), precious, "{p:?}");
    }
    t.assert_untouched();
    fs::remove_dir_all(&state).unwrap();
}

/// A release server on 127.0.0.1 that takes `delay` before it answers, as
/// a real download of a release takes seconds: the window the attacker
/// uses. Every request gets `body`.
struct SlowServer {
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowServer {
    fn start(body: Vec<u8>, delay: std::time::Duration) -> SlowServer {
        use std::io::{BufRead, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(std::sync::atomic::Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut conn) = conn else { continue };
                    let mut r = std::io::BufReader::new(conn.try_clone().unwrap());
                    let mut line = String::new();
                    while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                        line.clear();
                    }
                    std::thread::sleep(delay);
                    let _ = write!(
                        conn,
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(&body);
                }
            })
        };
        SlowServer {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SlowServer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The attacker. `swap TMPDIR GENUINE EVIL`, as `nobody`: waits for
/// install.sh's download directory in TMPDIR, renames it away and puts one
/// of its own in its place holding a FIFO under the download's name, drains
/// what curl writes into it, then feeds the genuine release to the checksum
/// and its own tarball to tar. `feed FIFO GENUINE EVIL`: only the feeding,
/// into a FIFO made already. Gives up after 20 s.
const SWAP_AND_FEED: &str = r#"
import os, sys, time
mode, where, genuine, evil = sys.argv[1:5]
deadline = time.time() + 20


def wait():
    if time.time() > deadline:
        sys.exit("gave up")
    time.sleep(0.001)


if mode == "swap":
    while True:
        names = [n for n in os.listdir(where) if n.startswith("tracer-dl.")]
        if names:
            break
        wait()
    d = os.path.join(where, names[0])
    try:
        os.rename(d, d + ".moved")
    except OSError as e:
        print("swap refused:", e, flush=True)
        sys.exit(3)
    os.mkdir(d)
    os.chmod(d, 0o777)
    fifo = os.path.join(d, "download")
    os.mkfifo(fifo)
    os.chmod(fifo, 0o666)
    print("swapped", flush=True)
    with open(fifo, "rb") as f:
        while f.read(1 << 16):
            pass
else:
    fifo = where


def next_reader():
    # Opening a FIFO to write fails (ENXIO) while no one reads it: wait
    # until the next reader (sha256sum, then tar) has it open.
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            wait()
            continue
        os.set_blocking(fd, True)
        return fd


def no_reader():
    # The last reader is gone once opening to write fails again.
    while True:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            return
        wait()


for payload in (genuine, evil):
    fd = next_reader()
    os.write(fd, open(payload, "rb").read())
    os.close(fd)
    no_reader()
print("fed", flush=True)
"#;

/// A release tarball of `cargo xtask dist`'s layout whose `tracer` is `script`.
fn tarball(dir: &Path, name: &str, script: &str) -> PathBuf {
    let stage = dir.join(name).join("tracer-0.1.0-x86_64-linux-musl");
    fs::create_dir_all(&stage).unwrap();
    fs::write(stage.join("tracer"), script).unwrap();
    fs::set_permissions(stage.join("tracer"), fs::Permissions::from_mode(0o755)).unwrap();
    let out = dir.join(format!("{name}.tar.gz"));
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(&out)
        .arg("-C")
        .arg(dir.join(name))
        .arg("tracer-0.1.0-x86_64-linux-musl")
        .output()
        .unwrap();
    assert!(tar.status.success(), "{}", stderr(&tar));
    fs::set_permissions(&out, fs::Permissions::from_mode(0o644)).unwrap();
    out
}

fn sha256(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// Round 3, finding 2: install.sh run as root with a TMPDIR another user
/// can write (here theirs: sticky, but the owner of a sticky directory may
/// rename anything in it). They swapped the download directory for theirs
/// with a FIFO under the download's name: sha256sum read the genuine bytes
/// through it and tar their tarball, and their `tracer` ran as root (5/5).
/// Now the download directory gets the bin directory's checks (ours, 0700,
/// no directory above it that another user can change), so such a TMPDIR
/// is refused before anything is downloaded; in a safe TMPDIR (root's,
/// sticky) the same attacker cannot move the directory and the genuine
/// release is installed.
#[test]
fn install_never_unpacks_what_another_user_fed_through_the_download_dir() {
    let t = Trap::new();
    let files = t.planted_dir("attacker-files");
    let genuine = tarball(
        &files,
        "genuine",
        "#!/bin/sh\necho 'tracer 0.1.0 (genuine)'\n",
    );
    let evil = tarball(
        &files,
        "evil",
        &format!(
            "#!/bin/sh\ntouch '{}'\necho 'tracer 0.1.0'\n",
            t.marker().display()
        ),
    );
    let sha = sha256(&genuine);
    let server = SlowServer::start(
        fs::read(&genuine).unwrap(),
        std::time::Duration::from_secs(1),
    );
    let url = format!(
        "http://127.0.0.1:{}/tracer-0.1.0-x86_64-linux-musl.tar.gz",
        server.port
    );
    let theirs = t.planted_dir("nobody-tmp");
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o1777)).unwrap();

    for (tmpdir, safe) in [(theirs.clone(), false), (t.tmp.clone(), true)] {
        let mut attacker = Command::new("python3")
            .args(["-c", SWAP_AND_FEED, "swap"])
            .arg(&tmpdir)
            .arg(&genuine)
            .arg(&evil)
            .uid(NOBODY)
            .gid(NOBODY)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let bin = t.private.join(if safe { "bin-safe" } else { "bin-theirs" });
        let mut c = Command::new(script("install.sh"));
        for var in [
            "RUNNER_TEMP",
            "TRACER_BIN_DIR",
            "TRACER_BINARY",
            "GITHUB_OUTPUT",
            "GITHUB_PATH",
        ] {
            c.env_remove(var);
        }
        let out = c
            .env("TMPDIR", &tmpdir)
            .current_dir(&t.private)
            .args(["--url", &url, "--sha256", &sha, "--bin-dir"])
            .arg(&bin)
            .output()
            .unwrap();
        // Our own child, by its handle: it may still wait on its FIFO.
        let _ = attacker.kill();
        let said = attacker.wait_with_output().unwrap();
        let said = String::from_utf8_lossy(&said.stdout).into_owned()
            + &String::from_utf8_lossy(&said.stderr);
        let err = stderr(&out);
        assert!(
            !t.marker().exists(),
            "the attacker's tracer ran as root (TMPDIR {tmpdir:?}); attacker: {said}; install.sh: {err}"
        );
        if safe {
            assert!(out.status.success(), "{err}");
            assert!(said.contains("swap refused"), "attacker: {said}");
            let installed = fs::read_to_string(bin.join("tracer")).unwrap();
            assert!(installed.contains("genuine"), "{installed}");
        } else {
            assert!(!out.status.success(), "installed from {tmpdir:?}: {err}");
            assert!(err.contains("can be changed by another user"), "{err}");
            assert_eq!(
                err.lines().filter(|l| l.contains("error")).count(),
                1,
                "{err}"
            );
            assert!(
                !bin.join("tracer").exists(),
                "something was installed: {err}"
            );
        }
    }
    t.assert_untouched();
}

/// The second layer: whatever is at the download's name when curl is done
/// must be a regular file, and the one file opened then is what is both
/// verified and unpacked. A `curl` that leaves a FIFO there (a stand-in for
/// any way the name stops naming the downloaded file) once got sha256sum
/// the genuine bytes and tar the evil ones, as above; now it is refused
/// before anything reads it.
#[test]
fn install_verifies_and_unpacks_one_regular_file() {
    let t = Trap::new();
    let files = t.private.join("files");
    fs::create_dir(&files).unwrap();
    let genuine = tarball(
        &files,
        "genuine",
        "#!/bin/sh\necho 'tracer 0.1.0 (genuine)'\n",
    );
    let evil = tarball(
        &files,
        "evil",
        &format!(
            "#!/bin/sh\ntouch '{}'\necho 'tracer 0.1.0'\n",
            t.marker().display()
        ),
    );
    let feed = files.join("feed.py");
    fs::write(&feed, SWAP_AND_FEED).unwrap();
    let fake = t.private.join("fakebin");
    fs::create_dir(&fake).unwrap();
    let curl = format!(
        "#!/bin/sh\n\
         while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2 ;; *) shift ;; esac; done\n\
         mkfifo \"$out\"\n\
         python3 '{}' feed \"$out\" '{}' '{}' </dev/null >/dev/null 2>&1 &\n",
        feed.display(),
        genuine.display(),
        evil.display()
    );
    fs::write(fake.join("curl"), curl).unwrap();
    fs::set_permissions(fake.join("curl"), fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", fake.display(), std::env::var("PATH").unwrap());

    let bin = t.private.join("bin");
    let out = t.run(
        "install.sh",
        &[
            "--url",
            "http://127.0.0.1:9/tracer-0.1.0-x86_64-linux-musl.tar.gz",
            "--sha256",
            &sha256(&genuine),
            "--bin-dir",
            bin.to_str().unwrap(),
        ],
        &[("PATH", &path)],
    );
    let err = stderr(&out);
    assert!(
        !t.marker().exists(),
        "the FIFO's tarball ran as root: {err}"
    );
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is not a regular file"), "{err}");
    assert!(
        !bin.join("tracer").exists(),
        "something was installed: {err}"
    );
    t.assert_untouched();
}
