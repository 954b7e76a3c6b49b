//! A crash's stack on its certificate: the `crash_stack` record of the
//! victim (its signal the one it died of), abort/panic machinery folded,
//! the first frame of the program's own code, and the clause a headline
//! ends with: `in parse_header (src/parse.c:42) ← load_file (src/parse.c:88)
//! ← main`.
use super::types::CrashRef;
use crate::{
    eventlog::{CrashFrame, CrashStack},
    model::Process,
};

/// Frames named in the headline, at most (the rest are in the details).
const CLAUSE_FRAMES: usize = 4;

/// Functions that are how a program dies, not where: libc's abort and
/// raise, the C++ terminate path, Rust's panic machinery, assertion and
/// fortify failures. Matched on the demangled name's start.
const MACHINERY: &[&str] = &[
    "raise",
    "abort",
    "gsignal",
    "__GI_raise",
    "__GI_abort",
    "__pthread_kill",
    "pthread_kill",
    "__restore_rt",
    "__assert_fail",
    "__libc_message",
    "__libc_fatal",
    "__fortify_fail",
    "__chk_fail",
    "__stack_chk_fail",
    "malloc_printerr",
    "__cxa_throw",
    "__cxa_rethrow",
    "std::terminate",
    "__cxxabiv1::",
    "__gnu_cxx::__verbose_terminate_handler",
    "_Unwind_",
    "std::panicking::",
    "core::panicking::",
    "std::sys::",
    "std::process::abort",
    "std::rt::",
    "std::panic::",
    "core::panic::",
    "panic_abort::",
    "__rust_start_panic",
    "__rust_abort",
    "__rust_end_short_backtrace",
    "__rustc::",
    "rust_panic",
    "rust_begin_unwind",
];

/// Where a C or Rust program's own code ends going outwards: frames past
/// these are the runtime's start-up.
const ENTRY: &[&str] = &["main", "std::rt::lang_start", "__libc_start_call_main"];

fn is_entry(s: &str) -> bool {
    ENTRY.contains(&s.split('(').next().unwrap_or(s))
}

/// The allocator's entry points and checks: how a heap corruption that
/// glibc detects dies (`free` → `_int_free` → `malloc_printerr` →
/// `abort`). Machinery only in an abort: a SIGSEGV in `free` is where
/// the process faulted.
const HEAP_CHECKS: &[&str] = &[
    "free",
    "cfree",
    "__libc_free",
    "_int_free",
    "_int_free_merge_chunk",
    "_int_free_create_chunk",
    "malloc",
    "__libc_malloc",
    "_int_malloc",
    "realloc",
    "__libc_realloc",
    "_int_realloc",
    "calloc",
    "__libc_calloc",
    "malloc_consolidate",
];

fn is_heap_check(f: &CrashFrame) -> bool {
    f.symbol
        .as_deref()
        .is_some_and(|s| HEAP_CHECKS.contains(&s.split('(').next().unwrap_or(s)))
}

fn is_machinery(f: &CrashFrame) -> bool {
    f.symbol.as_deref().is_some_and(|s| {
        // C++ names carry their parameters: `std::terminate()`.
        let base = s.split('(').next().unwrap_or(s);
        MACHINERY
            .iter()
            .any(|m| base == *m || (m.ends_with(':') || m.ends_with('_')) && base.starts_with(m))
            || base.starts_with("__pthread_kill_")
            || base.starts_with("std::panicking")
    })
}

/// The crash stack of `p` if it died of the signal the record is of.
pub(super) fn crash_ref(p: &Process, died_of: Option<i32>) -> Option<CrashRef> {
    let c = p.crash_stack()?;
    if died_of.is_some_and(|sig| sig != c.sig) {
        return None;
    }
    Some(reference(c))
}

