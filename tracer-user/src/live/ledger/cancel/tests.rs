//! The cancellation a daemon's ledger carries, from real logs
//! (tests/fixtures/real_cancel_*.ndjson, recorded by
//! tests/kernel/caught/cancelled.rs) fed to it look by look: its stop's verdict
//! names the cancellation on line 1 as `tracer report` of the same log does.
use std::path::Path;

use crate::{
    analysis::{AnalysisOptions, Certificate},
    eventlog::{read_log, EventLog, LogSummary, ProcKey, Record},
    live::{Live, MAX_CANCEL_SIGNALS},
    report::RunShape,
};

fn fixture(name: &str) -> EventLog {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let mut log = read_log(&path).unwrap();
    // A live look has no trailer yet: the whole log is judged without it.
    log.trailer = None;
    log
}

/// Line 1 of the whole log's report, as `tracer report` writes it, and
/// its analysis.
fn whole(log: &EventLog) -> (String, crate::analysis::Analysis) {
    let opts = AnalysisOptions {
        fold: true,
        ..AnalysisOptions::default()
    };
    let (model, a) = crate::analysis::analyze(log, &opts);
    let r =
        crate::report::json::report_from(&LogSummary::of(log), RunShape::of(&model), Vec::new(), a);
    (r.verdict, r.analysis)
}

/// Line 1 of a daemon's report at its stop, fed `log` in looks of
/// `chunk` records, as the daemon writes it (`report::write_analysed`).
fn ledgered(log: &EventLog, chunk: usize) -> (String, crate::analysis::Analysis) {
    let mut live = Live::default();
    let opts = AnalysisOptions::default();
    for part in log.events.chunks(chunk) {
        live.look(&log.header, part.to_vec(), &opts, false);
    }
    live.look(&log.header, Vec::new(), &opts, true);
    let a = live.ledger.finish().analysis;
    let model = crate::model::Model::build(log);
    let r =
        crate::report::json::report_from(&LogSummary::of(log), RunShape::of(&model), Vec::new(), a);
    (r.verdict, r.analysis)
}

/// Each death's victim and whether it is the cancellation's.
fn cancelled(a: &crate::analysis::Analysis) -> Vec<(ProcKey, bool)> {
    let key = |c: &Certificate| ProcKey {
        pid: c.victim.process.pid,
        start: c.victim.process.start,
    };
    let mut v: Vec<_> = a
        .shown_certificates()
        .map(|c| (key(c), c.cause.cancelled))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_daemons_stop_names_the_cancellation_on_line_1_as_a_report_of_its_log_does() {
    for (name, lead) in [
        (
            "real_cancel_github.ndjson",
            "The job was cancelled by GitHub's runner (`Runner.Worker`, pid ",
        ),
        (
            "real_cancel_gitlab.ndjson",
            "The job was cancelled by gitlab-runner (`gitlab-runner`, pid ",
        ),
        (
            "real_cancel_nextest.ndjson",
            "The tests were stopped by cargo-nextest (`cargo-nextest`, pid ",
        ),
    ] {
        let log = fixture(name);
        let (want, whole) = whole(&log);
        assert!(want.starts_with(lead), "{name}: {want}");
        let c = whole.cancellation.as_ref().unwrap();
        assert!(c.deaths > 0, "{name}: {c:?}");
        // One record a look (each signal in a look of its own: GitHub's
        // SIGINT many looks before the SIGKILLs), a few, a whole interval.
        for chunk in [1, 2, 7, 100] {
            let at = format!("{name} in looks of {chunk}");
            let (got, a) = ledgered(&log, chunk);
            assert_eq!(got, want, "{at}");
            assert_eq!(a.cancellation, whole.cancellation, "{at}");
            assert_eq!(cancelled(&a), cancelled(&whole), "{at}");
        }
    }
}

/// A run no runner cancelled has no cancellation in the ledger either: a
/// foreign kill of one worker, a kill of the run's own process group, a
/// daemon's log of many deaths.
#[test]
fn no_cancellation_in_the_log_none_in_the_ledger() {
    for name in [
        "real_outside_kill.ndjson",
        "real_pgroup_kill.ndjson",
        "real_daemon_all.ndjson",
    ] {
        let log = fixture(name);
        let (want, whole) = whole(&log);
        assert!(whole.cancellation.is_none(), "{name}: {want}");
        for chunk in [1, 7, 100] {
            let (got, a) = ledgered(&log, chunk);
            assert!(a.cancellation.is_none(), "{name} in looks of {chunk}");
            assert_eq!(got, want, "{name} in looks of {chunk}");
        }
    }
}

/// Every fixture a daemon could have written: the ledger's cancellation is
/// the whole log's, or none when it has none.
#[test]
fn the_ledgers_cancellation_is_the_whole_logs_for_every_fixture() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut compared = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Ok(mut log) = read_log(&path) else {
            continue;
        };
        // `record`'s own facts are in records a daemon never writes.
        if log
            .events
            .iter()
            .any(|r| matches!(r, Record::Leak(_) | Record::Snapshot(_)))
        {
            continue;
        }
        log.trailer = None;
        let (_, whole) = whole(&log);
        for chunk in [7, 100] {
            let (_, a) = ledgered(&log, chunk);
            assert_eq!(
                a.cancellation,
                whole.cancellation,
                "{} in looks of {chunk}",
                path.display()
            );
        }
        compared += 1;
    }
    assert!(compared > 30, "{compared} fixtures");
}

