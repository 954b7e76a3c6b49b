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
/// `write`), or the map a symbolic link to `argv[2]` (mode `link`); then
/// called from `run_compiled`, and it faults on NULL.
const JIT: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
