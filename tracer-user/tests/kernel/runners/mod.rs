//! Real test runners on real suites (tests/fixtures/suites, set up by
//! common/suites.rs): in each, a cleanup test SIGKILLs what a sibling test
//! owns — the sibling's worker process, or a helper process it spawned —
//! and `tracer record -- <runner>` must certify what it can say today: the
//! victim killed by SIGKILL, the cleanup test's process as the killer with
//! its relation to the victim, and the runner's own failure linked to the
//! kill where the cascade rules (docs/report.md, "Cascades") say so. Each
//! suite also passes on its own with the kill off (`SUITE_KILL=0`): it is an
//! ordinary suite, not one written for tracer. One module per runner.
//!
//! Wall times of each test, measured warm on the 2-core test machine (run
//! with the kill off, then under tracer) are in each module's doc.
use tracer_user::{
    analysis::{CauseKind, Certificate, LinkEvidence, Rank, Relation},
    labels::{Phase, Runner, Source, TestAt, Via},
    report::{build_report, render_markdown, Report, ReportOptions},
};

use crate::common::{assert_verdict_leads, suites::Suite, Recorded};

mod cargo_test;
mod go;
mod jest;
mod matrix;
mod mocha;
mod never_at_the_cost;
mod nextest;
mod node_lts;
mod node_test;
mod playwright;
mod pytest;
mod sidecar;
mod vitest;

pub(super) fn report(r: &Recorded) -> Report {
    build_report(&r.log, &ReportOptions::default())
}

/// Every headline, for a failure message.
pub(super) fn headlines(rep: &Report) -> String {
    let lines: Vec<String> = rep
        .analysis
        .certificates
        .iter()
        .map(|c| {
            let link = c
                .consequence_of
                .as_ref()
                .map(|l| format!(" <- #{} {:?}: {}", l.of, l.evidence, l.detail))
                .unwrap_or_default();
            format!("#{} [{:?}] {}{link}", c.id, c.rank, c.headline)
        })
        .collect();
    format!("verdict: {}\n{}", rep.verdict, lines.join("\n"))
}

/// The certificate of process `pid`: exactly one.
pub(super) fn cert_of(rep: &Report, pid: u32) -> &Certificate {
    let found: Vec<&Certificate> = rep
        .analysis
        .certificates
        .iter()
        .filter(|c| c.victim.process.pid == pid)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one certificate for pid {pid}; {}",
        headlines(rep)
    );
    found[0]
}

/// The process in `victim_file` died of the SIGKILL the cleanup test's
/// process (`killer.pid`) sent it with kill(2), and the certificate says
/// so, with `relation` between the two. Returns the victim's certificate.
pub(super) fn killed_by_the_cleanup_test<'a>(
    rep: &'a Report,
    suite: &Suite,
    victim_file: &str,
    relation: Relation,
) -> &'a Certificate {
    let victim = suite.pid(victim_file);
    let killer = suite.pid("killer.pid");
    let c = cert_of(rep, victim);
    let all = headlines(rep);
    assert_eq!(c.cause.kind, CauseKind::KilledInRun, "{all}");
    let sig = c.cause.signal.as_ref().expect("the fatal signal");
    assert_eq!(sig.sig_name, "SIGKILL", "{all}");
    let k = c
        .killer
        .as_ref()
        .unwrap_or_else(|| panic!("a killer: {all}"));
    assert_eq!(k.process.pid, killer, "the cleanup test's process: {all}");
    assert_eq!(k.relation, relation, "{all}");
    assert_eq!(k.syscall.as_deref(), Some("kill"), "{all}");
    assert_eq!(k.target_arg, Some(i64::from(victim)), "{all}");
    assert!(
        c.headline.contains("killed by SIGKILL from")
            && c.headline.contains(&format!("(pid {killer})")),
        "{all}"
    );
    c
}

/// The suite `make` sets up, run twice, each time in a fresh `SUITE_DIR`:
/// on its own with the kill off (it must pass), then under `tracer record`
/// with the kill on, `extra` flags for tracer. Prints both wall times
/// (`--nocapture` shows them).
pub(super) fn run(
    name: &str,
    make: impl Fn() -> Suite,
    extra: &[&str],
    argv: &[&str],
) -> (Suite, Recorded) {
    let quiet = make().passes_without_the_kill(argv);
    let suite = make();
    let (r, took) = suite.record(extra, argv);
    eprintln!("runners: {name}: {quiet:.1?} without the kill, {took:.1?} under tracer");
    (suite, r)
}

