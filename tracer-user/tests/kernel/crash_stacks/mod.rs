//! Crash stacks: real binaries compiled here as CI builds them crash under
//! `tracer record`; the certificate and the `crash_stack` record name the
//! faulting function and its callers (asserted by function name). This
//! module's own tests run in the VM matrix too (`cargo xtask vm-test --test
//! crash_stacks`), with the crashers prebuilt; its submodules need tools the
//! VMs lack (objcopy, python3, node, a compiler) or lose a race there, and
//! run on the host only (`HOST_ONLY` in xtask/src/vm/suites.rs).
use std::path::Path;

use crate::common::{native::*, *};
use tracer_user::eventlog::{CrashStack, StackCompleteness};

mod debug_files;
mod deleted;
mod runtimes;
mod trust;

/// A NULL dereference three calls deep; no tail calls (each caller uses
/// the result), nothing inlined.
const NULL_DEREF: &str = include_str!("crashers/null_deref.c");

const ABORT: &str = include_str!("crashers/abort.c");

/// glibc's heap check aborts on the second free of one block (tcache's
/// "free(): double free detected in tcache 2").
const DOUBLE_FREE: &str = include_str!("crashers/double_free.c");

const CXX_THROW: &str = include_str!("crashers/throw.cc");

const RUST_PANIC: &str = include_str!("crashers/panic.rs");

/// How the crashers are built (name, source, flags, `+strip`).
const BUILDS: &str = include_str!("crashers/builds.txt");

/// The crasher `name` of `crashers/builds.txt`, in `dir`: built here with its
/// flags, or, where `TRACER_PREBUILT_CRASHERS` names a directory (the VMs,
/// which have no compiler: `cargo xtask vm-test` builds them on the host),
/// copied from there.
fn crasher(dir: &Path, name: &str) -> std::path::PathBuf {
    crasher_as(dir, name, name)
}

/// [`crasher`] `name` at `dir/as_name`: built from `as_name`.EXT, so each
/// copy is a binary of its own (its own build id); the prebuilt one is the
/// same bytes under each name.
fn crasher_as(dir: &Path, name: &str, as_name: &str) -> std::path::PathBuf {
    if let Some(prebuilt) = std::env::var_os("TRACER_PREBUILT_CRASHERS") {
        let from = Path::new(&prebuilt).join(name);
        let to = dir.join(as_name);
        std::fs::copy(&from, &to).unwrap_or_else(|e| {
            panic!(
                "crasher {name}: {} ({e}): build the VM's initramfs with `cargo xtask vm-test`",
                from.display()
            )
        });
        return to;
    }
    let line = BUILDS
        .lines()
        .map(str::split_whitespace)
        .find_map(|mut w| (w.next() == Some(name)).then_some(w))
        .unwrap_or_else(|| panic!("no crasher {name} in crashers/builds.txt"));
    let mut words: Vec<&str> = line.collect();
    let source = words.remove(0);
    let stripped = words.last() == Some(&"+strip");
    if stripped {
        words.pop();
    }
    let (_, ext) = source.rsplit_once('.').unwrap();
    let src = match source {
        "null_deref.c" => NULL_DEREF,
        "abort.c" => ABORT,
        "double_free.c" => DOUBLE_FREE,
        "throw.cc" => CXX_THROW,
        "panic.rs" => RUST_PANIC,
        other => panic!("crashers/{other} is not embedded here"),
    };
    if ext == "cc" {
        assert!(
            have("c++"),
            "c++ (g++, which cc needs for C++) is needed: the kernel tests fail rather than skip"
        );
    }
    let bin = compile(dir, as_name, ext, src, &words);
    if stripped {
        strip(&bin);
    }
    bin
}

fn crash_stacks(r: &Recorded) -> Vec<&CrashStack> {
    r.events().crash_stacks().collect()
}

/// The one crash of the run.
fn the_crash(r: &Recorded) -> &CrashStack {
    let c = crash_stacks(r);
    assert_eq!(c.len(), 1, "one crash_stack record: {c:#?}\n{}", r.stderr());
    c[0]
}

fn symbols(c: &CrashStack) -> Vec<&str> {
    c.frames
        .iter()
        .filter_map(|f| f.symbol.as_deref())
        .collect()
}

