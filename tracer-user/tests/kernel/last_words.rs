//! Last words: the end of what a process wrote to stderr, captured in the
//! kernel, bounded per process.
use crate::common::*;
use tracer_user::eventlog::{LastWords, Record};

fn last_words(r: &Recorded) -> Vec<&LastWords> {
    r.events()
        .filter_map(|e| match e {
            Record::LastWords(l) => Some(l),
            _ => None,
        })
        .collect()
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
        .find_map(|e| match e {
            Record::Exit(x) if x.group_dead && x.task.key() == lw[0].task.key() => Some(x.at.seq),
            _ => None,
        })
        .expect("worker exit");
    assert_eq!(lw[0].at.seq, exit_seq + 1);
}

/// `probe 2>/dev/null || fallback`: what the probe said went nowhere by its
/// author's choice. Its words are kept (flagged), but a short probe with no
/// children gets no certificate for them, so report.md does not quote it;
/// the same probe heard on stderr is certified with its words. (python3 is
/// run directly, not through a version manager's shim whose bash would
/// give it children.)
#[test]
fn a_probe_said_to_dev_null_does_not_headline_the_run() {
    let python = python3();
    // Built in the probe, so the words are not in any argv report.md shows.
    let probe = format!(
        "{python} -c 'import sys; sys.stderr.write(\"ModuleNot\" + \"FoundError: no yaml\\n\"); sys.exit(1)'"
    );
    let quiet = record(&[], &["sh", "-c", &format!("{probe} 2>/dev/null || true")]);
    assert_eq!(quiet.code(), Some(0));
    let lw = last_words(&quiet);
    let py = lw
        .iter()
        .find(|l| l.text.contains("ModuleNotFoundError: no yaml"))
        .expect("the probe's words, kept");
    assert!(py.to_null, "{py:?}");
    let md = std::fs::read_to_string(quiet.path("report.md")).unwrap();
    assert!(!md.contains("ModuleNotFoundError: no yaml"), "{md}");

    let heard = record(&[], &["sh", "-c", &format!("{probe} || true")]);
    let lw = last_words(&heard);
    assert!(lw.iter().all(|l| !l.to_null), "{lw:?}");
    let md = std::fs::read_to_string(heard.path("report.md")).unwrap();
    assert!(
        md.contains("last words: `ModuleNotFoundError: no yaml`"),
        "{md}"
    );
}

/// Under a terminal (a pty CI runner, `docker run -t`; here `script`),
/// Node's libuv reopens the tty and writes stderr through a new fd, and a
/// program may open its terminal anew (`/dev/tty`-style): both still reach
/// the screen fd 2 leads to, so both are last words.
#[test]
fn words_through_a_reopened_terminal_are_last_words() {
    let node = "node -e 'console.error(\"Error: worker lost its database\"); process.exit(3)'";
    let python = "python3 -c 'import os; f = open(os.ttyname(2), \"w\"); f.write(\"fatal: said through a new open of the tty\\n\"); f.flush(); os._exit(4)'";
    let r = record(
        &[],
        &[
            "script",
            "-qec",
            &format!("{node}; {python}; exit 0"),
            "/dev/null",
        ],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let lw = last_words(&r);
    let said = |needle: &str| {
        lw.iter()
            .find(|l| l.text.contains(needle))
            .unwrap_or_else(|| panic!("no last words with {needle:?}: {lw:?}"))
    };
    let n = said("Error: worker lost its database");
    assert_eq!(n.task.comm.as_deref(), Some("node"));
    assert!(!n.to_null);
    let p = said("fatal: said through a new open of the tty");
    assert!(p
        .task
        .comm
        .as_deref()
        .is_some_and(|c| c.starts_with("python")));
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
    let leaked: Vec<_> = r
        .events()
        .filter_map(|e| match e {
            Record::Leak(l) => Some(l.task.key()),
            _ => None,
        })
        .collect();
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