/// A JavaScript suite run as `how` says: without tracer and without the
/// kill first (it must pass, the integration loaded as the recorded run
/// loads it), then under `tracer record` — with `--tests` for `Preload`,
/// which must then list its one change, `NODE_OPTIONS`, in the header.
pub(super) fn run_node(
    name: &str,
    how: Node,
    make: impl Fn() -> Suite,
    argv: &[&str],
) -> (Suite, Recorded) {
    let quiet = how.env(make()).passes_without_the_kill(argv);
    let suite = make();
    let (r, took) = suite.record(how.tracer_args(), argv);
    eprintln!("runners: {name}: {quiet:.1?} without the kill, {took:.1?} under tracer");
    let vars: Vec<&str> = r
        .log
        .header
        .env_changes
        .iter()
        .map(|c| c.var.as_str())
        .collect();
    if how == Node::Preload {
        assert!(vars.contains(&"NODE_OPTIONS"), "{vars:?}");
    } else {
        assert!(vars.is_empty(), "{vars:?}");
    }
    (suite, r)
}

/// The cascade rules' window (docs/report.md, "Cascades"): an exit this
/// soon after its child's death is linked to it with no other evidence.
const WINDOW_NS: u64 = 5_000_000_000;

/// The worker-victim runners: the kill is the run's one unexpected death,
/// the verdict leads with it, and the runner's own exit (`runner`) is its
/// consequence by `evidence`. A link by the window alone holds only when
/// the runner exited within it: past it (pytest-xdist starting a new worker
/// on a loaded machine) the exit stands unlinked, as the rules say, and the
/// test checks that instead.
pub(super) fn root_cause_then(
    rep: &Report,
    dead: &Certificate,
    runner: &Certificate,
    evidence: LinkEvidence,
) {
    let all = headlines(rep);
    assert_eq!(dead.rank, Rank::Unexpected, "{all}");
    assert_eq!(rep.analysis.counts.unexpected, 1, "{all}");
    assert_verdict_leads(
        &rep.verdict,
        &format!("1 unexpected death: {}", dead.headline),
    );
    let after = runner.victim.end_t.saturating_sub(dead.victim.end_t);
    if evidence == LinkEvidence::Window && after > WINDOW_NS {
        assert!(runner.consequence_of.is_none(), "{all}");
        eprintln!(
            "runners: the runner exited {after} ns after the kill: past the window, unlinked"
        );
        return;
    }
    follows(rep, runner, dead, dead, evidence);
    // report.md: the verdict, then the chain under it.
    let md = markdown_head(rep);
    assert_verdict_leads(
        md.lines().next().unwrap_or(""),
        &format!("1 unexpected death: {}", dead.headline),
    );
    assert!(
        md.contains("then: `")
            && md.contains(&format!("(pid {}) exited", runner.victim.process.pid)),
        "{md}"
    );
}

/// `c` follows from `of` (in the chain rooted at `root`) by `evidence`.
pub(super) fn follows(
    rep: &Report,
    c: &Certificate,
    of: &Certificate,
    root: &Certificate,
    evidence: LinkEvidence,
) {
    let all = headlines(rep);
    assert_eq!(c.rank, Rank::Consequence, "{all}");
    let l = c
        .consequence_of
        .as_ref()
        .unwrap_or_else(|| panic!("linked: {all}"));
    assert_eq!(
        (l.of, l.root, l.evidence),
        (of.id, root.id, evidence),
        "{all}"
    );
    assert!(
        c.headline.ends_with(&format!("(see #{})", root.id)),
        "{all}"
    );
}

/// The helper-victim runners (a threads pool, go test, cargo test): the
/// cleanup test runs in the helper's parent process, so today's
/// certificate is "killed by SIGKILL from its parent", ranked expected (a
/// parent stopping its own child, as a pool stops its workers), and the
/// test process's failure `test_process` stands as a non-zero exit of its
/// own: the cascade rules link an exit only to a death it did not cause
/// itself. Telling the cleanup test's thread from the sibling's is what
/// #21's test attribution adds; until then this is what tracer says.
pub(super) fn expected_kill_then_own_failure(
    rep: &Report,
    dead: &Certificate,
    test_process: &Certificate,
) {
    let all = headlines(rep);
    assert_eq!(dead.rank, Rank::Expected, "{all}");
    assert_eq!(rep.analysis.counts.unexpected, 0, "{all}");
    assert_eq!(test_process.rank, Rank::NonzeroExit, "{all}");
    assert_eq!(test_process.cause.kind, CauseKind::NonzeroExit, "{all}");
    assert!(test_process.consequence_of.is_none(), "{all}");
    assert!(
        rep.verdict.starts_with(&format!(
            "No unexpected deaths; 1 non-zero exit: {}",
            test_process.headline
        )),
        "{all}"
    );
}

/// report.md's verdict and the chain under it, for what a user reads.
pub(super) fn markdown_head(rep: &Report) -> String {
    render_markdown(rep)
        .split("\n\n")
        .take(2)
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The `node` a JavaScript suite runs on: Debian's (`None`: Node 20), or
/// the version matrix's official build of a later major (`matrix/node-N`,
/// x86-64 hosts only; node_test.rs).
pub(super) fn node_on(major: Option<&str>) -> String {
    match major {
        None => node_test::NodeBin::system(),
        Some(m) => node_test::NodeBin::major(m),
    }
    .path
}

/// For the wall times `run_node` prints: " on Node N" for a matrix node.
pub(super) fn on_node(major: Option<&str>) -> String {
    major.map(|m| format!(" on Node {m}")).unwrap_or_default()
}

/// The Node integration (integrations/node/preload.js).
pub(super) const NODE_INTEGRATION: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/integrations/node/preload.js");

/// How a JavaScript suite runs: as it is, with the Node preload injected by
/// `tracer record --tests` (`NODE_OPTIONS=--require <file>`, in every node
/// process of the run and every worker thread: a worker's env carries it;
/// the run without tracer gets the same variable), or with the one line of
/// the runner's config the docs give.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Node {
    AsItIs,
    Preload,
    SetupFile,
}

