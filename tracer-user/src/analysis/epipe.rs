//! The pipe idiom, whoever ends it: the kernel raises SIGPIPE in a process
//! whose write hits a pipe with no reader (SI_USER, no syscall, "sent" by
//! itself), and the write fails with EPIPE. A process with the default
//! action dies of that SIGPIPE; one that handles it ends itself after the
//! failed write instead: a Go program re-raises SIGPIPE on itself with
//! tgkill when the write was to its stdout or stderr (runtime's
//! `sigpipe`, measured in tests/kernel/pipe_idiom.rs), Python (which
//! ignores SIGPIPE) exits 1 or 120 with `BrokenPipeError`, Node exits 1
//! with `Error: write EPIPE`. The kernel's SIGPIPE is the proof of the
//! failed write: each of them is the same end of a pipeline as a SIGPIPE
//! death, ranked by its reader (mechanism/idioms.rs). A leaf: cause.rs
//! reads it.
use super::sigfacts::SIGPIPE;
use crate::{
    eventlog::{ExitStatus, ProcKey},
    model::Model,
};
use tracer_common::signals::SI_USER;

/// How long after the failed write a runtime's own end may come and still
/// be that write's doing, with no words of its own naming it. Measured on
/// the loaded 2-core test machine: Go's tgkill came 170 µs after the
/// kernel's SIGPIPE (`gowriter | head -c 1`), Python's exit 272 ms after
/// it, having printed its traceback (`python3 gen.py | head -n 3`); a
/// program that handled EPIPE and went on working for a second is doing
/// something else.
const EPIPE_END_NS: u64 = 1_000_000_000;

/// As long, when its last words name the broken pipe: the window in which
/// a caught signal explains an exit (caught.rs).
const EPIPE_SAID_NS: u64 = super::caught::CAUGHT_EXIT_WINDOW_NS;

/// What a runtime writes when its write failed with EPIPE (lower case):
/// Python's `BrokenPipeError: [Errno 32] Broken pipe`, Node's
/// `Error: write EPIPE`, strerror's `Broken pipe` (Ruby, Perl, C).
const EPIPE_WORDS: [&str; 2] = ["broken pipe", "epipe"];

/// The last SIGPIPE the kernel raised in `key` for a write (self, SI_USER,
/// no syscall) before event `before_seq`, whatever became of it
/// (delivered to a handler, ignored).
fn kernel_sigpipe(m: &Model, key: ProcKey, before_seq: u64) -> Option<usize> {
    let p = m.proc(key)?;
    p.signals_in().iter().copied().rev().find(|&i| {
        let s = &m.signals[i];
        s.ev.at.seq < before_seq
            && s.sender == key
            && s.ev.sig == SIGPIPE
            && s.ev.code == SI_USER
            && s.ev.call.is_none()
            && s.kill_call().is_none()
    })
}

/// `fatal` (index into `Model::signals`) is a SIGPIPE `key` raised on
/// itself with a kill-family call right after the kernel's SIGPIPE for a
/// failed write: the re-raise of Go's runtime. The kernel's SIGPIPE.
pub(super) fn reraised_after_epipe(m: &Model, key: ProcKey, fatal: usize) -> Option<usize> {
    let s = &m.signals[fatal];
    if s.ev.sig != SIGPIPE || s.sender != key {
        return None;
    }
    let j = kernel_sigpipe(m, key, s.ev.at.seq)?;
    (m.signals[j].ev.at.t + EPIPE_END_NS >= s.ev.at.t).then_some(j)
}

/// `key` exited non-zero after a write of its failed with EPIPE: the
/// kernel's SIGPIPE came before the exit, and its last words name the
/// broken pipe within a few seconds, or the exit came at once. The
/// kernel's SIGPIPE.
pub(super) fn exited_after_epipe(m: &Model, key: ProcKey) -> Option<usize> {
    let p = m.proc(key)?;
    let end = p.end.as_ref()?;
    if matches!(
        end.status,
        ExitStatus::Exited { code: 0 } | ExitStatus::Signaled { .. }
    ) {
        return None;
    }
    // A parent whose child failed (a pool whose worker was killed: its
    // write to the worker's pipe fails too) exits because of that death:
    // the cascade rules tie it there (cascade.rs), not the pipe idiom.
    let child_failed = p.children.iter().any(|&c| {
        m.proc(c)
            .and_then(|c| c.end.as_ref())
            .is_some_and(|e| e.seq < end.seq && !matches!(e.status, ExitStatus::Exited { code: 0 }))
    });
    if child_failed {
        return None;
    }
    let j = kernel_sigpipe(m, key, end.seq)?;
    let said = p.last_words().is_some_and(|l| {
        let lower = l.text.to_lowercase();
        EPIPE_WORDS.iter().any(|w| lower.contains(w))
    });
    let within = if said { EPIPE_SAID_NS } else { EPIPE_END_NS };
    (m.signals[j].ev.at.t + within >= end.t).then_some(j)
}
