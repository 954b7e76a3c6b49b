//! The syscall hooks' fallback chains, each rung forced with
//! `--disable-hook <hook>:<via>` and giving the same events:
//! - the kill family: fentry/fexit, then raw_syscalls filtered in the
//!   kernel, then the per-syscall tracepoints;
//! - last words (stderr writes): fentry, then the kill family's raw_syscalls
//!   program (only when the kill family is on it), then the tracepoints.
use crate::common::*;
use tracer_user::eventlog::{LastWords, Record};

const SCENARIO: &str = "sleep 30 & kill -TERM $!; wait; kill -TERM 2000000000; exit 0";

/// Runs the scenario with `disabled` rungs; `Err(detail)` if the hook did not attach
/// (with its detail), else asserts the kill calls and returns the via.
fn kill_calls_with(disabled: &[&str]) -> Result<String, String> {
    kill_calls_recorded(disabled, &[]).0
}

/// As [`kill_calls_with`], with `extra` flags, and the run.
fn kill_calls_recorded(disabled: &[&str], extra: &[&str]) -> (Result<String, String>, Recorded) {
    let mut args = extra.to_vec();
    for d in disabled {
        args.extend(["--disable-hook", d]);
    }
    let r = record(&args, &["sh", "-c", SCENARIO]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let hook = hook(&r.log, "kill_syscalls");
    if !hook.attached {
        return (Err(hook.detail.clone().unwrap_or_default()), r);
    }
    let calls: Vec<_> = r
        .events()
        .kill_calls()
        .map(|k| (k.syscall.clone(), k.sig, k.ret, k.deliveries))
        .collect();
    assert!(calls.contains(&("kill".into(), 15, 0, 1)), "{calls:?}");
    assert!(calls.contains(&("kill".into(), 15, -3, 0)), "{calls:?}");
    let joined = r.events().any(|e| {
        matches!(e, Record::Signal(s) if s.sig == 15 && s.call.as_ref().is_some_and(|c| c.syscall == "kill"))
    });
    assert!(joined, "the SIGTERM delivery is joined to its kill()");
    let via = hook.via.clone().expect("attached hooks say how");
    (Ok(via), r)
}

/// What the run's header says of hook `name` ("" when nothing).
fn hook_detail(r: &Recorded, name: &str) -> String {
    hook(&r.log, name).detail.clone().unwrap_or_default()
}

/// The raw_syscalls rung: the calls' entries on raw_syscalls' sys_enter,
/// their returns on the kill family's own sys_exit tracepoints (no program
/// at any other syscall's exit), and on raw_syscalls' sys_exit where those
/// cannot attach (`kill_syscalls:exit_tracepoints` forces it; the detail
/// says it). The same calls either way.
#[test]
fn raw_syscalls_rung_sees_kill_calls() {
    let programs = |r: &Recorded| -> Vec<String> {
        let trailer = r.log.trailer.as_ref().expect("a trailer");
        trailer
            .program_stats
            .iter()
            .filter(|p| p.runs > 0)
            .map(|p| p.program.clone())
            .collect()
    };
    let (via, r) = kill_calls_recorded(&["kill_syscalls:fentry"], &["--program-stats"]);
    assert_eq!(via.as_deref(), Ok("raw_syscalls"));
    let ran = programs(&r);
    assert!(ran.iter().any(|p| p == "kill_exit"), "{ran:?}");
    assert!(!ran.iter().any(|p| p == "raw_sys_exit"), "{ran:?}");
    let detail = hook_detail(&r, "kill_syscalls");
    assert!(!detail.contains("returns by"), "{detail}");

    let (via, r) = kill_calls_recorded(
        &["kill_syscalls:fentry", "kill_syscalls:exit_tracepoints"],
        &["--program-stats"],
    );
    assert_eq!(via.as_deref(), Ok("raw_syscalls"));
    let ran = programs(&r);
    assert!(ran.iter().any(|p| p == "raw_sys_exit"), "{ran:?}");
    assert!(!ran.iter().any(|p| p == "kill_exit"), "{ran:?}");
    let detail = hook_detail(&r, "kill_syscalls");
    assert!(
        detail.contains("returns by raw_syscalls' sys_exit (disabled by --disable-hook)"),
        "{detail}"
    );
}

#[test]
fn tracepoint_rung_sees_kill_calls() {
    let via = kill_calls_with(&["kill_syscalls:fentry", "kill_syscalls:raw_syscalls"])
        .expect("the syscall tracepoints attach");
    assert_eq!(via, "tracepoint");
}

/// The kernels where fentry is refused, each in its own way, and the
/// reported refusal (`detail`) says that way:
/// - the farm's Firecracker kernels (`-fc-` releases): the load, EPERM;
/// - arm64 before 6.4: no ftrace direct calls for the BPF trampoline
///   (`DYNAMIC_FTRACE_WITH_DIRECT_CALLS`, Debian's 6.1): the attach,
///   ENOTSUPP (524).
///
/// Anywhere else (the other distribution kernels) fentry must attach.
fn fentry_refusal_expected(detail: &str, symbol: &str) -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let arm64_without_direct_calls = cfg!(target_arch = "aarch64") && !kernel_at_least(6, 4);
    (release.contains("-fc-") && detail.starts_with(&format!("fentry: load fentry {symbol}")))
        || (arm64_without_direct_calls
            && detail.starts_with(&format!("fentry: attach fentry {symbol}"))
            && detail.contains("os error 524"))
}

