//! Round 3, finding 2: install.sh's download directory in a TMPDIR another
//! user owns, swapped for theirs while the download runs (a slow server
//! holds the window open), and the one regular file that is both verified
//! and unpacked.
use std::{
    fs,
    os::unix::{fs::PermissionsExt, process::CommandExt},
    path::{Path, PathBuf},
    process::Command,
};

use super::{script, stderr, Trap, NOBODY};

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
