//! Interpreters: their own words lead; a native module is named.
use super::*;

/// Python's `ctypes.string_at(0)` faults in libc (strlen, under ctypes):
/// the interpreter's headline stays its own and names the native module
/// the fault fell in; with faulthandler on, Python's own words lead
/// (its last words quote "Fatal Python error") and no module is named.
#[test]
fn a_python_native_crash_names_its_module_unless_faulthandler_speaks() {
    assert!(
        have("python3"),
        "python3 is needed: the kernel tests fail rather than skip"
    );
    let cmd = ["python3", "-c", "import ctypes; ctypes.string_at(0)"];
    let r = record(&[], &cmd);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let h = headline(&r);
    assert!(
        h.contains("crashed: SIGSEGV (SEGV_MAPERR)") && h.contains(", in native module libc.so.6"),
        "{h}\n{:#?}",
        the_crash(&r)
    );
    let r = record_env(&[], &cmd, &[("PYTHONFAULTHANDLER", "1")]);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let h = headline(&r);
    assert!(!h.contains("native module"), "{h}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap();
    assert!(
        json["certificates"][0]
            .to_string()
            .contains("Fatal Python error"),
        "{json:#}"
    );
    // `--runtime-stacks` turns faulthandler on for the command, and the
    // header says so.
    let r = record(&["--runtime-stacks"], &cmd);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let h = headline(&r);
    assert!(!h.contains("native module"), "{h}");
    let changes = &r.log.header.env_changes;
    assert!(
        changes
            .iter()
            .any(|c| c.var == "PYTHONFAULTHANDLER" && c.new == "1" && c.old.is_none()),
        "{changes:?}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap();
    assert!(json.to_string().contains("Fatal Python error"), "{json:#}");
}

/// JIT code as a runtime makes it: a function copied into anonymous
/// executable memory (with a frame pointer, as V8's and the JVM's frames
/// have), named in the process's perf map `/tmp/perf-PID.map` (mode
/// `write`), or the map a symbolic link to `argv[2]` (mode `link`), or a
/// FIFO (mode `fifo`: it says `ready PID` and waits for a line); then
/// called from `run_compiled`, and it faults on NULL.
const JIT: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
static volatile int sink;
#if defined(__x86_64__)
/* push rbp; mov rbp,rsp; mov eax,[0]; pop rbp; ret */
static const unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0x8b, 0x04, 0x25, 0, 0, 0, 0, 0x5d, 0xc3};
#elif defined(__aarch64__)
/* stp x29,x30,[sp,#-16]!; mov x29,sp; mov x0,#0; ldr w0,[x0]; ldp x29,x30,[sp],#16; ret */
static const unsigned int code[] = {0xa9bf7bfd, 0x910003fd, 0xd2800000, 0xb9400000, 0xa8c17bfd, 0xd65f03c0};
#endif
__attribute__((noinline)) int run_compiled(int (*fn)(void)) { int r = fn(); sink = r; return r + 1; }
int main(int argc, char **argv) {
    void *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 2;
    memcpy(p, code, sizeof code);
    __builtin___clear_cache((char *)p, (char *)p + sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    if (argc > 2 && strcmp(argv[1], "link") == 0) {
        if (symlink(argv[2], path) != 0) return 3;
    } else if (argc > 1 && strcmp(argv[1], "fifo") == 0) {
        char line[8];
        if (mkfifo(path, 0600) != 0) return 3;
        printf("ready %d\n", getpid());
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin)) return 4;
    } else {
        FILE *f = fopen(path, "w");
        if (!f) return 3;
        fprintf(f, "%lx %zx JS:*parseHeader /srv/app/parse.js:42\n", (unsigned long)p, sizeof code);
        fclose(f);
    }
    int r = run_compiled((int (*)(void))p);
    sink = r;
    return 0;
}
"#;

/// The perf map a crashed process wrote, removed (its pid from the crash).
fn remove_perf_map(c: &CrashStack) {
    let _ = std::fs::remove_file(format!("/tmp/perf-{}.map", c.task.pid));
}

