//! Last words: the end of what a process wrote to stderr, captured in the
//! kernel, bounded per process.
mod common;

use common::*;
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
