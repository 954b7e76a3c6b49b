//! Hole 9: the run's user reads the snapshots (the report is handed to
//! them). A process of the run running as root (here a setuid-root copy of
//! sleep, started by the unprivileged command) must not give them its
//! kernel stacks, syscall registers, executable or open files; the
//! snapshot says they were withheld. The user's own processes keep theirs.
use std::{os::unix::fs::PermissionsExt, process::Stdio};

use nix::{
    sys::signal::{kill, Signal},
    unistd::Pid,
};
use tracer_user::{
    eventlog::read_log,
    snapshot::{Snapshot, SyscallState},
};

use crate::common::*;

/// A directory `nobody` can enter holding a setuid-root copy of sleep, and
/// a shell line that starts it and waits (10 s at most) until the kernel
/// shows it as root (effective uid, the 3rd field of Uid:), then prints
/// `ready setuid=PID`.
fn setuid_sleep() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    // nobody must reach the setuid binary; the output stays root's.
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let rootsleep = tmp.path().join("rootsleep");
    std::fs::copy("/usr/bin/sleep", &rootsleep).unwrap();
    std::fs::set_permissions(&rootsleep, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let start = format!(
        r#"{} 300 & p=$!
n=0; until awk '/^Uid:/ {{ exit !($3 == 0) }}' /proc/$p/status 2>/dev/null || [ $n = 1000 ]; do
  sleep 0.01; n=$((n+1)); done
echo "ready setuid=$p""#,
        rootsleep.display()
    );
    (tmp, start)
}

#[test]
fn snapshot_withholds_a_setuid_process_from_the_runs_user() {
    require_root();
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    let (tmp, start) = setuid_sleep();
    let out = tmp.path().join("out");
    let script = format!("{start}; wait");
    let mut cmd = record_command(&out, &["--user", "nobody"], &["sh", "-c", &script]);
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    let (tracer, words) = spawn_ready(cmd);
    let setuid: u32 = words
        .strip_prefix("setuid=")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{words:?}"));
    // A CI cancellation: snapshot, then the run is ended.
    kill(Pid::from_raw(tracer.id() as i32), Signal::SIGTERM).unwrap();
    let status = tracer.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&status.stderr);

    let log = read_log(&out.join("events.ndjson")).unwrap();
    let snap: &Snapshot = log
        .events
        .iter()
        .snapshots()
        .find(|s| s.reason == "cancelled")
        .map(|s| &s.snapshot)
        .unwrap_or_else(|| panic!("no cancellation snapshot; tracer said:\n{stderr}"));
    let proc_ = |pid: u32| {
        snap.processes
            .iter()
            .find(|p| p.pid == pid)
            .unwrap_or_else(|| panic!("pid {pid} not in the snapshot: {snap:#?}"))
    };

    let root = proc_(setuid);
    let why = root
        .withheld
        .as_deref()
        .expect("the setuid process is marked withheld");
    assert!(
        why.contains("uid 0") && why.contains(&format!("uid {}", nobody.uid)),
        "{why}"
    );
    assert!(root.fds.is_empty(), "{:?}", root.fds);
    assert_eq!(root.exe, None);
    assert!(
        !root.threads.is_empty(),
        "threads are listed, by state only"
    );
    for t in &root.threads {
        assert!(t.stack.is_empty() && t.wchan.is_none(), "{t:?}");
        assert_eq!(t.syscall, SyscallState::Unknown, "{t:?}");
    }
    // argv is anyone's to read in /proc: kept.
    assert_eq!(root.argv.last().map(String::as_str), Some("300"));

    // The command is nobody's: everything is there (it sits in wait4, with
    // its fds and executable).
    let sh = snap
        .processes
        .iter()
        .find(|p| p.argv.first().map(String::as_str) == Some("sh"))
        .expect("the command in the snapshot");
    assert_eq!(sh.withheld, None);
    assert!(!sh.fds.is_empty() && sh.exe.is_some(), "{sh:#?}");
    assert!(
        sh.threads
            .iter()
            .any(|t| matches!(t.syscall, SyscallState::Syscall { .. })),
        "{sh:#?}"
    );
    assert!(
        snap.notes
            .iter()
            .any(|n| n.contains("withheld") && n.contains(&setuid.to_string())),
        "{:?}",
        snap.notes
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("withheld: runs as uid 0"), "{md}");
}

