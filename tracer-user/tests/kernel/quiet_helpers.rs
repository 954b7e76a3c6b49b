//! Quiet helpers stay quiet (issue 40, item 3), on the real kernel with
//! real programs: GNU parallel's terminal probe (Perl's backticks running
//! `sh -c "tput el </dev/tty" 2>/dev/null`, which exits 2 with no
//! terminal) before the jobs, one of which fails with exit 3 and "boom"
//! (the jobs through `xargs -P`: parallel itself is rarely installed);
//! a version manager's shim (pyenv's shape, in bash) whose version lookup
//! fails with its words to /dev/null before the shim execs the real
//! program. The job that failed leads line 1; the helper is ranked after
//! it and counted as routine; words said to /dev/null never reach a
//! headline.
use crate::common::{suites::require, *};
use tracer_user::{
    analysis::{Certificate, Rank},
    report::Report,
};

fn nonzero(rep: &Report) -> Vec<&Certificate> {
    rep.analysis
        .certificates
        .iter()
        .filter(|c| c.rank == Rank::NonzeroExit)
        .collect()
}

/// The one non-zero exit whose command line contains `needle`.
fn with<'a>(rep: &'a Report, needle: &str) -> &'a Certificate {
    let found: Vec<&Certificate> = nonzero(rep)
        .into_iter()
        .filter(|c| c.victim.process.command.contains(needle))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one non-zero exit with {needle:?}; verdict: {}",
        rep.verdict
    );
    found[0]
}

/// GNU parallel probes the terminal first (Perl's `qx{}` runs an outer
/// `sh -c`, which forks the inner one with fd 2 on /dev/null and passes
/// its 2 on), then runs the jobs. With the probe first, it led line 1
/// ahead of the job that failed. `setsid -w`: no controlling terminal,
/// as on a CI runner, whatever terminal the suite runs in.
#[test]
fn a_terminal_probe_does_not_lead_the_job_that_failed() {
    for program in ["perl", "tput", "xargs", "setsid"] {
        require(
            program,
            "Debian's perl-base, ncurses-bin, findutils, util-linux",
        );
    }
    let job = "perl -e 'my $el = qx{sh -c \"tput el </dev/tty\" 2>/dev/null}; exec @ARGV' \
               xargs -P 2 -n 1 sh -c \
               'if [ \"$0\" = 2 ]; then echo boom >&2; exit 3; fi; echo \"job $0 ok\"' <<<'1 2 3'";
    let r = record(&[], &["setsid", "-w", "bash", "-c", job]);
    assert_eq!(r.code(), Some(123), "xargs: a job failed; {}", r.stderr());
    let rep = default_report(&r);
    let probe = with(&rep, "tput el");
    assert!(probe.quiet_helper, "{probe:?}");
    assert!(probe.rank_reason.contains("a quiet helper"), "{probe:?}");
    let failed = with(&rep, "echo boom");
    assert!(!failed.quiet_helper);
    assert!(
        failed.headline.ends_with("— last words: `boom`"),
        "{}",
        failed.headline
    );
    // The job's failure ranks first; the probe after it.
    assert_eq!(nonzero(&rep)[0].id, failed.id, "{}", rep.verdict);
    assert!(probe.id > failed.id);
    assert_verdict_leads(
        &rep.verdict,
        &format!("No unexpected deaths; 1 non-zero exit: {}", failed.headline),
    );
    assert!(
        rep.verdict
            .ends_with("Routine: 1 quiet helper exited non-zero (its stderr to /dev/null)."),
        "{}",
        rep.verdict
    );
    assert!(!rep.verdict.contains("tput"), "{}", rep.verdict);
}

/// pyenv's shape: `version=$(version-name 2>/dev/null) || version=system`
/// (the lookup's own subshell, the lookup and the shim's subshell each
/// exit 1: one chain, one helper), a builtin's error to /dev/null in the
/// shim itself, then `exec` of the real program.
const SHIM: &str = r#"#!/usr/bin/env bash
set -e
dir=${0%/*}
version=$("$dir/version-name" 2>/dev/null) || version=system
{ echo "shim: line 23: enable: cannot open shared object realpath.dylib" >&2; } 2>/dev/null
exec "$@"
"#;

const VERSION_NAME: &str = r#"#!/usr/bin/env bash
v=$(cat "$PWD/.no-such-python-version" 2>/dev/null) || true
echo "shim: version \`${v:-3.99}' is not installed" >&2
exit 1
"#;

fn shim(dir: &std::path::Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    for (name, text) in [("shim", SHIM), ("version-name", VERSION_NAME)] {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir.join("shim").to_str().unwrap().to_string()
}

/// The real program behind the shim fails with exit 3 and "boom" on its
/// stderr: it leads, the shim's failed lookup is counted as routine.
#[test]
fn a_shims_failed_lookup_is_routine_beside_the_program_that_failed() {
    let dir = tempfile::tempdir().unwrap();
    let shim = shim(dir.path());
    let r = record(
        &[],
        &[
            &shim,
            "bash",
            "-c",
            "echo '2 passed'; echo boom >&2; exit 3",
        ],
    );
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let rep = default_report(&r);
    let failed = with(&rep, "echo boom");
    assert!(!failed.quiet_helper);
    assert_eq!(nonzero(&rep)[0].id, failed.id, "{}", rep.verdict);
    let lookup: Vec<&Certificate> = nonzero(&rep)
        .into_iter()
        .filter(|c| c.quiet_helper)
        .collect();
    assert_eq!(lookup.len(), 1, "{}", rep.verdict);
    assert!(
        lookup[0].victim.process.command.contains("version-name"),
        "{:?}",
        lookup[0].victim.process
    );
    assert_verdict_leads(
        &rep.verdict,
        &format!(
            "No unexpected deaths; 1 non-zero exit: {} — last words: `boom`",
            failed.headline.split(" — ").next().unwrap()
        ),
    );
    assert!(
        rep.verdict.contains(". Routine: 1 quiet helper"),
        "{}",
        rep.verdict
    );
    assert!(!rep.verdict.contains("version-name"), "{}", rep.verdict);
    // The lookup's chain (its subshell, itself, the shim's subshell) has
    // no "then:" line under a verdict that does not name it.
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    let under: Vec<&str> = md
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("**Run:**"))
        .collect();
    assert!(!under.iter().any(|l| l.starts_with("then:")), "{md}");
}

/// A pytest-style failure (its report on stdout, nothing on stderr) behind
/// the shim: its last words are the shim's, said to /dev/null before the
/// exec. Kept (labelled) in its certificate, never in its headline or the
/// verdict.
#[test]
fn words_said_to_dev_null_before_the_exec_never_headline_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let shim = shim(dir.path());
    let r = record(
        &[],
        &[&shim, "bash", "-c", "echo '1 failed, 2 passed'; exit 1"],
    );
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = default_report(&r);
    let program = with(&rep, "1 failed");
    assert!(
        !program.quiet_helper,
        "the program that failed is no helper"
    );
    let lw = program.last_words.as_ref().expect("the shim's words, kept");
    assert!(
        lw.to_null && lw.text.contains("enable: cannot open"),
        "{lw:?}"
    );
    assert!(
        !program.headline.contains("last words"),
        "{}",
        program.headline
    );
    assert!(!rep.verdict.contains("enable"), "{}", rep.verdict);
    assert!(
        rep.verdict
            .starts_with("No unexpected deaths; 1 non-zero exit: "),
        "{}",
        rep.verdict
    );
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(
        md.contains("Last words (stderr, written to /dev/null: no one saw them"),
        "{md}"
    );
}