/// A fault in JIT code is named from the perf map the process wrote (as
/// Node writes it under `--perf-basic-prof-only-functions`), its caller
/// from the binary; the stack is not "module unknown".
#[test]
fn a_fault_in_jit_code_is_named_from_the_processs_perf_map() {
    let dir = tempfile::tempdir().unwrap();
    let bin = compile(dir.path(), "jit", "c", JIT, &["-O2", "-g"]);
    let r = record(&[], &[bin.to_str().unwrap(), "write"]);
    let c = the_crash(&r);
    remove_perf_map(c);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let top = &c.frames[0];
    assert!(top.jit, "{c:#?}");
    assert_eq!(
        top.symbol.as_deref(),
        Some("JS:*parseHeader /srv/app/parse.js:42")
    );
    assert_eq!(
        top.module.as_deref(),
        Some(format!("/tmp/perf-{}.map", c.task.pid).as_str())
    );
    assert_calls(
        c,
        &[
            "JS:*parseHeader /srv/app/parse.js:42",
            "run_compiled",
            "main",
        ],
    );
    assert_ne!(c.completeness, StackCompleteness::ModuleUnknown, "{c:#?}");
    let h = headline(&r);
    assert!(h.contains("in JS:*parseHeader"), "{h}");
}

/// The attack: a command running as nobody makes its perf map a symbolic
/// link to a file only root can read (this machine follows links in
/// /tmp: fs.protected_symlinks is 0) whose one line names every address.
/// tracer, root, does not follow it: the secret name is nowhere in the
/// run's files, and the JIT frame keeps its address.
#[test]
fn a_perf_map_linked_to_a_root_only_file_is_not_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = compile(dir.path(), "jit", "c", JIT, &["-O2"]);
    let private = tempfile::tempdir().unwrap();
    let secret = private.path().join("secret.map");
    std::fs::write(&secret, "0 ffffffffffffff root_only_secret_name\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let r = record(
        &["--user", "nobody"],
        &[bin.to_str().unwrap(), "link", secret.to_str().unwrap()],
    );
    let c = the_crash(&r);
    remove_perf_map(c);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    assert!(!c.frames[0].jit && c.frames[0].symbol.is_none(), "{c:#?}");
    for file in ["events.ndjson", "report.json", "report.md", "report.html"] {
        let text = std::fs::read_to_string(r.path(file)).unwrap();
        assert!(!text.contains("root_only_secret_name"), "{file} has it");
    }
}

/// Node under `--runtime-stacks`: V8 writes its perf map, and the stack of
/// a `process.abort()` from a JS function names that function
/// (`JS:^crashHere [eval]:1:…`: its baseline code, compiled at its first
/// call under `--always-sparkplug`; left to V8's own tiering, whether a
/// function is compiled before it aborts is V8's choice) between node's
/// own frames; the header lists the NODE_OPTIONS change.
#[test]
fn node_under_runtime_stacks_names_its_jit_frames() {
    assert!(
        have("node"),
        "node is needed: the kernel tests fail rather than skip"
    );
    let script = "function crashHere() { process.abort() } crashHere()";
    let r = record(
        &["--runtime-stacks"],
        &["node", "--always-sparkplug", "-e", script],
    );
    let c = the_crash(&r);
    remove_perf_map(c);
    assert_eq!(r.code(), Some(134), "{}", r.stderr());
    let map = format!("/tmp/perf-{}.map", c.task.pid);
    let named = |f: &tracer_user::eventlog::CrashFrame, what: &str| {
        f.symbol.as_deref().is_some_and(|s| s.contains(what))
    };
    let jit = c
        .frames
        .iter()
        .position(|f| f.jit && named(f, "crashHere"))
        .unwrap_or_else(|| panic!("no JIT frame of crashHere: {c:#?}"));
    assert_eq!(c.frames[jit].module.as_deref(), Some(map.as_str()));
    // node's own frames inside it: the abort it called.
    let abort = c.frames.iter().position(|f| named(f, "node::Abort"));
    assert!(abort.is_some_and(|a| a < jit), "{c:#?}");
    let changes = &r.log.header.env_changes;
    assert!(
        changes
            .iter()
            .any(|c| c.var == "NODE_OPTIONS" && c.new.contains("--perf-basic-prof-only-functions")),
        "{changes:?}"
    );
}

