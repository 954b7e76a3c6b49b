//! Last words: the end of what a process wrote to stderr, captured in the
//! kernel, bounded per process.
mod dest;
mod fd2;
mod writev;

use crate::common::*;
use tracer_user::eventlog::LastWords;

fn last_words(r: &Recorded) -> Vec<&LastWords> {
    r.events().last_words().collect()
}

#[test]
fn a_dying_workers_stderr_is_kept() {
    // The worker's stderr goes nowhere, as when a test runner swallows it.
    let r = record(
        &[],
        &[
            "sh",
            "-c",
            "sh -c 'echo \"TypeError: x is undefined\" >&2; exit 1' 2>/dev/null; exit 0",
        ],
    );
    assert_eq!(r.code(), Some(0));
    let lw = last_words(&r);
    assert_eq!(lw.len(), 1, "{lw:?}");
    assert_eq!(lw[0].text, "TypeError: x is undefined\n");
    assert!(!lw[0].truncated);
    // Said to /dev/null: kept as evidence, flagged so it never headlines.
    assert!(lw[0].to_null);
    // It follows the worker's exit in the log.
    let exit_seq = r
        .events()
        .exits()
        .find(|x| x.group_dead && x.task.key() == lw[0].task.key())
        .map(|x| x.at.seq)
        .expect("worker exit");
    assert_eq!(lw[0].at.seq, exit_seq + 1);
}

/// The kernel keeps what fd 2 is between a process's writes
/// (`tracer-ebpf/src/fd2.rs`): its words still follow fd 2 at each write,
/// to /dev/null and back, closed and opened anew (`last_words_fd2` does
/// more, with python3 and bash, on the host).
#[test]
fn words_follow_fd2_at_each_write() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("f");
    let script = format!(
        "sh -c 'echo n1 >&2; exec 2>/dev/null; echo n2 >&2'; \
         sh -c 'exec 3>&2 2>/dev/null; echo p1 >&2; exec 2>&3 3>&-; echo p2 >&2'; \
         sh -c 'exec 2>{f}; echo c1 >&2; exec 2>&-; exec 2>/dev/null; echo c2 >&2; \
                exec 2>&-; exec 2>>{f}; echo c3 >&2'",
        f = f.display()
    );
    let r = record(&[], &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let lw = last_words(&r);
    for (first, text, to_null) in [
        ("n1", "n1\nn2\n", true),
        ("p1", "p1\np2\n", false),
        ("c1", "c1\nc2\nc3\n", false),
    ] {
        let w: Vec<_> = lw.iter().filter(|l| l.text.starts_with(first)).collect();
        assert_eq!(w.len(), 1, "{first}: {lw:?}");
        assert_eq!(w[0].text, text, "{lw:?}");
        assert_eq!(w[0].to_null, to_null, "{lw:?}");
    }
}

#[test]
fn memory_is_bounded_however_much_is_written() {
    let r = record(
        &["--last-words-bytes", "1000"],
        &[
            "sh",
            "-c",
            "head -c 1048576 /dev/zero | tr '\\0' x >&2; echo THE END >&2",
        ],
    );
    assert_eq!(r.code(), Some(0));
    let lw = last_words(&r);
    let tr = lw
        .iter()
        .find(|l| l.task.comm.as_deref() == Some("tr"))
        .expect("tr's words");
    assert_eq!(tr.bytes_total, 1 << 20);
    assert_eq!(tr.text.len(), 1000);
    assert!(tr.truncated);
    let sh = lw
        .iter()
        .find(|l| l.text.ends_with("THE END\n"))
        .expect("the shell's last line");
    assert!(sh.text.len() <= 1000);
}

#[test]
fn zero_disables_capture() {
    let r = record(
        &["--last-words-bytes", "0"],
        &["sh", "-c", "echo hidden >&2"],
    );
    assert!(last_words(&r).is_empty());
    assert!(!r.log.header.hooks.iter().any(|h| h.name == "last_words"));
}

