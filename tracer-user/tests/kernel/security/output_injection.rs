//! Output injection: a real python3 worker with a hostile argv, a hostile
//! comm, a hostile executable path and hostile stderr is killed by a bash
//! whose argv is hostile too. The reports must stay intact: the verdict one
//! line, no control bytes, balanced code spans, no heading, HTML block or
//! CI workflow command coming from the data, no `</script>` breakout, and
//! the stderr summary inert. The log keeps the raw bytes.
use std::{os::unix::fs::symlink, path::Path, process::Command};

use tracer_user::text::invariants;

use crate::common::*;

/// What a hostile worker prints before it dies: colour, cursor moves, a
/// fence that would close report.md's, a heading, HTML, workflow commands.
const STDERR: &str =
    "\x1b[31m\x1b[1mCaused by: Error\x1b[22m: Worker exited unexpectedly\x1b[39m\n\
                      ```\n# pwned heading\n<h1>pwned html</h1>\n::error::pwned annotation\n\
                      ##[error]pwned v1\r\x1b[2Kprogress 100%\n\x1b]0;pwned title\x07done\n";

/// The worker: sets a hostile comm, says its words, tells the script its
/// pid on stdout, then waits to be killed.
const WORKER: &str = r#"
import ctypes, os, sys, time
ctypes.CDLL(None).prctl(15, b"`\n#<h1>\x1b[31m|::", 0, 0, 0)
sys.stderr.write(os.environ["HOSTILE_STDERR"]); sys.stderr.flush()
print(os.getpid(), flush=True)
time.sleep(120)
"#;

const ARGS: [&str; 5] = [
    "arg\n# pwned heading",
    "`x`|y``",
    "\x1b]0;title\x07\x1b[2J",
    "::error::pwned argv",
    "</script><h1>H</h1>\u{202e}",
];

fn real_python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is installed");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn hostile_argv_and_stderr_leave_the_reports_intact() {
    require_root();
    // The executable is reached through a directory whose name is hostile:
    // exec's filename is that path.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("bin\n# pwned dir `|<h1>");
    std::fs::create_dir(&dir).unwrap();
    let exe = dir.join("python3");
    symlink(real_python(), &exe).unwrap();
    let exe = exe.to_str().unwrap();

    // bash starts the worker as a coprocess, reads its pid from it (so it
    // signals only its own child), then a bash with a hostile $0 kills it.
    let script = "coproc W { \"$0\" -c \"$1\" \"${@:2}\" 2>/dev/null; }\n\
                  read -r pid <&\"${W[0]}\"\n\
                  bash -c 'kill -9 \"$1\"' $'::error::killer\\n# pwned `' \"$pid\"\n\
                  wait\n\
                  exit 0";
    let mut cmd = vec!["bash", "-c", script, exe, WORKER];
    cmd.extend(ARGS);
    let r = record_env(&[], &cmd, &[("HOSTILE_STDERR", STDERR)]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());

    // The log keeps the raw bytes.
    let words = r
        .events()
        .last_words()
        .find(|l| l.text.contains("Caused by"))
        .map(|l| l.text.clone())
        .expect("the worker's last words are in the log");
    assert!(words.contains("\x1b[31m"), "{words:?}");

    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    let v = invariants::report_md(&md);
    assert!(v.is_empty(), "{v:#?}\n{md}");
    let verdict = md.lines().next().unwrap();
    assert!(verdict.starts_with("1 unexpected death: "), "{verdict}");
    assert!(verdict.contains("killed by SIGKILL"), "{verdict}");
    // The one heading per certificate is tracer's; the data made none.
    let headings = invariants::headings(&md);
    assert!(
        headings.iter().all(|h| !h.contains("pwned")),
        "{headings:#?}"
    );
    // Last words as the terminal showed them: colours gone, text kept.
    assert!(
        md.contains("Caused by: Error: Worker exited unexpectedly\n"),
        "{md}"
    );
    assert!(md.contains("\n\\::error::pwned annotation\n"), "{md}");
    // The headline tells the worker by its entry point, not its flags.
    assert!(verdict.contains("`python3 -c "), "{verdict}");

    let html = std::fs::read_to_string(r.path("report.html")).unwrap();
    let v = invariants::html(&html);
    assert!(v.is_empty(), "{v:#?}");
    for bad in ["<h1>H</h1>", "<h1>pwned", "</script><h1>"] {
        assert!(!html.contains(bad), "{bad} reached report.html");
    }

    // tracer's own stderr: the summary after the command's output.
    let err = r.stderr();
    let start = err
        .find("tracer: 1 unexpected death")
        .unwrap_or_else(|| panic!("no summary in:\n{err}"));
    let summary = &err[start..];
    let v = invariants::terminal(summary);
    assert!(v.is_empty(), "{v:#?}\n{summary}");

    // `tracer report` re-renders the same bytes.
    let again = tempfile::tempdir().unwrap();
    let out = report_cmd(&r.path("events.ndjson"), again.path());
    assert!(out.status.success(), "{}", no_panic(&out));
    for f in ["report.md", "report.html", "report.json"] {
        assert_eq!(
            std::fs::read(again.path().join(f)).unwrap(),
            std::fs::read(r.path(f)).unwrap(),
            "{f}"
        );
    }
    assert!(Path::new(exe).exists());
}
