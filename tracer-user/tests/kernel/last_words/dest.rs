//! Where last words land: fd 2 on /dev/null is flagged (never a headline
//! for a probe), a reopened terminal still carries them. Real python3, node
//! and `script` (a pty): kept out of the VM's busybox suites, which prove
//! the same programs load on every kernel (`last_words`).
use crate::common::*;
use tracer_user::eventlog::LastWords;

fn last_words(r: &Recorded) -> Vec<&LastWords> {
    r.events().last_words().collect()
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
