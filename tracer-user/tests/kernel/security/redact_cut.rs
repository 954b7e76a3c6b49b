//! `--redact` against secrets that a cut splits: argv cut by the kernel at
//! its capture size, stderr cut to `--last-words-bytes`. No fragment of the
//! secret may reach any output.
use std::path::Path;

use crate::common::*;

const SECRET: &str = "zq7Kx9Lm2Pw4";
const PATTERN: &str = "zq7K[A-Za-z0-9]{8}";

/// Fragments that would betray the secret: its first and last 3 bytes.
fn assert_no_fragment(dir: &Path, stderr: &str) {
    let (head, tail) = (&SECRET[..3], &SECRET[SECRET.len() - 3..]);
    let mut texts = vec![("tracer stderr".to_string(), stderr.to_string())];
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        texts.push((
            e.file_name().to_string_lossy().into_owned(),
            std::fs::read_to_string(e.path()).unwrap(),
        ));
    }
    for (name, text) in texts {
        assert!(
            !text.contains(head) && !text.contains(tail),
            "{name} holds a fragment of the secret"
        );
    }
}

#[test]
fn a_secret_cut_by_the_argv_capture_leaks_no_prefix() {
    // One exec per cut offset: the kernel keeps the first ARGV_LEN bytes of
    // argv, so one of these execs is cut 1..10 bytes into the secret. The
    // commands' own stderr is kept out of the test's comparison.
    let script = format!(
        r#"import os, sys
cap = {cap}
for k in range(1, 11):
    # argv bytes: "sh\0-c\0exit 0\0" + pad + "\0" + secret
    pad = cap - len("sh -c exit 0 ") - 1 - k
    pid = os.fork()
    if pid == 0:
        os.execv("/bin/sh", ["sh", "-c", "exit 0", "p" * pad, "{SECRET}"])
    os.waitpid(pid, 0)
sys.exit(3)
"#,
        cap = tracer_common::ARGV_LEN
    );
    let r = record(&["--redact", PATTERN], &["python3", "-c", &script]);
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let cut = r
        .events()
        .filter(|e| matches!(e, tracer_user::eventlog::Record::Exec(x) if x.argv_truncated))
        .count();
    assert!(cut >= 10, "the execs were not cut by the capture ({cut})");
    assert_no_fragment(r.dir.path(), &r.stderr());
}

#[test]
fn a_secret_cut_by_the_proc_argv_read_leaks_no_prefix() {
    // Processes that outlive the command: their leak records read argv from
    // /proc, cut as an exec's at ARGV_LEN bytes, one of them 1..10 bytes
    // into the secret.
    let script = format!(
        r#"import subprocess, sys
cap = {cap}
sleep = "import time; time.sleep(60)"
for k in range(1, 11):
    # /proc/PID/cmdline: "python3\0-c\0" + sleep + "\0" + pad + "\0" + secret
    pad = cap - len("python3 -c " + sleep + " ") - 1 - k
    subprocess.Popen(["python3", "-c", sleep, "p" * pad, "{SECRET}"], start_new_session=True)
sys.exit(3)
"#,
        cap = tracer_common::ARGV_LEN
    );
    let r = record(
        &["--redact", PATTERN, "--leaks", "kill", "--leak-grace", "1s"],
        &["python3", "-c", &script],
    );
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let cut = r
        .events()
        .filter(|e| matches!(e, tracer_user::eventlog::Record::Leak(l) if l.argv_truncated))
        .count();
    assert_eq!(cut, 10, "the leaks' argvs were not cut ({cut})");
    assert_no_fragment(r.dir.path(), &r.stderr());
}

#[test]
fn a_secret_straddling_the_last_words_cut_leaks_no_suffix() {
    // The secret, then enough bytes that a 256-byte tail starts inside it.
    let script = format!("printf '%s%0250d\\n' {SECRET} 0 >&2; exit 1");
    let r = record(
        &["--redact", PATTERN, "--last-words-bytes", "256"],
        &["bash", "-c", &script],
    );
    assert_eq!(r.code(), Some(1));
    // The command's own stderr passes through untouched (tracer does not own it).
    let tracer_stderr: String = r
        .stderr()
        .lines()
        .filter(|l| !l.starts_with(SECRET))
        .collect::<Vec<_>>()
        .join("\n");
    assert_no_fragment(r.dir.path(), &tracer_stderr);
    let log = std::fs::read_to_string(r.path("events.ndjson")).unwrap();
    assert!(log.contains("last_words"), "no last words were captured");
}
