//! Hole 5: a command tracer runs as another user must not push keystrokes
//! into root's terminal (TIOCSTI). The test plays root's terminal with a
//! pty whose slave is the controlling terminal of tracer's session; the
//! command (as `nobody`) tries TIOCSTI on its stdin and on /dev/tty. A
//! control run shows the same attack does inject from a `nobody` process
//! sharing root's session, so the check below can fail.
use std::{
    os::{
        fd::{AsRawFd, OwnedFd},
        unix::process::CommandExt,
    },
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use nix::{
    poll::{poll, PollFd, PollFlags, PollTimeout},
    sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg},
};

use crate::common::*;

/// Tries to take the terminal (TIOCSCTTY), then TIOCSTI on fd 0 and on
/// /dev/tty, and reports each result; then,
/// when asked, reads one line from the terminal and echoes it (interactive
/// use must keep working).
const INJECT: &str = r#"
import errno, fcntl, os, sys, termios
def inject(fd):
    try:
        for b in b"id\n":
            fcntl.ioctl(fd, termios.TIOCSTI, bytes([b]))
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
try:
    # The next step of an attack: make the inherited terminal its own.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    ctty = "ok"
except OSError as e:
    ctty = errno.errorcode[e.errno]
r0 = inject(0)
try:
    rt = inject(os.open("/dev/tty", os.O_RDWR))
except OSError as e:
    rt = "open-" + errno.errorcode[e.errno]
print(f"uid={os.getuid()} sctty={ctty} fd0={r0} tty={rt} ready", flush=True)
if sys.argv[1] == "interactive":
    print("got " + sys.stdin.readline().strip(), flush=True)
"#;

/// A pty in raw mode (injected bytes are readable at once, nothing echoes).
fn pty() -> (OwnedFd, OwnedFd) {
    let p = nix::pty::openpty(None, None).unwrap();
    let mut t = tcgetattr(&p.slave).unwrap();
    cfmakeraw(&mut t);
    tcsetattr(&p.slave, SetArg::TCSANOW, &t).unwrap();
    (p.master, p.slave)
}

/// `cmd` as the session leader of a new session whose controlling terminal
/// is `slave` (stdin, stdout and stderr too): root's shell on that terminal.
fn on_terminal(mut cmd: Command, slave: &OwnedFd) -> std::process::Child {
    for set in [Command::stdin, Command::stdout, Command::stderr] {
        set(&mut cmd, Stdio::from(slave.try_clone().unwrap()));
    }
    // SAFETY: setsid and ioctl only, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

/// Read from the master until a line containing `needle`; returns it.
fn line_with(master: &OwnedFd, seen: &mut String, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(l) = seen.lines().find(|l| l.contains(needle)) {
            return l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no `{needle}` on the terminal; it showed:\n{seen}"
        );
        let mut fds = [PollFd::new(
            std::os::fd::AsFd::as_fd(master),
            PollFlags::POLLIN,
        )];
        if poll(&mut fds, PollTimeout::from(200u16)).unwrap() > 0 {
            let mut b = [0u8; 4096];
            let n = nix::unistd::read(master, &mut b).unwrap_or(0);
            seen.push_str(&String::from_utf8_lossy(&b[..n]));
        }
    }
}

/// Bytes waiting in the terminal's input queue: what root's shell would
/// read next.
fn input_queued(slave: &OwnedFd) -> i32 {
    let mut n: libc::c_int = 0;
    assert_eq!(
        // SAFETY: FIONREAD writes one c_int into `n`, which outlives the call.
        unsafe { libc::ioctl(slave.as_raw_fd(), libc::FIONREAD, &mut n) },
        0
    );
    n
}

fn legacy_tiocsti() -> bool {
    // Absent before 6.2: TIOCSTI was always allowed then.
    std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti").map_or(true, |v| v.trim() != "0")
}

#[test]
fn a_command_run_as_another_user_cannot_type_into_roots_terminal() {
    require_root();
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();

    // Control: `nobody` in root's session, as the command used to be.
    let (master, slave) = pty();
    let mut control = Command::new("sh");
    control.args([
        "-c",
        "setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 -c \"$1\" control",
        "sh",
        INJECT,
    ]);
    let mut child = on_terminal(control, &slave);
    let mut seen = String::new();
    let line = line_with(&master, &mut seen, "ready");
    child.wait().unwrap();
    assert!(line.contains(&format!("uid={}", nobody.uid)), "{line}");
    if legacy_tiocsti() {
        assert!(
            line.contains("fd0=ok"),
            "the control could not inject: {line}"
        );
        assert!(
            input_queued(&slave) >= 3,
            "the control's keystrokes are queued"
        );
    } else {
        // The kernel refuses TIOCSTI to everyone without CAP_SYS_ADMIN here;
        // what follows still proves the command has no controlling terminal.
        assert!(line.contains("fd0=EIO"), "{line}");
    }
    drop((master, slave));

    // The attack under tracer.
    let (master, slave) = pty();
    let tmp = tempfile::tempdir().unwrap();
    let cmd = record_command(
        tmp.path(),
        &["--user", "nobody"],
        &["/usr/bin/python3", "-c", INJECT, "interactive"],
    );
    let mut tracer = on_terminal(cmd, &slave);
    let mut seen = String::new();
    let line = line_with(&master, &mut seen, "ready");
    let queued = input_queued(&slave);
    // Interactive use still works: the command reads what is typed.
    nix::unistd::write(&master, b"hello\n").unwrap();
    // (Had the injection worked, the command would read its own "id".)
    let got = line_with(&master, &mut seen, "got ");
    let status = tracer.wait().unwrap();
    assert_eq!(queued, 0, "keystrokes reached root's terminal: {line}");
    assert_eq!(got.trim(), "got hello", "{seen}");
    assert_eq!(status.code(), Some(0), "{seen}");
    assert!(line.contains(&format!("uid={}", nobody.uid)), "{line}");
    // Refused for the right reason: the terminal is not the command's
    // controlling one, and it has none to open.
    assert!(line.contains("sctty=EPERM"), "{line}");
    assert!(line.contains("fd0=EPERM"), "{line}");
    assert!(line.contains("tty=open-ENXIO"), "{line}");
}

/// Root's own command (`--user root`) keeps the terminal and its job
/// control, as before: only a change of user detaches.
#[test]
fn a_root_command_keeps_the_terminal() {
    require_root();
    let (master, slave) = pty();
    let tmp = tempfile::tempdir().unwrap();
    let cmd = record_command(
        tmp.path(),
        &["--user", "root"],
        &[
            "sh",
            "-c",
            r#"[ "$(ps -o tpgid= -p $$)" -eq "$(ps -o pgid= -p $$)" ] && echo foreground-ready || echo background-ready"#,
        ],
    );
    let mut tracer = on_terminal(cmd, &slave);
    let mut seen = String::new();
    let line = line_with(&master, &mut seen, "-ready");
    tracer.wait().unwrap();
    assert!(line.contains("foreground-ready"), "{seen}");
}