/// `want` appear in `c`'s named frames in this order, the first of them
/// the innermost named frame of the program's own code.
fn assert_calls(c: &CrashStack, want: &[&str]) {
    let names = symbols(c);
    let at: Vec<Option<usize>> = want
        .iter()
        .map(|w| names.iter().position(|n| n.ends_with(w)))
        .collect();
    assert!(
        at.iter().all(Option::is_some) && at.windows(2).all(|p| p[0] < p[1]),
        "{want:?} in this order among {names:?}\n{c:#?}"
    );
}

/// Whether the crash records hold the user registers: from
/// `bpf_task_pt_regs` (5.15+) or, on `tp_btf_no_regs` (5.10), from the
/// task's kernel stack where they match the kernel's first frame. Without
/// them a stack is the kernel's frame-pointer walk alone, and code built
/// without frame pointers (the -O2 crashers, Debian's glibc) keeps only its
/// innermost frame, said so (docs/kernels.md).
fn has_regs(r: &Recorded) -> bool {
    crash_stacks(r).iter().all(|c| {
        !c.detail
            .as_deref()
            .is_some_and(|d| d.contains("no user registers"))
    })
}

/// A stack from a kernel without registers: said to be frame pointers
/// only, at least one frame, and nothing it names is wrong: those of
/// `want` it names are in `want`'s order (a missing frame is allowed).
fn assert_frame_pointers_only_and_right(c: &CrashStack, want: &[&str]) {
    assert_eq!(
        c.completeness,
        StackCompleteness::FramePointersOnly,
        "{c:#?}"
    );
    assert!(!c.frames.is_empty(), "{c:#?}");
    let order: Vec<usize> = symbols(c)
        .iter()
        .filter_map(|n| want.iter().position(|w| n.ends_with(w)))
        .collect();
    assert!(
        order.windows(2).all(|p| p[0] < p[1]),
        "{want:?} out of order: {c:#?}"
    );
}

fn headline(r: &Recorded) -> String {
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap();
    json["certificates"][0]["headline"]
        .as_str()
        .unwrap()
        .to_string()
}

fn run(bin: &Path) -> Recorded {
    record(&[], &[bin])
}

#[test]
fn a_null_dereference_three_calls_deep_is_named_with_and_without_frame_pointers() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["nofp", "fp"] {
        let bin = crasher(dir.path(), name);
        let r = run(&bin);
        assert_eq!(r.code(), Some(139), "{}", r.stderr());
        let c = the_crash(&r);
        assert_eq!(c.signal, "SIGSEGV");
        assert_eq!(c.code.as_deref(), Some("SEGV_MAPERR"));
        assert_eq!(c.fault_addr, Some(0));
        let top = &c.frames[0];
        assert_eq!(top.symbol.as_deref(), Some("parse_header"), "{c:#?}");
        assert!(top.file.as_deref().unwrap().ends_with(&format!("{name}.c")));
        assert_eq!(top.line, Some(5), "{c:#?}");
        assert!(top.build_id.is_some());
        let h = headline(&r);
        if !has_regs(&r) {
            assert_frame_pointers_only_and_right(c, &["parse_header", "load_file", "main"]);
            assert!(h.contains("in parse_header ("), "{h}");
            // With frame pointers the walk reaches main; load_file, the
            // caller of a leaf that sets up no frame (gcc at -O2 keeps
            // none in leaves even with -fno-omit-frame-pointer), is the
            // frame a frame-pointer walk from that leaf misses (5.10).
            if name == "fp" {
                assert!(symbols(c).contains(&"main"), "{c:#?}");
            }
            continue;
        }
        assert_calls(c, &["parse_header", "load_file", "main"]);
        assert!(
            h.contains("died of SIGSEGV: address 0x0 not mapped (SEGV_MAPERR) in parse_header (")
                && h.contains(") ← load_file (")
                && h.contains(") ← main ("),
            "{h}"
        );
    }
}

#[test]
fn a_stripped_binary_keeps_its_frames_without_names() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "stripped");
    let r = run(&bin);
    let c = the_crash(&r);
    let module = bin.to_str().unwrap();
    let ours: Vec<_> = c
        .frames
        .iter()
        .filter(|f| f.module.as_deref() == Some(module))
        .collect();
    // parse_header, load_file, main, _start: unwound by .eh_frame, unnamed
    // (no symbol table) but placed in the binary, never named wrongly.
    let least = if has_regs(&r) { 3 } else { 1 };
    assert!(ours.len() >= least, "{c:#?}");
    assert!(ours[..least].iter().all(|f| f.offset.is_some()), "{c:#?}");
    assert!(
        !symbols(c)
            .iter()
            .any(|s| s.contains("parse_header") || s.contains("load_file")),
        "{c:#?}"
    );
    assert!(
        headline(&r).contains("address 0x0 not mapped"),
        "{}",
        headline(&r)
    );
}