pub(crate) fn reference(c: &CrashStack) -> CrashRef {
    let frames = &c.frames;
    let abort = c.sig == tracer_common::signals::SIGABRT;
    let folded = |f: &CrashFrame| is_machinery(f) || abort && is_heap_check(f);
    // The innermost run of machinery, with the unnamed frames inside it
    // (libc's local __pthread_kill_implementation has no exported name).
    let machinery = frames
        .iter()
        .take_while(|f| folded(f) || f.symbol.is_none())
        .enumerate()
        .filter(|(_, f)| folded(f))
        .map(|(i, _)| i + 1)
        .last()
        .unwrap_or(0);
    let first_user_frame = (machinery < frames.len()).then_some(machinery);
    CrashRef {
        seq: c.at.seq,
        fault_addr: c.fault_addr,
        fault: fault_phrase(c),
        completeness: c.completeness,
        detail: c.detail.clone(),
        frames: frames.clone(),
        frames_left_out: c.frames_left_out as usize,
        machinery,
        first_user_frame,
        clause: clause(frames, machinery),
    }
}

/// `address 0x0 not mapped` and the like: what the fault address means for
/// this signal and si_code.
fn fault_phrase(c: &CrashStack) -> Option<String> {
    let a = c.fault_addr?;
    let code = c.code.as_deref().unwrap_or("");
    Some(match (c.signal.as_str(), code) {
        ("SIGSEGV", "SEGV_MAPERR") => format!("address {a:#x} not mapped"),
        ("SIGSEGV", "SEGV_ACCERR") => format!("access to {a:#x} not permitted by its mapping"),
        ("SIGBUS", "BUS_ADRERR") => format!("address {a:#x} has no backing (past a file's end?)"),
        ("SIGBUS", "BUS_ADRALN") => format!("misaligned access at {a:#x}"),
        ("SIGFPE", "FPE_INTDIV") => format!("integer division by zero at {a:#x}"),
        ("SIGILL", _) => format!("illegal instruction at {a:#x}"),
        ("SIGTRAP", _) => format!("trap at {a:#x}"),
        _ => format!("address {a:#x}"),
    })
}

