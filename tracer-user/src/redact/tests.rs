//! The redactor against every record type and a real log.
use std::path::Path;

use super::*;
use crate::{
    eventlog::{read_log, Stamp},
    report::{build_report, render_json, ReportOptions},
    snapshot::{FdEntry, FdKind, ProcSnapshot, Snapshot, SyscallState, ThreadSnapshot},
};

fn redactor(patterns: &[&str]) -> Redactor {
    Redactor::new(&patterns.iter().map(|p| p.to_string()).collect::<Vec<_>>()).unwrap()
}

fn task(comm: &str) -> Task {
    Task {
        pid: 10,
        tid: 10,
        start: 1,
        comm: Some(comm.into()),
    }
}

#[test]
fn only_the_matched_part_is_masked() {
    let r = redactor(&[r"abc\d+"]);
    assert_eq!(r.text("--token=abc123"), "--token=[REDACTED]");
    assert_eq!(r.text("abc1 and abc22"), "[REDACTED] and [REDACTED]");
    assert!(matches!(r.text("no secret here"), Cow::Borrowed(_)));
}

#[test]
fn overlapping_and_touching_matches_become_one_mask() {
    let r = redactor(&["hunter", "ter22", "22x"]);
    assert_eq!(r.text("pw=hunter22x!"), "pw=[REDACTED]!");
    let r = redactor(&["ab", "cd"]);
    assert_eq!(r.text("abcd ab-cd"), "[REDACTED] [REDACTED]-[REDACTED]");
}

#[test]
fn masks_are_never_matched_again_and_empty_matches_change_nothing() {
    // A pattern that would match the mask itself is only applied to the
    // original text.
    let r = redactor(&["secret", r"RED\w*"]);
    assert_eq!(r.text("a secret"), "a [REDACTED]");
    let r = redactor(&["x*", "^"]);
    assert!(matches!(r.text("abc"), Cow::Borrowed("abc")));
}

#[test]
fn replacement_text_is_literal() {
    let r = redactor(&[r"(?P<k>key)=\w+"]);
    assert_eq!(r.text("key=v $k"), "[REDACTED] $k");
}

#[test]
fn invalid_pattern_is_one_line_without_the_pattern() {
    let e = Redactor::new(&["ok".into(), "hunter(22".into()]).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(
        e,
        TracerError::BadRedact {
            which: 2,
            of: 2,
            ..
        }
    ));
    assert_eq!(msg.lines().count(), 1, "{msg}");
    assert!(!msg.contains("hunter"), "{msg}");
    assert!(msg.contains("unclosed group"), "{msg}");
}

#[test]
fn no_patterns_change_nothing() {
    let r = Redactor::default();
    let rec = Record::LastWords(LastWords {
        at: Stamp::default(),
        task: task("sh"),
        text: "hunter22".into(),
        bytes_total: 8,
        truncated: false,
        to_null: false,
    });
    assert!(matches!(r.apply(&rec), Cow::Borrowed(_)));
    let mut h = header();
    assert!(!r.header(&mut h));
    assert_eq!(h.redactions, 0);
}

fn header() -> Header {
    Header {
        schema: 1,
        tracer_version: "0".into(),
        kernel: "k".into(),
        arch: None,
        hostname: "h".into(),
        mode: "record".into(),
        command: vec!["deploy".into(), "--password=hunter22".into()],
        tracer_pid: 1,
        started_at: String::new(),
        boot_to_wall_ns: 0,
        hooks: Vec::new(),
        ring_buffer_bytes: 0,
        argv_capture_bytes: 0,
        scope: None,
        segment: 0,
        pid_namespace: None,
        command_user: Some("hunter (uid 1000)".into()),
        redactions: 0,
        ci: None,
        env_changes: Vec::new(),
    }
}

#[test]
fn header_command_is_masked_and_patterns_counted() {
    let r = redactor(&[r"hunter\d+", "nothing"]);
    let mut h = header();
    assert!(r.header(&mut h));
    assert_eq!(h.command, ["deploy", "--password=[REDACTED]"]);
    assert_eq!(h.redactions, 2);
    // A re-render with more patterns adds to the count; the user's name
    // is not a command line.
    r.header(&mut h);
    assert_eq!(h.redactions, 4);
    assert_eq!(h.command_user.as_deref(), Some("hunter (uid 1000)"));
}

