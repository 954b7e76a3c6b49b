//! The ledger's report beside the whole log's, on real logs cut into looks.
use std::path::Path;

use crate::{
    analysis::AnalysisOptions,
    eventlog::{read_log, Record},
    labels::status,
    live::Live,
    model::Model,
};

/// A daemon's report lists what the test integrations said of
/// themselves, as `tracer report` of the same log does: a status mark is
/// written once, as its process loads the integration, and the looks that
/// follow may no longer hold it (it once went unreported under the
/// daemon: the sidecar named the tests and never said which way).
#[test]
fn the_integrations_status_lines_outlive_their_look() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real_resources_tests.ndjson");
    let mut log = read_log(&path).unwrap();
    // Its pytest worker's status mark, as the plugin writes it at load, put
    // before the worker's first test mark.
    let at = log
        .events
        .iter()
        .position(|r| matches!(r, Record::TestMark(_)))
        .expect("a test mark");
    let Record::TestMark(mut m) = log.events[at].clone() else {
        unreachable!()
    };
    m.text = "tracer-test-mark/1 {\"ev\":\"status\",\"runner\":\"pytest\",\"worker\":\"gw0\",\
              \"version\":\"9.2.0\",\"seam\":\"pytest11 entry point\"}"
        .into();
    log.events.insert(at, Record::TestMark(m));
    let whole = status::collect(&Model::build(&log), false);
    assert_eq!(whole.len(), 1, "{whole:?}");
    for chunk in [3, 20] {
        let mut live = Live::default();
        for part in log.events.chunks(chunk) {
            live.look(
                &log.header,
                part.to_vec(),
                &AnalysisOptions::default(),
                false,
            );
        }
        live.look(&log.header, Vec::new(), &AnalysisOptions::default(), true);
        let got = live.ledger.finish().test_integrations;
        assert_eq!(got, whole, "in looks of {chunk} records");
    }
}
