//! Each test's growth of its worker's RSS, from the test windows the labels
//! know and the curve's per-process RSS: what names the test that leaked or
//! spiked (report.json's `resources.tests`). One function for every report:
//! `record`'s and `report`'s from the whole log's model, a daemon's look by
//! look (`live/`), as its reports come from no model of the whole run.
use serde::Serialize;

use crate::{
    labels::Labels,
    model::Model,
    resources::story::{self, RssSpan},
};

/// Tests listed by their growth.
pub const TESTS: usize = 20;

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct TestMemory {
    /// The test, as plain text.
    pub test: String,
    /// The test's window (the log's `t`): its start.
    pub from: u64,
    /// Its end, or the last sample's time when it never ended.
    pub until: u64,
    /// The process that ran it (its worker).
    pub pid: u32,
    /// That process's start time: with `pid`, its identity.
    pub start: u64,
    /// Its worker's RSS at the test's start, peak and end.
    #[serde(flatten)]
    pub rss: RssSpan,
    /// End minus start, bytes (negative: it shrank).
    pub grew_bytes: i64,
}

/// Each test window of a process whose RSS was sampled: its growth, the
/// most grown first (a report lists the first [`TESTS`]). An analysis has
/// them (`Analysis::test_memory`); this is for a model without one.
pub fn test_memory(model: &Model) -> Vec<TestMemory> {
    match sampled(model) {
        true => of(model, &Labels::build(model)),
        false => Vec::new(),
    }
}

/// Whether any process's RSS was sampled: without, no test has a growth
/// (and the labels need not be built for it).
pub(super) fn sampled(model: &Model) -> bool {
    !model.resources.procs.is_empty()
}

/// The same with the run's `labels`.
pub(super) fn of(model: &Model, labels: &Labels) -> Vec<TestMemory> {
    let mut out: Vec<TestMemory> = Vec::new();
    for &key in model.resources.procs.keys() {
        for (from, until, test) in labels.spans(key) {
            let to = until.unwrap_or(u64::MAX);
            let Some(rss) = story::rss_between(&model.resources, key, from, to) else {
                continue;
            };
            let last = model.resources.recent.back().map_or(from, |r| r.at.t);
            out.push(TestMemory {
                test: test.plain(),
                from,
                until: until.unwrap_or(last).max(from),
                pid: key.pid,
                start: key.start,
                grew_bytes: rss.end_bytes as i64 - rss.start_bytes as i64,
                rss,
            });
        }
    }
    out.sort_by_key(|t| std::cmp::Reverse(growth(t)));
    out
}

/// How much a test grew its worker: peak over start.
pub fn growth(t: &TestMemory) -> u64 {
    t.rss.peak_bytes.saturating_sub(t.rss.start_bytes)
}
