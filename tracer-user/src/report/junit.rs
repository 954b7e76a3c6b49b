//! The JUnit file (`--junit FILE`): what a CI system's test view shows of a
//! run, in the JUnit format as Jenkins, GitLab and GitHub's test-report
//! actions read it (the suite validates it against ci/test/junit.xsd).
//!
//! One test case per unexpected death and per signal that crossed the
//! run's boundary (what `--fail-on` counts), each named by its stable
//! signature ([`crate::text::shape::death`]: short command names, the cause, the
//! killer's relation; never a pid, a time or a temp path), so the same
//! death in the next run is the same test, and GitLab's "failed N times"
//! history builds up. The pid, the call and the details are in the failure
//! message and body. A passing test case `run` carries the verdict and what
//! the log lacks, so a clean run is a passing suite, not an empty one.
use std::{collections::BTreeMap, fmt::Write as _};

use super::Report;
use crate::{
    analysis::{Certificate, Direction, ForeignSignal, Rank},
    text::xml,
};

/// Groups of deaths the passing `run` case names.
const MAX_GROUP_NOTES: usize = 20;

use crate::analysis::fold::proc_shape;
pub use crate::analysis::fold::signature;

/// The signature of a signal across the run's boundary.
pub fn foreign_signature(f: &ForeignSignal) -> String {
    let sender = proc_shape(&f.sender);
    let target = proc_shape(&f.target);
    match f.direction {
        Direction::RunToOutside => format!(
            "{sender} sent {} outside the run ({target})",
            f.signal.sig_name
        ),
        Direction::OutsideToRun => format!(
            "{target} got {} from outside the run ({sender})",
            f.signal.sig_name
        ),
    }
}

/// Seconds, as the schema's SUREFIRE_TIME wants them (`12.345`).
fn seconds(ns: u64) -> String {
    format!("{}.{:03}", ns / 1_000_000_000, ns / 1_000_000 % 1000)
}

/// Names made unique in order: the second death of one signature in a run
/// is `NAME (2)`, so a test view counts both and the names stay the same
/// from run to run.
struct Names(BTreeMap<String, usize>);

impl Names {
    fn next(&mut self, sig: String) -> String {
        let n = self.0.entry(sig.clone()).or_default();
        *n += 1;
        if *n == 1 {
            sig
        } else {
            format!("{sig} ({n})")
        }
    }
}

struct Case {
    classname: &'static str,
    name: String,
    time_ns: u64,
    /// (type, message, body)
    failure: Option<(String, String, String)>,
}

fn death_case(c: &Certificate, names: &mut Names) -> Case {
    let v = &c.victim;
    let mut body = String::new();
    let _ = writeln!(body, "{}", c.headline);
    let _ = writeln!(
        body,
        "victim: pid {} (start {}), {} → {}, argv: {}",
        v.process.pid,
        v.process.start,
        v.started_at,
        v.ended_at,
        v.process.argv.join(" ")
    );
    if let Some(k) = &c.killer {
        let _ = writeln!(
            body,
            "killer: pid {} ({}), {}, argv: {}",
            k.process.pid,
            k.relation.as_str(),
            k.call,
            k.process.argv.join(" ")
        );
    }
    if let Some(t) = &v.test {
        let _ = writeln!(body, "victim's test: {}", t.plain());
    }
    if let Some(t) = c.killer.as_ref().and_then(|k| k.test.as_ref()) {
        let _ = writeln!(body, "killer's test: {}", t.plain());
    }
    let _ = writeln!(body, "cause: {}", c.cause.summary);
    let _ = writeln!(body, "rank: {}", c.rank_reason);
    if let Some(line) = c.last_words.as_ref().and_then(|w| w.line.as_deref()) {
        let _ = writeln!(body, "last words: {line}");
    }
    let _ = write!(body, "certificate #{} in report.md", c.id);
    Case {
        classname: "tracer.unexpected_death",
        name: names.next(signature(c)),
        time_ns: v.lifetime_ns,
        failure: Some((c.cause.kind.as_str().into(), c.headline.clone(), body)),
    }
}

