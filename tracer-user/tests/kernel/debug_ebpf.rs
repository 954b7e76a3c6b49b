//! `--debug-ebpf`: the eBPF side's rare failures reach tracer's stderr through
//! aya-log, and their counters reach the trailer and report.json either way.
//!
//! The failure is real: a traced process writes to fd 2 from addresses that
//! are not mapped, so the stderr capture's `bpf_probe_read_user` fails.
use crate::common::*;

/// The traced command: two writes to fd 2 from unmapped memory (NULL, and a
/// page below mmap_min_addr); both fail with EFAULT in the process too.
/// (This test binary itself, re-run: the VMs have no python.)
fn bad_writes() {
    // SAFETY: write(2) reads nothing at an unmapped address: it fails
    // (EFAULT), which is what is asserted.
    unsafe {
        assert_eq!(libc::write(2, std::ptr::null(), 16), -1);
        assert_eq!(libc::write(2, 0x1000 as *const libc::c_void, 5), -1);
    }
}

/// The calling test, re-run as the `bad_writes` scenario under `tracer
/// record [extra]`; returns the recording and the scenario's pid.
fn run(extra: &[&str], env: &[(&str, &str)]) -> (Recorded, u32) {
    let r = scenario(bad_writes).record_env(extra, env);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let pid = root(&r).pid;
    (r, pid)
}

fn failed_reads(r: &Recorded) -> (u64, u64) {
    let t = r.log.trailer.as_ref().expect("log has a trailer");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let in_report = json["log"]["lost"]["user_read_failed"]
        .as_u64()
        .unwrap_or(0);
    (t.lost.user_read_failed, in_report)
}

fn log_lines(pid: u32) -> [String; 2] {
    [
        format!("[WARN  tracer_ebpf::diag] last words of pid {pid}: reading 16 bytes at 0 failed"),
        format!(
            "[WARN  tracer_ebpf::diag] last words of pid {pid}: reading 5 bytes at 1000 failed"
        ),
    ]
}

#[test]
fn debug_ebpf_logs_a_failed_user_read_and_counts_it() {
    let (r, pid) = run(&["--debug-ebpf"], &[]);
    let stderr = r.stderr();
    for line in log_lines(pid) {
        assert!(stderr.contains(&line), "no `{line}` in:\n{stderr}");
    }
    assert_eq!(failed_reads(&r), (2, 2), "{:?}", r.log.trailer);
    // Unreadable text loses no death: the run is not reported lossy.
    assert_no_loss(&r);
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(
        md.contains("the text of 2 stderr writes or command lines is missing"),
        "{md}"
    );
}

#[test]
fn off_by_default_but_still_counted() {
    let (r, _) = run(&[], &[]);
    let stderr = r.stderr();
    assert!(!stderr.contains("tracer_ebpf"), "{stderr}");
    assert_eq!(failed_reads(&r), (2, 2), "{:?}", r.log.trailer);
}

#[test]
fn tracer_log_debug_turns_it_on() {
    let (r, pid) = run(&[], &[("TRACER_LOG", "tracer_ebpf=debug")]);
    let stderr = r.stderr();
    for line in log_lines(pid) {
        assert!(stderr.contains(&line), "no `{line}` in:\n{stderr}");
    }
}

/// The verifier checks the logging code only when it is on: the raw_syscalls
/// fallbacks (the kill family's, and last words' programs it tail-calls,
/// whose failed reads are the lines expected) must load too.
#[test]
fn the_raw_syscalls_fallback_loads_with_logging_on() {
    let (r, pid) = run(
        // fentry first where the kernel allows it, classic tracepoints last:
        // both off leaves raw_syscalls.
        &[
            "--debug-ebpf",
            "--disable-hook",
            "kill_syscalls:fentry",
            "--disable-hook",
            "kill_syscalls:tracepoint",
            "--disable-hook",
            "last_words:fentry",
            "--disable-hook",
            "last_words:tracepoint",
        ],
        &[],
    );
    for name in ["kill_syscalls", "last_words"] {
        let hook = hook(&r.log, name);
        assert!(hook.attached, "{hook:?}");
        assert_eq!(hook.via.as_deref(), Some("raw_syscalls"));
    }
    let stderr = r.stderr();
    for line in log_lines(pid) {
        assert!(stderr.contains(&line), "no `{line}` in:\n{stderr}");
    }
}

/// And last words' last rung, the write tracepoints' programs, with logging on.
#[test]
fn the_write_tracepoints_load_with_logging_on() {
    let (r, pid) = run(
        &[
            "--debug-ebpf",
            "--disable-hook",
            "last_words:fentry",
            "--disable-hook",
            "last_words:raw_syscalls",
        ],
        &[],
    );
    let hook = hook(&r.log, "last_words");
    assert_eq!(hook.via.as_deref(), Some("tracepoint"), "{hook:?}");
    let stderr = r.stderr();
    for line in log_lines(pid) {
        assert!(stderr.contains(&line), "no `{line}` in:\n{stderr}");
    }
}

/// A wrong kernel offset used to look like "no events". Now the lifecycle
/// hooks see the impossible start time it reads, count each lost event,
/// and say why; the command's status still passes through. (The offset is
/// broken on purpose by a debug-build-only switch.)
#[test]
fn a_wrong_task_offset_is_diagnosed_not_silent() {
    let r = record_env(
        &["--debug-ebpf"],
        &["sh", "-c", "exit 3"],
        &[("TRACER_TEST_WRONG_START_OFFSET", "1")],
    );
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let lost = &r.log.trailer.as_ref().expect("a trailer").lost;
    assert!(lost.task_read_failed > 0, "{lost:?}");
    assert!(lost.total() >= lost.task_read_failed);
    let stderr = r.stderr();
    assert!(
        stderr.contains("wrong task_struct offset?"),
        "no diagnosis in:\n{stderr}"
    );
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(md.contains("unreadable task (kernel offsets?)"), "{md}");
}