/// The entry symbol of `syscall` on this architecture.
fn entry(syscall: &str) -> String {
    let arch = tracer_common::SyscallArch::HOST.expect("a known architecture");
    format!("{}{syscall}", arch.entry_prefix)
}

/// fentry is refused on some kernels (`fentry_refusal_expected`): there the
/// test checks the refusal is reported; anywhere else fentry must attach and
/// see the calls.
#[test]
fn fentry_rung_sees_kill_calls() {
    match kill_calls_with(&["kill_syscalls:raw_syscalls", "kill_syscalls:tracepoint"]) {
        Ok(via) => assert_eq!(via, "fentry"),
        Err(detail) => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            assert!(
                fentry_refusal_expected(&detail, &entry("kill")),
                "fentry refused on {release}: {detail}"
            );
        }
    }
}

#[test]
fn default_chain_avoids_classic_tracepoints() {
    let via = kill_calls_with(&[]).expect("some rung attaches");
    assert_ne!(via, "tracepoint", "a rung without teardown cost attaches");
}

/// The writev(2) of the last-words scenario: this test binary, re-run (the
/// VMs have no python), writes three pieces to fd 2 in one call and dies.
fn writev_and_die() {
    // On the heap, as a program's formatted words are: a literal in a page
    // of the binary this process has not touched yet is not readable from
    // the syscall's hook (BPF reads of user memory do not fault pages in).
    // Suspected of the one CI-guest run (6.12, tracepoint rung) that
    // captured no words from this scenario while the shell's and cat's
    // were there; the same suite passed before and after it.
    let pieces: [Vec<u8>; 3] = [b"first ".to_vec(), b"second ".to_vec(), b"third\n".to_vec()];
    let iov: Vec<libc::iovec> = pieces
        .iter()
        .map(|p| libc::iovec {
            iov_base: p.as_ptr() as *mut libc::c_void,
            iov_len: p.len(),
        })
        .collect();
    // SAFETY: three iovecs over live byte arrays, as writev(2) reads them;
    // _exit(2) ends the process without running anything of the test's.
    unsafe {
        assert_eq!(libc::writev(2, iov.as_ptr(), 3), 19);
        libc::_exit(3);
    }
}

const TYPE_ERROR: &str = "TypeError: x is undefined\n";
const MISSING: &str = "/no-such-dir-for-last-words/file";