/// A group kill of more processes than the ledger lists: the first
/// [`MAX_CANCEL_SIGNALS`] are listed, the rest counted in the summary, and
/// what a later look shows again is not counted twice.
#[test]
fn past_the_bound_the_signals_are_counted_not_listed() {
    let log = fixture("real_cancel_gitlab.ndjson");
    let opts = AnalysisOptions {
        raw: true,
        ..AnalysisOptions::default()
    };
    let (_, mut a) = crate::analysis::analyze(&log, &opts);
    let sent = a.raw.take().unwrap().cancel.unwrap();
    let one = sent.steps[0].clone();
    // 1,500 SIGKILLs, one call each, to as many processes.
    let steps: Vec<_> = (0..1500u32)
        .map(|i| {
            let mut s = one.clone();
            s.signal.seq += u64::from(i);
            s.signal.t += u64::from(i);
            s.target.pid += i;
            s.call = Some(u64::from(i));
            s
        })
        .collect();
    let mut cancel = super::Cancel::default();
    // Three looks, each overlapping the one before.
    for (from, to) in [(0, 700), (500, 1200), (1000, 1500)] {
        let sent = crate::analysis::cancel::Sent {
            steps: steps[from..to].to_vec(),
            ..sent.clone()
        };
        cancel.add(Some(sent), &a);
        assert!(cancel.held() <= MAX_CANCEL_SIGNALS);
    }
    let c = cancel.finish().unwrap();
    assert_eq!(c.signals.len(), MAX_CANCEL_SIGNALS);
    assert!(
        c.summary.ends_with(": SIGKILL to 1500 processes"),
        "{}",
        c.summary
    );
}

/// A death a look certified as a foreign kill, before its window showed
/// the cancellation's signature, is mended at the stop into what the whole
/// log's analysis says of it: expected, `cause.cancelled`, the reason at
/// the end of its headline; and the sender's signals into the run are the
/// cancellation's, not counted by `--fail-on foreign-signal`.
#[test]
fn a_kill_certified_before_the_signature_was_seen_is_the_cancellations() {
    use crate::analysis::{CauseKind, Rank};
    let log = fixture("real_cancel_github.ndjson");
    let opts = AnalysisOptions {
        raw: true,
        ..AnalysisOptions::default()
    };
    let (_, mut a) = crate::analysis::analyze(&log, &opts);
    let sent = a.raw.take().unwrap().cancel.unwrap();
    let want = a.certificates.clone();
    assert!(!want.is_empty());
    let suffix = ": the job was cancelled by GitHub's runner";
    // As a look that did not see the signature certified them.
    let mut certs = want.clone();
    let mut counts = a.counts;
    for c in &mut certs {
        assert_eq!(c.cause.kind, CauseKind::KilledOutsideRun);
        assert!(c.cause.summary.ends_with(suffix), "{}", c.cause.summary);
        let was = c.cause.summary.clone();
        c.cause.summary = was.strip_suffix(suffix).unwrap().to_string();
        c.headline = c.headline.replacen(&was, &c.cause.summary, 1);
        c.cause.cancelled = false;
        c.rank = Rank::Unexpected;
        c.rank_reason = "killed by a process outside the run".into();
        counts.expected -= 1;
        counts.unexpected += 1;
    }
    let mut foreign = a.foreign_signals.clone();
    assert!(foreign.iter().all(|f| f.cancellation));
    for f in &mut foreign {
        f.cancellation = false;
    }
    let mut cancel = super::Cancel::default();
    cancel.add(Some(sent), &a);
    cancel.mend(certs.iter_mut(), &mut counts);
    cancel.mark(&mut foreign);
    assert_eq!(certs, want);
    assert_eq!(counts, a.counts);
    assert_eq!(foreign, a.foreign_signals);
    let c = cancel.finish().unwrap();
    assert_eq!(c, a.cancellation.unwrap());
}