#[test]
fn every_command_line_and_stderr_field_is_masked() {
    let r = redactor(&[r"hunter\d+"]);
    let secret = |s: &str| s.replace("S", "hunter22");
    let mut recs = vec![
        Record::Exec(Exec {
            at: Stamp::default(),
            task: task(&secret("S")),
            old_tid: None,
            filename: secret("/bin/S"),
            argv: vec!["tool".into(), secret("--pw=S")],
            argv_truncated: false,
            test_env: Default::default(),
        }),
        Record::Signal(Signal {
            at: Stamp::default(),
            sender: task("kill"),
            target: task("sh"),
            sig: 9,
            sig_name: "SIGKILL".into(),
            code: 0,
            code_name: "SI_USER".into(),
            errno: 0,
            group: true,
            result: "delivered".into(),
            call: None,
            sender_argv: Some(vec!["kill".into(), secret("S")]),
            sender_argv_truncated: false,
            seccomp_syscall: None,
        }),
        Record::LastWords(LastWords {
            at: Stamp::default(),
            task: task("sh"),
            text: secret("error: bad password S\n"),
            bytes_total: 30,
            truncated: false,
            to_null: false,
        }),
        Record::Leak(Leak {
            at: Stamp::default(),
            task: task("sleep"),
            ppid: 1,
            pgid: 1,
            sid: 1,
            argv: vec!["sleep".into(), secret("S")],
            argv_truncated: false,
            exe: Some(secret("/opt/S/sleep")),
            reparented: true,
            detached: false,
            fds: vec!["0: /dev/null".into(), secret("3: /tmp/S.txt")],
            fds_left_out: 0,
            withheld: None,
        }),
        Record::Existing(Existing {
            at: Stamp::default(),
            task: task("daemon"),
            ppid: 1,
            argv: vec![secret("--key=S")],
            argv_truncated: false,
            exe: None,
            ns: None,
        }),
    ];
    for rec in &mut recs {
        let before = rec.clone();
        assert!(r.record(rec), "{before:?}");
        let json = serde_json::to_string(rec).unwrap();
        assert!(!json.contains("hunter22"), "{json}");
        assert!(json.contains(MASK), "{json}");
    }
    let Record::Exec(e) = &recs[0] else { panic!() };
    assert_eq!(e.argv, ["tool", "--pw=[REDACTED]"]);
    assert_eq!(e.filename, "/bin/[REDACTED]");
    let Record::Leak(l) = &recs[3] else { panic!() };
    assert_eq!(l.fds, ["0: /dev/null", "3: /tmp/[REDACTED].txt"]);
}

fn orphan(argv: &[&str]) -> ProcSnapshot {
    ProcSnapshot {
        pid: 50,
        start_ns: 1,
        ppid: 1,
        pgid: 50,
        sid: 50,
        comm: "sleep".into(),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        exe: Some("/usr/bin/sleep".into()),
        state: 'S',
        threads: vec![ThreadSnapshot {
            tid: 50,
            comm: "sleep".into(),
            state: 'S',
            wchan: Some("hrtimer_nanosleep".into()),
            stack: Vec::new(),
            syscall: SyscallState::Unknown,
        }],
        fds: vec![FdEntry {
            fd: 3,
            target: "/tmp/hunter22".into(),
            access: None,
            kind: FdKind::File {
                path: "/tmp/hunter22".into(),
            },
        }],
        argv_truncated: false,
        threads_left_out: 0,
        fds_left_out: 0,
        vanished: false,
        withheld: None,
        frozen: None,
    }
}

#[test]
fn snapshot_findings_are_derived_again_from_masked_processes() {
    // The argv is long: the finding quotes it cut at 120 characters, in
    // the middle of the secret, where the regex can no longer match it.
    let pad = "x".repeat(109);
    let argv = ["sleep", pad.as_str(), "hunter22"];
    let processes = vec![orphan(&argv)];
    let mut s = Snapshot {
        findings: crate::snapshot::analyze(&processes),
        processes,
        notes: Vec::new(),
    };
    let cut = &s.findings[0].detail;
    assert!(
        cut.contains("hunt...") && !cut.contains("hunter22"),
        "{cut}"
    );
    let r = redactor(&[r"hunter\d+"]);
    let copy = r.snapshot_copy(&s);
    assert!(r.snapshot(&mut s));
    assert_eq!(copy, s);
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains("hunt"), "{json}");
    assert_eq!(s.findings.len(), 1);
    assert_eq!(s.findings[0].kind, crate::snapshot::ORPHANED);
    assert_eq!(s.processes[0].fds[0].target, "/tmp/[REDACTED]");
}