/// The same for a leak: a setuid process the command leaves behind is
/// logged without its executable and open files; the user's own leak keeps
/// them.
#[test]
fn leak_record_withholds_a_setuid_process_from_the_runs_user() {
    let (_tmp, start) = setuid_sleep();
    // Also the user's own process made non-dumpable (as ssh-agent does):
    // /proc refuses its details to the user too. Named once /proc/PID/fd
    // is root's (the kernel's mark of it).
    let script = format!(
        r#"sleep 300 & echo "own $!"
/usr/bin/python3 -c 'import ctypes, time; ctypes.CDLL(None).prctl(4, 0); time.sleep(300)' & u=$!
n=0; until [ "$(stat -c %u /proc/$u/fd)" = 0 ] || [ $n = 1000 ]; do sleep 0.01; n=$((n+1)); done
echo "undumpable $u"
unshare -r sleep 300 & echo "rootless $!"
{start}"#
    );
    let r = record(
        &["--user", "nobody", "--leaks", "kill", "--leak-grace", "1s"],
        &["sh", "-c", &script],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let stdout = String::from_utf8_lossy(&r.output.stdout).into_owned();
    let pid_of = |word: &str| -> u32 {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(word)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no `{word}` in {stdout:?}"))
    };
    let (own, setuid) = (pid_of("own "), pid_of("ready setuid="));
    let undumpable = pid_of("undumpable ");
    let leak = |pid: u32| {
        r.events()
            .leaks()
            .find(|l| l.task.pid == pid)
            .cloned()
            .unwrap_or_else(|| panic!("no leak record for pid {pid}"))
    };
    let root = leak(setuid);
    let why = root.withheld.as_deref().expect("marked withheld");
    assert!(why.starts_with("runs as uid 0"), "{why}");
    assert!(root.fds.is_empty() && root.exe.is_none(), "{root:?}");
    let agent = leak(undumpable);
    let why = agent.withheld.as_deref().expect("marked withheld");
    assert!(why.starts_with("is not dumpable"), "{why}");
    assert!(agent.fds.is_empty() && agent.exe.is_none(), "{agent:?}");
    // Full capabilities, but in a user namespace the user made: theirs.
    let (mine, rootless) = (leak(own), leak(pid_of("rootless ")));
    for l in [&mine, &rootless] {
        assert_eq!(l.withheld, None, "{l:?}");
        assert!(!l.fds.is_empty() && l.exe.is_some(), "{l:?}");
    }
}

/// A crasher whose frames name a function of its own.
const ROOT_CRASH: &str = r#"
static volatile int sink;
__attribute__((noinline)) int deep_in_the_setuid_program(int *p) { return *p * 3; }
int main(int argc, char **argv) {
    int r = deep_in_the_setuid_program(argc > 5 ? &argc : 0);
    sink = r;
    return 0;
}
"#;

/// Round 4, finding 7: a setuid-root program the command runs (`passwd`
/// could be one) crashes: its crash stack (addresses, modules, names, the
/// fault address) was in the run's user's log and reports, though /proc
/// refuses that user its maps and memory, and snapshots and leak records
/// already withheld as much. Now it is withheld and says why; the same
/// program without the setuid bit, the control, keeps its stack.
#[test]
fn a_setuid_programs_crash_stack_is_withheld_from_the_runs_user() {
    use tracer_user::eventlog::CrashStack;
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin =
        crate::common::native::compile(tmp.path(), "rootcrash", "c", ROOT_CRASH, &["-O0", "-g"]);
    let crash_of = |r: &Recorded| -> CrashStack {
        r.events()
            .crash_stacks()
            .next()
            .cloned()
            .unwrap_or_else(|| panic!("no crash_stack: {}", r.stderr()))
    };
    let everything = |r: &Recorded| -> String {
        ["events.ndjson", "report.json", "report.md", "report.html"]
            .iter()
            .map(|f| std::fs::read_to_string(r.path(f)).unwrap())
            .collect()
    };
    // The control: the user's own program keeps its stack.
    let own = record(&["--user", "nobody"], &[bin.to_str().unwrap()]);
    assert_eq!(own.code(), Some(139), "{}", own.stderr());
    let c = crash_of(&own);
    assert!(c.withheld.is_none(), "{c:#?}");
    assert!(
        everything(&own).contains("deep_in_the_setuid_program"),
        "{c:#?}"
    );

    // Setuid root: the kernel runs it as root for nobody.
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let r = record(&["--user", "nobody"], &[bin.to_str().unwrap()]);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let c = crash_of(&r);
    let why = c.withheld.clone().unwrap_or_default();
    assert!(why.contains("uid 0"), "not withheld: {c:#?}");
    assert!(c.frames.is_empty() && c.fault_addr.is_none(), "{c:#?}");
    let text = everything(&r);
    assert!(
        !text.contains("deep_in_the_setuid_program"),
        "the setuid program's stack reached the run's files"
    );
}