/// Three processes die after writing to a stderr that goes nowhere: a shell
/// (write), cat (coreutils or busybox, write) and the calling test re-run as
/// the writev scenario. Runs them with `disabled` rungs; `Err(detail)` if
/// last words did not attach, else asserts each process's words, captured
/// once, and returns (last words' via, the kill family's via, last words'
/// detail or "").
fn last_words_with(disabled: &[&str]) -> Result<(String, String, String), String> {
    let writev = scenario(writev_and_die);
    let mut args = Vec::new();
    for d in disabled {
        args.extend(["--disable-hook", d]);
    }
    // The scenario's stdout (libtest's chatter) is another open file than its
    // stderr: fd 1 is captured only when it is fd 2's file.
    let script = format!(
        "sh -c 'echo \"TypeError: x is undefined\" >&2; exit 1' 2>/dev/null; \
         cat {MISSING} 2>/dev/null; \
         '{}' >/dev/null 2>/dev/null; exit 0",
        writev.argv().join("' '")
    );
    let r = record_env(&args, &["sh", "-c", &script], &[writev.env()]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let kill_via = hook(&r.log, "kill_syscalls")
        .via
        .clone()
        .unwrap_or_default();
    let hook = hook(&r.log, "last_words");
    if !hook.attached {
        return Err(hook.detail.clone().unwrap_or_default());
    }
    let words: Vec<&LastWords> = r.events().last_words().collect();
    let sh: Vec<_> = words.iter().filter(|l| l.text == TYPE_ERROR).collect();
    assert_eq!(sh.len(), 1, "the shell's words, once: {words:?}");
    // Captured twice (two rungs at once), the count would double.
    assert_eq!(sh[0].bytes_total, TYPE_ERROR.len() as u64, "{words:?}");
    assert!(
        words
            .iter()
            .any(|l| l.text.contains(MISSING) && l.text.contains("No such file or directory")),
        "cat's words: {words:?}"
    );
    let writev: Vec<_> = words
        .iter()
        .filter(|l| l.text == "first second third\n")
        .collect();
    assert_eq!(
        writev.len(),
        1,
        "the writev pieces in order, once: {words:?}"
    );
    assert_eq!(writev[0].bytes_total, 19, "{words:?}");
    Ok((
        hook.via.clone().expect("attached hooks say how"),
        kill_via,
        hook.detail.clone().unwrap_or_default(),
    ))
}

#[test]
fn last_words_raw_syscalls_rung_keeps_dying_words() {
    // The kill family off fentry too: last words ride on its raw_syscalls program.
    let (via, kill_via, _) = last_words_with(&["last_words:fentry", "kill_syscalls:fentry"])
        .expect("raw_syscalls attaches");
    assert_eq!(
        (via.as_str(), kill_via.as_str()),
        ("raw_syscalls", "raw_syscalls")
    );
}

#[test]
fn last_words_tracepoint_rung_keeps_dying_words() {
    let (via, _, _) = last_words_with(&["last_words:fentry", "last_words:raw_syscalls"])
        .expect("the write tracepoints attach");
    assert_eq!(via, "tracepoint");
}

/// Without the kill family on raw_syscalls, last words do not attach
/// raw_syscalls for writes alone (a program run on every syscall of the
/// machine): they fall to the tracepoints, and say why.
#[test]
fn last_words_raw_syscalls_rung_needs_the_kill_family_there() {
    let off = [
        "last_words:fentry",
        "kill_syscalls:fentry",
        "kill_syscalls:raw_syscalls",
    ];
    let (via, kill_via, _) = last_words_with(&off).expect("the write tracepoints attach");
    assert_eq!(
        (via.as_str(), kill_via.as_str()),
        ("tracepoint", "tracepoint")
    );
    let r = record(
        &off.iter()
            .flat_map(|d| ["--disable-hook", d])
            .collect::<Vec<_>>(),
        &["true"],
    );
    let detail = hook_detail(&r, "last_words");
    assert!(
        detail.contains("raw_syscalls: kill_syscalls is on tracepoint, not raw_syscalls"),
        "{detail}"
    );
}

/// As for the kill family: refused where `fentry_refusal_expected` says,
/// and the refusal must be reported; anywhere else fentry attaches and
/// captures.
#[test]
fn last_words_fentry_rung_keeps_dying_words() {
    match last_words_with(&["last_words:raw_syscalls", "last_words:tracepoint"]) {
        Ok((via, _, _)) => assert_eq!(via, "fentry"),
        Err(detail) => {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
            assert!(
                fentry_refusal_expected(&detail, &entry("write")),
                "fentry refused on {release}: {detail}"
            );
        }
    }
}

/// By default last words take the kill family's way in: fentry where the
/// kernel allows it (the VM matrix's Debian kernels), its raw_syscalls
/// program where fentry is refused — never the tracepoints then.
#[test]
fn default_last_words_follow_the_kill_family() {
    let (via, kill_via, detail) = last_words_with(&[]).expect("some rung attaches");
    assert!(
        matches!(kill_via.as_str(), "fentry" | "raw_syscalls"),
        "{kill_via}"
    );
    assert_eq!(via, kill_via);
    // The rung's programs read the task through its BTF-typed pointer from
    // 5.11 (`bpf_get_current_task_btf`); 5.10 refuses them and takes their
    // probe-reading twins, and says so.
    let twin = "task fields by probe reads (task_btf: load ";
    match kernel_at_least(5, 11) {
        true => assert!(!detail.contains("task fields"), "{detail}"),
        false => assert!(detail.contains(twin), "{detail}"),
    }
}

/// The probe-reading twins of the rung last words take by default
/// (`--disable-hook last_words:task_btf`, what 5.10 runs) capture the same
/// words, once.
#[test]
fn last_words_probe_reading_twins_keep_dying_words() {
    let (via, kill_via, detail) =
        last_words_with(&["last_words:task_btf"]).expect("some rung attaches");
    assert_eq!(via, kill_via);
    assert!(
        detail.contains("task fields by probe reads (task_btf: disabled by --disable-hook)"),
        "{detail}"
    );
}

/// `--disable-hook last_words` with the kill family on raw_syscalls: its
/// program runs on every write, but with last words' tail-call slots empty
/// nothing is captured.
#[test]
fn disabled_last_words_capture_nothing_on_raw_syscalls() {
    let r = record(
        &[
            "--disable-hook",
            "last_words",
            "--disable-hook",
            "kill_syscalls:fentry",
        ],
        &["sh", "-c", "echo hidden >&2; exit 1"],
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    assert_eq!(
        hook(&r.log, "kill_syscalls").via.as_deref(),
        Some("raw_syscalls")
    );
    assert!(!hook(&r.log, "last_words").attached);
    assert!(
        !r.events().any(|e| matches!(e, Record::LastWords(_))),
        "nothing captured"
    );
}