/// 20 000 numbered lines in 2 000 writes: the kernel's 8 KiB ring wraps
/// twice, at offsets that split lines. What comes back is exactly the last
/// bytes written, in order.
/// 2000 writes of ten numbered lines (100 bytes) to stderr, in plain sh (the
/// VM test's initramfs has no python): each printf builtin is one write.
const NUMBERED: &str = "i=0; while [ $i -lt 20000 ]; do \
    printf '%09d\\n' $i $((i+1)) $((i+2)) $((i+3)) $((i+4)) $((i+5)) $((i+6)) $((i+7)) $((i+8)) $((i+9)) >&2; \
    i=$((i+10)); done";

fn numbered_tail(n: usize) -> String {
    let all: String = (0..20_000).map(|i| format!("{i:09}\n")).collect();
    all[all.len() - n..].to_owned()
}

/// The words of the command itself (the recorded root process).
fn root_words(r: &Recorded) -> &LastWords {
    let root = root(r).pid;
    last_words(r)
        .into_iter()
        .find(|l| l.task.pid == root)
        .expect("the command's words")
}

#[test]
fn a_wrapped_kernel_tail_comes_back_in_order() {
    let r = record(&[], &["sh", "-c", NUMBERED]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let lw = root_words(&r);
    assert_eq!(lw.text, numbered_tail(4096));
    assert_eq!(lw.bytes_total, 200_000);
    assert!(lw.truncated);
    assert_no_loss(&r);
}

#[test]
fn more_than_a_kernel_tail_holds_goes_write_by_write() {
    // 12 000 bytes: beyond the kernel tail, so each write is its own record.
    let r = record(&["--last-words-bytes", "12000"], &["sh", "-c", NUMBERED]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let lw = root_words(&r);
    assert_eq!(lw.text, numbered_tail(12_000));
    assert_eq!(lw.bytes_total, 200_000);
}

#[test]
fn a_process_alive_at_the_end_has_its_words_so_far() {
    // It writes, then closes the pipe `cat` waits on (the handshake: the
    // command ends only after the write), and lives on: its words come from
    // the kernel's tail when the capture ends.
    let r = record(
        &[],
        &[
            "sh",
            "-c",
            "(sh -c 'echo still here >&2; exec >&-; exec sleep 300' 2>/dev/null &) | cat",
        ],
    );
    let leaked: Vec<_> = r.events().leaks().map(|l| l.task.key()).collect();
    for key in &leaked {
        // Ours (the test's command spawned it), identity checked first.
        if tracer_user::run::leaks::inspect(*key, 0, None).is_some() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(key.pid as i32),
                nix::sys::signal::SIGKILL,
            );
        }
    }
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_eq!(leaked.len(), 1);
    let lw = last_words(&r);
    let lw = lw
        .iter()
        .find(|l| l.task.key() == leaked[0])
        .expect("the leaked process's words");
    assert_eq!(lw.text, "still here\n");
}

/// 20 000 numbered lines to fd 2 (more than the kernel's 8 KiB ring
/// holds), then, as the last write, one from an unmapped page: the kernel
/// reads user memory straight into the ring (tracer-ebpf/src/stderr.rs,
/// `append`), and the failed read zeroes the 5 oldest bytes it was to
/// overwrite. Those are dropped, the rest comes back in order.
fn lines_then_an_unreadable_write() {
    let all: String = (0..20_000).map(|i| format!("{i:09}\n")).collect();
    for chunk in all.as_bytes().chunks(100) {
        // SAFETY: a write of a live buffer's bytes.
        let n = unsafe { libc::write(2, chunk.as_ptr().cast(), chunk.len()) };
        assert_eq!(n, 100);
    }
    // SAFETY: write(2) reads nothing at an unmapped address: it fails
    // (EFAULT), which is asserted.
    let n = unsafe { libc::write(2, 0x1000 as *const libc::c_void, 5) };
    assert_eq!(n, -1);
}

#[test]
fn an_unreadable_last_write_costs_only_the_bytes_it_zeroed() {
    let s = scenario(lines_then_an_unreadable_write);
    let r = s.record(&["--last-words-bytes", "8192"]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let lw = root_words(&r);
    assert_eq!(lw.text, numbered_tail(8192 - 5), "no NUL, in order");
    let t = r.log.trailer.as_ref().expect("a trailer");
    assert_eq!(t.lost.user_read_failed, 1, "{t:?}");
}