#[test]
fn a_redacted_fixture_gives_the_same_analysis() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed000_group_kill.ndjson");
    let log = read_log(&path).unwrap();
    let mut masked = read_log(&path).unwrap();
    redactor(&[r"worker\.js", "vitest"]).log(&mut masked);
    let text = serde_json::to_string(&masked.events).unwrap();
    assert!(!text.contains("worker.js") && !text.contains("vitest"));
    let opts = ReportOptions::default();
    let (a, b) = (build_report(&log, &opts), build_report(&masked, &opts));
    assert_eq!(masked.header.redactions, 2);
    assert_eq!(b.run.command, ["npx", "[REDACTED]", "run"]);
    assert_eq!(a.analysis.counts, b.analysis.counts);
    // The same causes, ranks and links; a summary that names a masked
    // command (a consequence names its child) differs only by the mask.
    let victims = |r: &crate::report::Report| -> Vec<(u32, String)> {
        r.analysis
            .certificates
            .iter()
            .map(|c| {
                let cause = crate::analysis::Cause {
                    summary: String::new(),
                    ..c.cause.clone()
                };
                let link = format!("{:?} {:?}", c.rank, c.consequence_of);
                (c.victim.process.pid, format!("{cause:?} {link}"))
            })
            .collect()
    };
    assert_eq!(victims(&a), victims(&b));
    let json = render_json(&b);
    assert!(!json.contains("worker.js") && json.contains(MASK));
}

#[test]
fn a_secret_cut_by_the_kernel_leaks_no_prefix() {
    let r = redactor(&[r"hunter\d{4,}"]);
    // argv cut in the kernel inside the secret: the pattern no longer
    // matches "hunter1", but its fragment is masked all the same.
    let mut exec = Record::Exec(Exec {
        at: Stamp::default(),
        task: task("tool"),
        old_tid: None,
        filename: "/bin/tool".into(),
        argv: vec!["tool".into(), "--pw=hunter1".into()],
        argv_truncated: true,
        test_env: Default::default(),
    });
    assert!(r.record(&mut exec));
    let Record::Exec(e) = &exec else { panic!() };
    assert_eq!(e.argv, ["tool", "--pw=[REDACTED]"]);
    // stderr cut at its front inside the secret: "4567 failed" would leak
    // the secret's end.
    let mut lw = Record::LastWords(LastWords {
        at: Stamp::default(),
        task: task("sh"),
        text: "4567 failed\n".into(),
        bytes_total: 4096,
        truncated: true,
        to_null: false,
    });
    assert!(r.record(&mut lw));
    let Record::LastWords(l) = &lw else { panic!() };
    assert_eq!(l.text, "[REDACTED] failed\n");
    // Not cut: nothing beyond the matches is touched.
    let mut whole = Record::LastWords(LastWords {
        at: Stamp::default(),
        task: task("sh"),
        text: "4567 failed\n".into(),
        bytes_total: 12,
        truncated: false,
        to_null: false,
    });
    assert!(!r.record(&mut whole));
}

/// argv read from /proc is cut as an exec's is: wherever it was cut, the
/// fragment after the last separator may begin a secret, and is masked.
#[test]
fn argv_cut_when_read_from_proc_loses_its_last_fragment() {
    let r = redactor(&[r"hunter\d+"]);
    let cut = || vec!["java".to_string(), "--token=hun".to_string()];
    let mut recs = vec![
        Record::Existing(Existing {
            at: Stamp::default(),
            task: task("java"),
            ppid: 1,
            argv: cut(),
            argv_truncated: true,
            exe: None,
            ns: None,
        }),
        Record::Signal(Signal {
            at: Stamp::default(),
            sender: task("java"),
            target: task("sh"),
            sig: 15,
            sig_name: "SIGTERM".into(),
            code: 0,
            code_name: "SI_USER".into(),
            errno: 0,
            group: true,
            result: "delivered".into(),
            call: None,
            sender_argv: Some(cut()),
            sender_argv_truncated: true,
            seccomp_syscall: None,
        }),
        Record::Snapshot(crate::eventlog::SnapshotTaken {
            at: Stamp::default(),
            reason: "timeout".into(),
            snapshot: Snapshot {
                processes: vec![ProcSnapshot {
                    argv_truncated: true,
                    ..orphan(&["java", "--token=hun"])
                }],
                findings: Vec::new(),
                notes: Vec::new(),
            },
        }),
    ];
    for rec in &mut recs {
        assert!(r.record(rec));
        let json = serde_json::to_string(rec).unwrap();
        assert!(
            !json.contains("hun\"") && json.contains("--token=[REDACTED]"),
            "{json}"
        );
    }
    // Not cut: nothing to mask but what matches.
    let mut whole = Record::Existing(Existing {
        at: Stamp::default(),
        task: task("java"),
        ppid: 1,
        argv: cut(),
        argv_truncated: false,
        exe: None,
        ns: None,
    });
    assert!(!r.record(&mut whole));
}