#[test]
fn abort_is_folded_into_its_machinery_and_names_the_caller() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "aborts");
    let r = run(&bin);
    assert_eq!(r.code(), Some(134), "{}", r.stderr());
    let c = the_crash(&r);
    assert_eq!(c.signal, "SIGABRT");
    if !has_regs(&r) {
        return assert_frame_pointers_only_and_right(c, &["abort", "check_invariant", "main"]);
    }
    assert_calls(c, &["abort", "check_invariant", "main"]);
    let h = headline(&r);
    assert!(
        h.contains("frames of abort machinery … ← check_invariant (") && h.contains("← main ("),
        "{h}"
    );
}

/// A glibc double free: raise, abort, the heap checker's frames (libc's
/// own, mostly without exported names) fold into the machinery, and the
/// first frame after it is the program's function that freed twice.
#[test]
fn a_glibc_double_free_is_folded_and_names_the_function_that_freed_twice() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "frees");
    let r = run(&bin);
    assert_eq!(r.code(), Some(134), "{}", r.stderr());
    let c = the_crash(&r);
    assert_eq!(c.signal, "SIGABRT");
    if !has_regs(&r) {
        return assert_frame_pointers_only_and_right(c, &["abort", "release_twice", "main"]);
    }
    assert_calls(c, &["abort", "release_twice", "main"]);
    let h = headline(&r);
    assert!(
        h.contains("frames of abort machinery … ← release_twice (")
            && h.contains("/frees.c:4) ← main ("),
        "{h}\n{c:#?}"
    );
    // libc's free is named (`__libc_free`, .dynsym) and folded: how it
    // died, not where (measured: 7 frames, 3 of them unnamed locals).
    assert!(symbols(c).iter().any(|s| s.ends_with("free")), "{c:#?}");
    assert!(!h.contains("_free") && !h.contains("← free"), "{h}");
}

#[test]
fn an_uncaught_cxx_exception_is_named_by_its_thrower() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "throws");
    let r = run(&bin);
    assert_eq!(r.code(), Some(134), "{}", r.stderr());
    let c = the_crash(&r);
    assert_eq!(c.signal, "SIGABRT");
    let want = [
        "abort",
        "std::terminate()",
        "__cxa_throw",
        "validate(int)",
        "main",
    ];
    if !has_regs(&r) {
        return assert_frame_pointers_only_and_right(c, &want);
    }
    assert_calls(c, &want);
    assert!(
        symbols(c)
            .iter()
            .any(|s| s.starts_with("__cxa_throw") || s.contains("terminate")),
        "{c:#?}"
    );
}

#[test]
fn a_rust_release_panic_abort_names_the_panicking_function_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "panics");
    let r = run(&bin);
    assert_eq!(r.code(), Some(134), "{}", r.stderr());
    let c = the_crash(&r);
    let want = ["core::panicking::panic_fmt", "panics::parse_header", "main"];
    if !has_regs(&r) {
        return assert_frame_pointers_only_and_right(c, &want);
    }
    assert_calls(c, &want);
    let f = c
        .frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("panics::parse_header"))
        .unwrap();
    assert!(
        f.file.as_deref().unwrap().ends_with("panics.rs") && f.line == Some(3),
        "{f:#?}"
    );
    let h = headline(&r);
    assert!(
        h.contains("frames of abort machinery … ← panics::parse_header ("),
        "{h}"
    );
}

