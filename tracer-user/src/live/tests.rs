//! Live findings from real logs (tests/fixtures): each once, the metrics'
//! new series at 0 first, the OTLP request as a collector decodes it.
use std::path::Path;

use prost::Message;

use super::{fresh_in, Seen};
use crate::{analysis::AnalysisOptions, eventlog::read_log, metrics::Metrics};

fn fixture(name: &str) -> crate::eventlog::EventLog {
    read_log(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name),
    )
    .unwrap()
}

#[test]
fn each_finding_is_fresh_once() {
    let log = fixture("real_pgroup_kill.ndjson");
    let mut seen = Seen::default();
    let first = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert!(!first.certificates.is_empty());
    let again = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn a_new_series_is_scraped_at_zero_before_it_counts() {
    let log = fixture("real_memcg_oom.ndjson");
    let (metrics, registry, staged) = Metrics::new(&log.header, 2);
    let found = fresh_in(&log, &AnalysisOptions::default(), &mut Seen::default());
    assert!(found.certificates.iter().any(|c| c.oom.is_some()));
    metrics.observe(&found);
    let scrape = || {
        let mut s = String::new();
        staged.encode(&registry, &mut s).unwrap();
        s
    };
    let line = |text: &str, prefix: &str| {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in {text}"))
            .to_string()
    };
    let first = scrape();
    assert!(
        line(&first, "tracer_oom_kills_total{memcg=").ends_with(" 0"),
        "{first}"
    );
    let second = scrape();
    let oom = line(&second, "tracer_oom_kills_total{memcg=");
    assert!(oom.ends_with(" 1"), "{second}");
    // The label is the cgroup path cut to two components, never a pid.
    assert!(!oom.contains("pid"), "{oom}");
    assert!(line(&second, "tracer_deaths_total{").contains("rank=\""));
    assert!(second.contains("tracer_build_info{"));
    assert!(second.ends_with("# EOF\n"));
}

#[test]
fn otlp_request_round_trips_through_protobuf() {
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    let log = fixture("real_pgroup_kill.ndjson");
    let found = fresh_in(&log, &AnalysisOptions::default(), &mut Seen::default());
    let ctx = crate::otlp::Context::from_vars(&log.header, |k| {
        (k == "GITLAB_CI" || k == "CI_JOB_ID")
            .then(|| if k == "GITLAB_CI" { "true" } else { "77" }.into())
    });
    let req = ctx.request(&found, log.header.boot_to_wall_ns).unwrap();
    let back = ExportLogsServiceRequest::decode(&req.encode_to_vec()[..]).unwrap();
    assert_eq!(back, req);
    let rl = &back.resource_logs[0];
    let res: Vec<&str> = rl
        .resource
        .as_ref()
        .unwrap()
        .attributes
        .iter()
        .map(|a| a.key.as_str())
        .collect();
    assert!(res.contains(&"cicd.pipeline.task.run.id"), "{res:?}");
    let records = &rl.scope_logs[0].log_records;
    assert_eq!(
        records.len(),
        found.certificates.len()
            + found.near_misses.len()
            + found.foreign_signals.len()
            + found.leaks.len()
    );
    for (r, c) in records.iter().zip(&found.certificates) {
        assert_eq!(r.event_name, "tracer.death");
        let want = match c.rank {
            crate::analysis::Rank::Unexpected => 17,
            crate::analysis::Rank::NonzeroExit => 13,
            crate::analysis::Rank::Expected => 9,
        };
        assert_eq!(r.severity_number, want);
    }
}

/// A fold of identical failed calls grows while a daemon runs: each look
/// hands on only the calls added since the last, and the counter counts
/// calls, not folds.
#[test]
fn a_growing_near_miss_is_counted_by_its_new_calls() {
    let mut log = fixture("seed000_group_kill.ndjson");
    let miss = log
        .events
        .iter()
        .find(|e| matches!(e, crate::eventlog::Record::KillCall(k) if k.ret < 0))
        .cloned()
        .unwrap();
    let mut last = log
        .events
        .iter()
        .filter_map(|e| e.stamp())
        .map(|s| s.seq)
        .max()
        .unwrap();
    let mut more = |log: &mut crate::eventlog::EventLog, n: u64| {
        for _ in 0..n {
            let mut again = miss.clone();
            if let crate::eventlog::Record::KillCall(k) = &mut again {
                last += 1;
                k.at.seq = last;
                k.at.t += last;
            }
            log.events.push(again);
        }
    };
    let (metrics, registry, staged) = Metrics::new(&log.header, 2);
    let mut seen = Seen::default();
    let counted = |found: &super::Findings| found.near_misses.iter().map(|n| n.count).sum::<u64>();
    more(&mut log, 4);
    let first = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert_eq!((first.near_misses.len(), counted(&first)), (1, 5));
    metrics.observe(&first);
    more(&mut log, 10);
    let second = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert_eq!((second.near_misses.len(), counted(&second)), (1, 10));
    metrics.observe(&second);
    let third = fresh_in(&log, &AnalysisOptions::default(), &mut seen);
    assert!(third.near_misses.is_empty(), "{third:?}");
    let mut s = String::new();
    staged.encode(&registry, &mut s).unwrap();
    s.clear();
    staged.encode(&registry, &mut s).unwrap();
    let line = s
        .lines()
        .find(|l| l.starts_with("tracer_near_misses_total{errno=\"ESRCH\"}"))
        .unwrap_or_else(|| panic!("{s}"));
    assert!(line.ends_with(" 15"), "{line}");
}