/// One frame as the clause names it: `parse_header (parse.c:42)`, or its
/// module and offset when it has no name.
fn frame_words(f: &CrashFrame) -> String {
    let place = match (&f.file, f.line) {
        (Some(file), Some(line)) => format!(" ({}:{line})", short_path(file)),
        (Some(file), None) => format!(" ({})", short_path(file)),
        _ => String::new(),
    };
    match (&f.symbol, &f.module, f.offset) {
        (Some(s), _, _) => format!("{s}{place}"),
        (None, Some(m), Some(off)) => format!("{}+{off:#x}", basename(m)),
        _ => format!("{:#x} (module unknown)", f.address),
    }
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The last two components of a source path: `src/parse.c`.
fn short_path(p: &str) -> String {
    let parts: Vec<&str> = p.rsplit('/').take(2).collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

fn clause(frames: &[CrashFrame], machinery: usize) -> String {
    let mut words = Vec::new();
    if machinery > 0 {
        words.push(match machinery {
            1 => "… 1 frame of abort machinery …".to_string(),
            n => format!("… {n} frames of abort machinery …"),
        });
    }
    let mut named = false;
    for f in frames.iter().skip(machinery).take(CLAUSE_FRAMES) {
        // Past the program's named frames, an unnamed one is the runtime's
        // start-up (libc's, found by nothing): the details list it.
        if named && f.symbol.is_none() {
            break;
        }
        named |= f.symbol.is_some();
        words.push(frame_words(f));
        if f.symbol.as_deref().is_some_and(is_entry) {
            break;
        }
    }
    words.join(" ← ")
}

/// Interpreters whose native stack is their own machinery: for them the
/// program's own words (a faulthandler traceback, V8's `FATAL ERROR`) say
/// more than any native frame, so the headline keeps those.
pub(super) fn is_interpreter(comm: &str) -> bool {
    let c = comm.to_ascii_lowercase();
    c.starts_with("python") || c == "node" || c == "nodejs" || c.starts_with("node-")
}

/// The native module an interpreter's crash fell in, when it is not the
/// interpreter's own code: `libc.so.6`, `_ctypes.cpython-311-x86_64-linux-gnu.so
/// (string_at)`. The fault's frame (past any abort machinery) must lie in
/// a shared object that is not the interpreter (its executable,
/// libpython, libnode): a crash in the interpreter itself names none.
pub(super) fn native_module(c: &CrashRef) -> Option<String> {
    let f = c.frames.get(c.first_user_frame.unwrap_or(0))?;
    let name = basename(f.module.as_deref()?);
    let own = ["python", "libpython", "node", "libnode"]
        .iter()
        .any(|p| name.starts_with(p));
    if own || !(name.ends_with(".so") || name.contains(".so.")) {
        return None;
    }
    Some(match &f.symbol {
        Some(s) => format!("{name} ({s})"),
        None => name.to_string(),
    })
}

/// An interpreter's own words about its crash (Python's faulthandler,
/// V8's `FATAL ERROR`): when its last words have them, they lead and the
/// headline names no native module.
pub(super) fn interpreter_said(last_words: &str) -> bool {
    last_words.contains("Fatal Python error") || last_words.contains("FATAL ERROR")
}

/// One frame as the reports list it: `#0 parse_header (src/parse.c:42) —
/// /usr/bin/parser+0x1170 [build id 24b4…]`, an inlined function marked.
pub fn frame_line(i: usize, f: &CrashFrame) -> String {
    let name = frame_words(f);
    let inlined = if f.inlined { " [inlined]" } else { "" };
    let at = match (&f.module, f.offset) {
        (Some(m), Some(off)) => format!(" — {m}+{off:#x}"),
        _ => format!(" — {:#x}", f.address),
    };
    let id = f
        .build_id
        .as_deref()
        .map(|b| format!(" [build id {}]", &b[..b.len().min(12)]))
        .unwrap_or_default();
    format!("#{i} {name}{inlined}{at}{id}")
}

/// The stack's completeness in words, for the reports.
pub fn completeness_words(c: &CrashRef) -> String {
    use crate::eventlog::StackCompleteness as S;
    let kind = match c.completeness {
        S::Complete => "complete",
        S::FramePointersOnly => "frame pointers only",
        S::ModuleUnknown => "module unknown",
        S::SymbolisationFailed => "symbolisation failed",
        S::NoStack => "no stack",
    };
    match &c.detail {
        Some(d) => format!("{kind}: {d}"),
        None => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::reference;
    use crate::eventlog::{CrashFrame, CrashStack, StackCompleteness, Stamp, Task};

    fn stack(sig: i32, names: &[Option<&str>]) -> CrashStack {
        CrashStack {
            at: Stamp {
                seq: 1,
                t: 1,
                time: String::new(),
            },
            task: Task {
                pid: 1,
                tid: 1,
                start: 1,
                comm: None,
            },
            sig,
            signal: crate::eventlog::signal_name(sig),
            code: None,
            fault_addr: None,
            completeness: StackCompleteness::Complete,
            detail: None,
            frames: names
                .iter()
                .map(|n| CrashFrame {
                    symbol: n.map(str::to_string),
                    module: Some("/lib/libc.so.6".into()),
                    offset: Some(0x10),
                    ..Default::default()
                })
                .collect(),
            frames_left_out: 0,
            withheld: None,
        }
    }

    /// glibc's heap check dies through free: in an abort its frames are
    /// machinery (the double free's caller is where); a SIGSEGV in free
    /// faulted there.
    #[test]
    fn the_allocator_folds_into_an_abort_only() {
        let names = [
            None,
            Some("gsignal"),
            Some("abort"),
            None,
            Some("__libc_free"),
            Some("release_twice"),
            Some("main"),
        ];
        let abort = reference(&stack(6, &names));
        assert_eq!(abort.machinery, 5);
        assert_eq!(abort.first_user_frame, Some(5));
        assert!(abort
            .clause
            .starts_with("… 5 frames of abort machinery … ← release_twice"));
        let segv = reference(&stack(11, &[Some("__libc_free"), Some("release_twice")]));
        assert_eq!(segv.machinery, 0);
        assert!(segv.clause.starts_with("__libc_free"), "{}", segv.clause);
    }
}