/// A daemon starts no command: `--runtime-stacks` is refused before
/// anything loads, with the variables to set in the job instead.
#[test]
fn daemon_runtime_stacks_is_refused_with_what_to_do() {
    let err = crate::common::daemon_refuses("--runtime-stacks");
    assert!(
        err.contains("daemon --runtime-stacks") && err.contains("PYTHONFAULTHANDLER=1"),
        "{err}"
    );
}

/// The attack of round 4: the command puts something that is not a file
/// under its perf map's name (a FIFO here; in a user and mount namespace of
/// its own it can bind-mount any host device node there, and a device's
/// open has effects: `/dev/watchdog` arms a reboot). tracer, root, opened
/// it for reading before checking its type (inotify saw the open and its
/// close, 5 of 5); now it is opened `O_PATH`, checked, and never opened
/// for reading. The JIT frame keeps its address.
#[test]
fn a_perf_map_that_is_not_a_file_is_never_opened_for_reading() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = compile(dir.path(), "jit", "c", JIT, &["-O2"]);
    let out = tempfile::tempdir().unwrap();
    let mut child = record_command(
        out.path(),
        &["--user", "nobody"],
        &[bin.to_str().unwrap(), "fifo"],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut said = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    let pid: u32 = said
        .strip_prefix("ready ")
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("the crasher said {said:?}"));
    let map = format!("/tmp/perf-{pid}.map");
    let watch = OpenWatch::on(&map);
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let status = child.wait().unwrap();
    let seen = watch.events();
    let _ = std::fs::remove_file(&map);
    assert_eq!(status.code(), Some(139));
    let r = Recorded::read(
        out,
        std::process::Output {
            status,
            stdout: Vec::new(),
            stderr: Vec::new(),
        },
    );
    let c = the_crash(&r);
    assert_eq!(c.task.pid, pid);
    assert!(!c.frames[0].jit, "{c:#?}");
    assert_eq!(seen, (0, 0), "(opens, closes) of the FIFO by tracer");
}

/// An inotify watch for opens and read-only closes of one file.
struct OpenWatch(std::os::fd::OwnedFd);

impl OpenWatch {
    fn on(path: &str) -> Self {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscalls; the fd is owned below.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(
            fd >= 0,
            "inotify_init1: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: a fresh fd, owned by nothing else.
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let c = std::ffi::CString::new(path).unwrap();
        // SAFETY: a valid fd and NUL-terminated path.
        let wd = unsafe {
            libc::inotify_add_watch(
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                c.as_ptr(),
                libc::IN_OPEN | libc::IN_CLOSE_NOWRITE | libc::IN_DONT_FOLLOW,
            )
        };
        assert!(
            wd >= 0,
            "inotify_add_watch {path}: {}",
            std::io::Error::last_os_error()
        );
        Self(fd)
    }

    /// (opens, read-only closes) seen so far.
    fn events(&self) -> (usize, usize) {
        use std::io::Read;
        let mut buf = vec![0u8; 64 << 10];
        let mut f = std::fs::File::from(self.0.try_clone().unwrap());
        let n = f.read(&mut buf).unwrap_or(0);
        let (mut opens, mut closes, mut at) = (0, 0, 0);
        let header = std::mem::size_of::<libc::inotify_event>();
        while at + header <= n {
            // SAFETY: the kernel wrote whole events; read unaligned.
            let ev: libc::inotify_event =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            opens += usize::from(ev.mask & libc::IN_OPEN != 0);
            closes += usize::from(ev.mask & libc::IN_CLOSE_NOWRITE != 0);
            at += header + ev.len as usize;
        }
        (opens, closes)
    }
}
