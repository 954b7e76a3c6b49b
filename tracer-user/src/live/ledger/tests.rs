//! The ledger's report beside the whole log's, on real logs cut into looks.
use crate::{
    analysis::AnalysisOptions,
    eventlog::TestMark,
    labels::status::{self, tests::log_with_marks},
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
    // Its pytest worker's status mark, as the plugin writes it at load.
    let log = log_with_marks([|m: &mut TestMark| {
        m.text = "tracer-test-mark/1 {\"ev\":\"status\",\"runner\":\"pytest\",\"worker\":\"gw0\",\
                  \"version\":\"9.2.0\",\"seam\":\"pytest11 entry point\"}"
            .into();
    }]);
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