fn foreign_case(f: &ForeignSignal, names: &mut Names) -> Case {
    let message = format!(
        "{} (pid {}) sent {} to {} (pid {}){}",
        f.sender.command,
        f.sender.pid,
        f.signal.sig_name,
        f.target.command,
        f.target.pid,
        match f.direction {
            Direction::RunToOutside => ", a process outside the run",
            Direction::OutsideToRun => ", from outside the run",
        }
    );
    let body = format!(
        "{message}\ncall: {}\ntime: {}\nsender argv: {}\ntarget argv: {}",
        f.call.as_deref().unwrap_or("not captured"),
        f.signal.time,
        f.sender.argv.join(" "),
        f.target.argv.join(" ")
    );
    Case {
        classname: "tracer.foreign_signal",
        name: names.next(foreign_signature(f)),
        time_ns: 0,
        failure: Some((f.direction.as_str().into(), message, body)),
    }
}

/// The JUnit document of a report.
pub fn render(r: &Report) -> String {
    let mut names = Names(BTreeMap::new());
    let a = &r.analysis;
    let mut cases: Vec<Case> = a
        .certificates
        .iter()
        .filter(|c| c.rank == Rank::Unexpected)
        .map(|c| death_case(c, &mut names))
        .collect();
    let daemon = r.run.mode == "daemon";
    cases.extend(
        a.foreign_signals
            .iter()
            .filter(|f| f.counted(daemon))
            .map(|f| foreign_case(f, &mut names)),
    );
    let failures = cases.len();
    let mut notes = vec![r.verdict.clone()];
    notes.extend(r.log.warnings.iter().cloned());
    // The deaths report.md folds, named as they are there: no test case of
    // their own (none is unexpected), but the run's record says them.
    for g in a.death_groups.iter().take(MAX_GROUP_NOTES) {
        notes.push(format!(
            "{} × {} ({}; certificate #{} in report.md)",
            g.count,
            g.signature,
            g.rank.as_str(),
            g.id
        ));
    }
    if a.death_groups.len() > MAX_GROUP_NOTES {
        notes.push(format!(
            "and {} more groups of deaths in report.json",
            a.death_groups.len() - MAX_GROUP_NOTES
        ));
    }
    cases.insert(
        0,
        Case {
            classname: "tracer",
            name: "run".into(),
            time_ns: r.run.duration_ns,
            failure: None,
        },
    );
    let tests = cases.len();
    let time = seconds(r.run.duration_ns);
    let mut o = String::new();
    o.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"tracer\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{time}\">"
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"tracer\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{time}\" timestamp=\"{}\" hostname=\"{}\">",
        xml::attr(&r.run.started_at),
        xml::attr(&r.run.hostname)
    );
    o.push_str("    <properties>\n");
    let mut props: Vec<(&str, String)> = vec![
        ("tracer.mode", r.run.mode.clone()),
        ("tracer.verdict", r.verdict.clone()),
        ("tracer.version", r.run.captured_by.clone()),
        ("tracer.kernel", r.run.kernel.clone()),
    ];
    if let Some(ci) = &r.run.ci {
        props.extend(ci.pairs().map(|(k, v)| (k, v.to_string())));
    }
    for (k, v) in props {
        let _ = writeln!(
            o,
            "      <property name=\"{k}\" value=\"{}\"/>",
            xml::attr(&v)
        );
    }
    o.push_str("    </properties>\n");
    for (i, c) in cases.iter().enumerate() {
        let _ = write!(
            o,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
            c.classname,
            xml::attr(&c.name),
            seconds(c.time_ns)
        );
        match (&c.failure, i) {
            (Some((ty, message, body)), _) => {
                let _ = writeln!(
                    o,
                    ">\n      <failure type=\"{}\" message=\"{}\">{}</failure>\n    </testcase>",
                    xml::attr(ty),
                    xml::attr(message),
                    xml::text(body)
                );
            }
            (None, 0) => {
                let _ = writeln!(
                    o,
                    ">\n      <system-out>{}</system-out>\n    </testcase>",
                    xml::text(&notes.join("\n"))
                );
            }
            (None, _) => o.push_str("/>\n"),
        }
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}