/// 200 crashes in a row: every one has its stack, and every stack is right
/// (parse_header, load_file, main, in that order, innermost first).
#[test]
fn two_hundred_crashes_in_a_row_are_each_named_right() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "again");
    let script = format!("for i in $(seq 200); do {}; done; exit 0", bin.display());
    let r = record(&[], &["sh", "-c", &script]);
    let stacks = crash_stacks(&r);
    // On a loaded machine the crash ring fills while tracer names the
    // crashes before (measured, debug build: none lost idle, 18 of 200 at
    // load 9 on 2 CPUs, 112 with this module's tests beside it): each one
    // missing is counted, never hidden, and at least a ring's worth (~26)
    // is always there.
    let full = r.log.trailer.as_ref().unwrap().lost.crash_ring_full as usize;
    assert_eq!(stacks.len() + full, 200, "{}", r.stderr());
    // A stack whose module could not be read in time is said so, and
    // names nothing (seen once in a run beside the other kernel tests); so
    // is one that came while 64 crashes already waited for the busy parse
    // child (run/session/crashes.rs's bound: CI's run had 200 crashes outrun
    // it), and one whose parse child ran past its wall limit (the 6.12
    // guest with its vCPUs on one host thread, at load 6); a
    // named one is named right.
    let mut named = 0;
    let regs = has_regs(&r);
    for c in &stacks {
        let names = symbols(c);
        if names.first() == Some(&"parse_header") {
            match regs {
                true => assert_calls(c, &["parse_header", "load_file", "main"]),
                false => {
                    assert_frame_pointers_only_and_right(c, &["parse_header", "load_file", "main"])
                }
            }
            named += 1;
        } else {
            let waited = c.completeness == StackCompleteness::SymbolisationFailed
                && c.detail.as_deref().is_some_and(|d| {
                    d.contains("crashes were already waiting for the parse child")
                        || d.contains("the parse child took longer than")
                });
            assert!(
                c.completeness == StackCompleteness::ModuleUnknown || waited,
                "{c:#?}"
            );
            assert!(names.is_empty(), "a wrong frame: {c:#?}");
        }
    }
    assert!(named >= 26, "{named} of 200 stacks named");
}

#[test]
fn without_the_hook_a_crash_has_no_stack_and_tracer_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "nohook");
    let r = record(&["--disable-hook", "crash_stacks"], &[&bin]);
    assert_eq!(r.code(), Some(139));
    assert!(crash_stacks(&r).is_empty());
    let h = hook(&r.log, "crash_stacks");
    assert!(!h.attached);
    assert!(
        headline(&r).contains("SIGSEGV (SEGV_MAPERR) raised by the kernel"),
        "{}",
        headline(&r)
    );
}

/// Without `bpf_task_pt_regs` (5.10, here forced by refusing the first
/// rung) the user registers come from the top of the task's kernel stack,
/// checked against the kernel's own first frame: a -O2 binary without
/// frame pointers still unwinds by its DWARF CFI, in full.
#[test]
fn without_the_registers_helper_they_come_from_the_kernel_stack() {
    let dir = tempfile::tempdir().unwrap();
    let bin = crasher(dir.path(), "stackregs");
    let r = record(&["--disable-hook", "crash_stacks:tp_btf"], &[&bin]);
    assert_eq!(
        hook(&r.log, "crash_stacks").via.as_deref(),
        Some("tp_btf_no_regs")
    );
    let c = the_crash(&r);
    assert_eq!(c.completeness, StackCompleteness::Complete, "{c:#?}");
    assert!(
        c.detail
            .as_deref()
            .is_some_and(|d| d.contains("registers read from the task's kernel stack")),
        "{c:#?}"
    );
    assert_calls(c, &["parse_header", "load_file", "main"]);
}

/// Adds an object to its own dynamic linker's list (its memory, so its
/// to forge) naming argv[1] at a made-up load address, then calls into
/// it at argv[2] (the symbol's address in that file): the crash's first
/// frame lies in the forged object.
const FORGER: &str = r#"
#include <link.h>
#include <stdlib.h>
extern ElfW(Dyn) _DYNAMIC[];
int main(int argc, char **argv) {
    static struct link_map fake;
    struct r_debug *r = 0;
    for (ElfW(Dyn) *d = _DYNAMIC; d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_DEBUG) r = (struct r_debug *)d->d_un.d_ptr;
    if (!r) return 2;
    unsigned long bias = 0x100000000000UL;
    fake.l_addr = bias;
    fake.l_name = argv[1];
    struct link_map *lm = r->r_map;
    while (lm->l_next) lm = lm->l_next;
    lm->l_next = &fake;
    fake.l_prev = lm;
    void (*f)(void) = (void (*)(void))(bias + strtoul(argv[2], 0, 16));
    f();
    return 0;
}
"#;
