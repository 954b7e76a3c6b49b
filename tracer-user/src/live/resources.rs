//! A daemon's resources across its looks: the window keeps no sample (a
//! look's log holds records of what is live), so the samples go into one
//! bounded curve of the whole run here, which every look's model is given
//! (an OOM certificate then tells memory's climb from minutes before the
//! kill, not from the last two intervals), and each test's growth is kept
//! as the looks see it, so the stop's report has the `Resources` section a
//! `tracer report` of the same log has.
use std::collections::BTreeMap;

use crate::{
    analysis::{test_memory, TestMemory},
    eventlog::{ProcKey, Record},
    model::Model,
    resources::Curve,
};

/// Tests kept with their growth: the most grown first when more come. The
/// report lists the first `analysis::test_memory::TESTS`; the slack lets a
/// test still running climb back in.
const TESTS_KEPT: usize = 256;

#[derive(Default, Debug)]
pub struct LiveResources {
    /// The run's samples (bounded: `resources::curve`).
    pub curve: Curve,
    /// Each test's growth as the latest look that saw its window told it,
    /// by (worker, the test's start).
    tests: BTreeMap<(ProcKey, u64), TestMemory>,
}

impl LiveResources {
    /// What an earlier run of the daemon logged (a restart): its curve and
    /// its tests, as its model has them.
    pub fn of_earlier(m: &Model) -> Self {
        let mut r = Self {
            curve: m.resources.clone(),
            tests: BTreeMap::new(),
        };
        r.note_tests(test_memory(m));
        r
    }

    /// The samples of `new` joined to the curve; the other records back.
    pub fn take_samples(&mut self, new: Vec<Record>) -> Vec<Record> {
        new.into_iter()
            .filter(|rec| match rec {
                Record::Resources(r) => {
                    self.curve.push(r);
                    false
                }
                _ => true,
            })
            .collect()
    }

    /// The tests whose windows a look's analysis (its model given the
    /// whole curve) knows: each one's growth, the latest told.
    pub fn note_tests(&mut self, tests: Vec<TestMemory>) {
        for t in tests {
            let key = (
                ProcKey {
                    pid: t.pid,
                    start: t.start,
                },
                t.from,
            );
            self.tests.insert(key, t);
        }
        while self.tests.len() > TESTS_KEPT {
            let least = self
                .tests
                .iter()
                .min_by_key(|(_, t)| crate::analysis::test_memory::growth(t))
                .map(|(k, _)| *k);
            match least {
                Some(k) => self.tests.remove(&k),
                None => break,
            };
        }
    }

    /// The tests that grew most, as the report lists them.
    pub fn tests(&self) -> Vec<TestMemory> {
        let mut out: Vec<TestMemory> = self.tests.values().cloned().collect();
        out.sort_by_key(|t| std::cmp::Reverse(crate::analysis::test_memory::growth(t)));
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::{
        analysis::{test_memory, AnalysisOptions},
        eventlog::read_log,
        live::Live,
    };

    fn fixture(name: &str) -> crate::eventlog::EventLog {
        read_log(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(name),
        )
        .unwrap()
    }

    /// A daemon that looked every few records holds the curve, each test's
    /// growth and the OOM certificate's climb the whole log's analysis
    /// has: a leak's samples span many looks, its kill comes in the last.
    #[test]
    fn looks_keep_the_whole_runs_curve() {
        for name in ["real_resources_leak.ndjson", "real_resources_tests.ndjson"] {
            let log = fixture(name);
            let (whole_model, whole) = crate::analysis::analyze(&log, &AnalysisOptions::default());
            for chunk in [3, 20] {
                let at = format!("{name} in chunks of {chunk}");
                let mut live = Live::default();
                let looks: Vec<Vec<_>> = log.events.chunks(chunk).map(<[_]>::to_vec).collect();
                assert!(looks.len() > 5, "{at}");
                for part in looks {
                    live.look(&log.header, part, &AnalysisOptions::default(), false);
                }
                live.look(&log.header, Vec::new(), &AnalysisOptions::default(), true);
                let c = &live.resources.curve;
                assert_eq!(c.samples, whole_model.resources.samples, "{at}");
                assert!(c.samples > 3, "{at}");
                assert_eq!(c.history, whole_model.resources.history, "{at}");
                let points = |c: &crate::resources::Curve| {
                    c.procs
                        .iter()
                        .map(|(k, p)| (*k, p.points.clone()))
                        .collect::<Vec<_>>()
                };
                assert_eq!(points(c), points(&whole_model.resources), "{at}");
                assert_eq!(live.resources.tests(), test_memory(&whole_model), "{at}");
                let climb = |a: &crate::analysis::Analysis| {
                    a.certificates
                        .iter()
                        .filter_map(|c| c.oom.as_ref()?.memory.clone())
                        .collect::<Vec<_>>()
                };
                let got = climb(&live.ledger.finish().analysis);
                assert_eq!(got, climb(&whole), "{at}");
                if name == "real_resources_leak.ndjson" {
                    assert_eq!(got.len(), 1, "{at}: the leak's OOM kill");
                } else {
                    assert!(!live.resources.tests().is_empty(), "{at}");
                }
            }
        }
    }
}