impl Node {
    /// For the wall times `run` prints.
    pub(super) fn name(self) -> &'static str {
        match self {
            Node::AsItIs => "",
            Node::Preload => " + --tests",
            Node::SetupFile => " + setup file",
        }
    }

    /// What `tracer record` is given: `--tests` for `Preload`.
    fn tracer_args(self) -> &'static [&'static str] {
        if self == Node::Preload {
            &["--tests"]
        } else {
            &[]
        }
    }

    /// The suite with the preload's variable, for `Preload`: how the run
    /// without tracer gets what `--tests` gives the recorded one.
    fn env(self, suite: Suite) -> Suite {
        if self == Node::Preload {
            suite.with_env("NODE_OPTIONS", format!("--require \"{NODE_INTEGRATION}\""))
        } else {
            suite
        }
    }
}

/// `at` is a Rust test named from what the kernel shows (`argv/env`: a
/// libtest thread's name, nextest's argv and env), by `runner`, reached
/// `via`: its name ends with `name`, or, where the kernel kept only a
/// thread name's 15 bytes and nothing completed it, is flagged cut and is
/// the start of `name`.
pub(super) fn named_by_the_kernel(
    rep: &Report,
    at: Option<&TestAt>,
    runner: Runner,
    name: &str,
    via: Via,
) {
    let all = headlines(rep);
    let at = at.unwrap_or_else(|| panic!("a test named for {name}: {all}"));
    let t = &at.test;
    assert_eq!(
        (t.runner, t.source, at.via),
        (runner, Source::ArgvEnv, via),
        "{at:?}\n{all}"
    );
    let fits = if t.name_truncated {
        name.starts_with(t.name.as_str()) && !t.name.is_empty()
    } else {
        t.name.ends_with(name)
    };
    assert!(fits, "{name} named as {:?}\n{all}", t.name);
}

/// `at` is the test the suite's file `file` declared as `name`, through a
/// mark (`exact`), reached `via`, in a worker `runner` named (returned).
pub(super) fn declared(
    rep: &Report,
    at: Option<&TestAt>,
    runner: Runner,
    file: &str,
    name: &str,
    phase: Option<Phase>,
    via: Via,
) -> String {
    declared_as(rep, at, runner, file, name, phase, via)
        .unwrap_or_else(|| panic!("a worker for {file} > {name}: {at:?}"))
}

/// As [`declared`], for runners whose tests may run in no worker (node:test,
/// serial mocha): the worker, when there is one, is `<runner> worker N`.
pub(super) fn declared_as(
    rep: &Report,
    at: Option<&TestAt>,
    runner: Runner,
    file: &str,
    name: &str,
    phase: Option<Phase>,
    via: Via,
) -> Option<String> {
    let all = headlines(rep);
    let at = at.unwrap_or_else(|| panic!("a test named for {file} > {name}: {all}"));
    let t = &at.test;
    assert_eq!(
        (t.runner, t.file.as_deref(), t.name.as_str(), t.phase),
        (runner, Some(file), name, phase),
        "{at:?}\n{all}"
    );
    assert_eq!((t.source, at.via), (Source::Exact, via), "{at:?}\n{all}");
    assert!(at.one_of.is_empty(), "one test at a time: {at:?}");
    if let Some(worker) = &t.worker {
        let prefix = match runner {
            Runner::Vitest => "vitest worker ",
            Runner::Mocha => "mocha worker ",
            Runner::Playwright => "playwright worker ",
            _ => "jest worker ",
        };
        assert!(
            worker
                .strip_prefix(prefix)
                .is_some_and(|id| id.parse::<u32>().is_ok()),
            "{worker}"
        );
    }
    t.worker.clone()
}

/// A runner's output as the never-at-the-cost twins compare it: its lines
/// without their durations, each then through `each`, sorted (workers'
/// lines interleave as they come).
pub(super) fn steady_lines(out: &[u8], each: impl Fn(String) -> String) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(out)
        .lines()
        .map(without_duration)
        .map(each)
        .collect();
    v.sort();
    v
}

/// A runner's report line without the duration it ends with ("✔ sibling
/// (1004.5ms)", mocha's "(1002ms)", Playwright's "(1.2s)"): what the
/// never-at-the-cost twins compare.
pub(super) fn without_duration(line: &str) -> String {
    match line.rfind(" (") {
        Some(i) if line.ends_with("s)") => line[..i].to_string(),
        _ => line.to_string(),
    }
}
