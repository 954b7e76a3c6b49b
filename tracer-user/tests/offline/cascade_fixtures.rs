//! Cascades over logs captured from the real kernel with the real programs
//! (tests/fixtures/real_cascade_*.ndjson, each recorded by `tracer record`
//! running the scenario named in its test): every rule of docs/report.md's
//! "Cascades" — which death a consequence follows from, each kind of
//! evidence, and the cases that must stay unlinked. No root needed.
use crate::common::{cert, fixture_report};
use tracer_user::{
    analysis::{Certificate, LinkEvidence, LinkVia, Rank},
    report::{render_markdown, Report},
};

fn report(name: &str) -> Report {
    fixture_report(&format!("real_cascade_{name}"))
}

fn by_id(r: &Report, id: usize) -> &Certificate {
    &r.analysis.certificates[id - 1]
}

/// `c` follows from `cause` (directly), whose chain starts at `root`.
fn assert_link(
    c: &Certificate,
    cause: &Certificate,
    root: &Certificate,
    via: LinkVia,
    evidence: LinkEvidence,
) {
    let l = c
        .consequence_of
        .as_ref()
        .unwrap_or_else(|| panic!("not linked: {}", c.headline));
    assert_eq!(
        (l.of, l.root, l.via, l.evidence),
        (cause.id, root.id, via, evidence),
        "{}: {}",
        c.headline,
        l.detail
    );
    assert!(
        c.headline.ends_with(&format!("(see #{})", root.id)),
        "{}",
        c.headline
    );
    assert!(root.consequences.contains(&c.id), "{:?}", root.consequences);
}

/// The second paragraph of report.md: the chain under the verdict.
fn then_paragraph(r: &Report) -> String {
    render_markdown(r)
        .split("\n\n")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

/// `bash -c 'sleep 30.1 & v=$!; sh -c "sleep .3; kill -9 $v"; wait $v'`:
/// bash exits 137 = 128+SIGKILL after its child's SIGKILL.
#[test]
fn a_shell_exiting_128_plus_n_follows_from_its_child_killed_by_n() {
    let r = report("bash137");
    let sleep = cert(&r, &["sleep", "30.1"]);
    let bash = cert(&r, &["bash", "-c"]);
    assert_eq!(
        (sleep.rank, bash.rank),
        (Rank::Unexpected, Rank::Consequence)
    );
    assert_link(bash, sleep, sleep, LinkVia::Child, LinkEvidence::ExitCode);
    let killer = sleep.killer.as_ref().unwrap().process.pid;
    assert!(
        bash.headline.contains(&format!(
            "exited with code 137 because its child `sleep 30.1` (pid {}) was killed by SIGKILL \
             from `sh -c sleep .3; kill -9 {}` (pid {killer}) (see #1)",
            sleep.victim.process.pid, sleep.victim.process.pid
        )),
        "{}",
        bash.headline
    );
    // The root is counted once: --fail-on unexpected-death counts this.
    let counts = &r.analysis.counts;
    assert_eq!(
        (counts.unexpected, counts.nonzero_exit, counts.consequence),
        (1, 0, 1)
    );
    // The verdict leads with the root; the chain is the line under it.
    assert!(
        r.verdict.starts_with("1 unexpected death: `sleep 30.1`"),
        "{}",
        r.verdict
    );
    assert_eq!(
        then_paragraph(&r),
        format!(
            "then: `bash -c sleep 30.1 & v=$!; sh -c \"sleep .3; kill -9 $v\"; wa…` (pid {}) \
             exited 137 (#2)",
            bash.victim.process.pid
        )
    );
}

/// `npx runme`: npm runs `sh -c runme`, runme (node) forks a worker that a
/// sibling SIGKILLs; runme reports "Worker exited unexpectedly" and exits 1,
/// sh -c and npx pass the 1 on. One root, a chain of three.
#[test]
fn npx_sh_c_and_a_node_runner_fold_into_one_chain() {
    let r = report("npx");
    let worker = cert(&r, &["node", "/tmp/rc/npxpkg/runme.js", "child"]);
    let runme = cert(&r, &["node", "/tmp/rc/npxpkg/node_modules/.bin/runme"]);
    let sh = cert(&r, &["sh", "-c", "'runme'"]);
    let npx = cert(&r, &["node", "/usr/bin/npx"]);
    assert_eq!(worker.rank, Rank::Unexpected);
    assert_link(
        runme,
        worker,
        worker,
        LinkVia::Child,
        LinkEvidence::LastWords,
    );
    assert_link(sh, runme, worker, LinkVia::Child, LinkEvidence::Window);
    assert_link(npx, sh, worker, LinkVia::Child, LinkEvidence::Window);
    assert_eq!(worker.consequences, [runme.id, sh.id, npx.id]);
    // Deeper in the chain a headline names both its child and the root.
    assert!(
        npx.headline.contains(&format!(
            "because its child `sh -c 'runme'` (pid {}) exited with code 1 (#{}), after `node \
             /tmp/rc/npxpkg/runme.js child` (pid {}) was killed by SIGKILL",
            sh.victim.process.pid, sh.id, worker.victim.process.pid
        )),
        "{}",
        npx.headline
    );
    assert_eq!(r.analysis.counts.unexpected, 1);
    assert_eq!(r.analysis.counts.consequence, 3);
    let then = then_paragraph(&r);
    assert!(
        then.starts_with(&format!(
            "then: `node /tmp/rc/npxpkg/node_modules/.bin/runme` (pid {}) exited 1 (#2) → `sh -c \
             'runme'` (pid {}) exited 1 (#3) → `node /usr/bin/npx runme` (pid {}) exited 1 (#4)",
            runme.victim.process.pid, sh.victim.process.pid, npx.victim.process.pid
        )),
        "{then}"
    );
}

/// concurrent.futures: a worker SIGKILLed by a sibling, the parent raises
/// BrokenProcessPool, stops the other worker (its own SIGTERM: no failure)
/// and exits 1.
#[test]
fn broken_process_pool_follows_from_the_killed_worker() {
    let r = report("python_pool");
    let worker = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.rank == Rank::Unexpected)
        .expect("the killed worker");
    // The parent: the workers are its forks that never exec'd.
    let main = r
        .analysis
        .certificates
        .iter()
        .find(|c| {
            c.victim.process.argv.ends_with(&["cf.py".to_string()])
                && !c.victim.process.argv_inherited
        })
        .unwrap();
    assert_link(
        main,
        worker,
        worker,
        LinkVia::Child,
        LinkEvidence::LastWords,
    );
    assert!(
        main.consequence_of
            .as_ref()
            .unwrap()
            .detail
            .contains("BrokenProcessPool"),
        "{:?}",
        main.consequence_of
    );
    // The other worker, stopped by the parent, is expected and no cause.
    let stopped = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.rank == Rank::Expected)
        .expect("the worker the pool stopped");
    assert!(stopped.consequence_of.is_none() && stopped.consequences.is_empty());
    assert_eq!(r.analysis.counts.unexpected, 1);
}

/// multiprocessing.Pool: a worker SIGKILLed, `get(timeout=2)` raises
/// TimeoutError 2 s later: within the window, nothing else names it.
#[test]
fn a_pool_timing_out_after_a_lost_worker_follows_within_the_window() {
    let r = report("mp_pool");
    let worker = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.rank == Rank::Unexpected)
        .unwrap();
    let main = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.rank == Rank::Consequence)
        .unwrap();
    assert_eq!(main.victim.process.argv.last().unwrap(), "mp.py");
    assert_link(main, worker, worker, LinkVia::Child, LinkEvidence::Window);
}

/// The forkserver start method: the workers are the fork server's
/// children, not the parent's; the fork server outlives the parent.
#[test]
fn a_fork_servers_worker_is_a_descendant_the_parent_waited_on() {
    let r = report("forkserver");
    let worker = r
        .analysis
        .certificates
        .iter()
        .find(|c| c.rank == Rank::Unexpected)
        .unwrap();
    let main = cert(&r, &["python3", "mpfs.py"]);
    assert_link(
        main,
        worker,
        worker,
        LinkVia::Descendant,
        LinkEvidence::Window,
    );
    assert!(
        main.headline.contains("because its descendant"),
        "{}",
        main.headline
    );
}

/// A Node parent whose forked worker was SIGKILLed by a sibling: its own
/// words ("Worker exited unexpectedly … SIGKILL") tie the two.
#[test]
fn a_node_parent_after_a_worker_death() {
    let r = report("node");
    let worker = cert(&r, &["node", "/tmp/rc/sc/node1.js", "child"]);
    let parent = cert(&r, &["node", "node1.js"]);
    assert_link(
        parent,
        worker,
        worker,
        LinkVia::Child,
        LinkEvidence::LastWords,
    );
}

/// `xargs -P2`: a command SIGKILLed, xargs says "terminated by signal 9"
/// and exits 125; the `sh -c` around it passes 125 on.
#[test]
fn xargs_125_follows_from_its_command_and_its_shell_from_it() {
    let r = report("xargs");
    let sleep = cert(&r, &["sleep", "30"]);
    let xargs = cert(&r, &["xargs"]);
    let sh = cert(&r, &["sh", "-c", "printf 'v\\nk\\n' | xargs -n1 -P2 sh -c 'if [ \"$0\" = v ]; then echo $$ > /tmp/rc/sc/x.pid; exec sleep 30; else sleep .3; kill -9 $(cat /tmp/rc/sc/x.pid); fi'"]);
    assert_link(xargs, sleep, sleep, LinkVia::Child, LinkEvidence::LastWords);
    assert!(
        xargs
            .consequence_of
            .as_ref()
            .unwrap()
            .detail
            .contains("terminated by signal 9"),
        "{:?}",
        xargs.consequence_of
    );
    assert_link(sh, xargs, sleep, LinkVia::Child, LinkEvidence::Window);
}

/// `make -j2`: recipe `a` SIGKILLed by recipe `b`, make prints
/// "[Makefile:3: a] Killed", waits for `b`, exits 2.
#[test]
fn make_exiting_2_follows_from_the_killed_recipe() {
    let r = report("make");
    let sleep = cert(&r, &["sleep", "30"]);
    let make = cert(&r, &["make"]);
    assert_link(make, sleep, sleep, LinkVia::Child, LinkEvidence::LastWords);
    assert!(
        make.consequence_of
            .as_ref()
            .unwrap()
            .detail
            .contains("] Killed"),
        "{:?}",
        make.consequence_of
    );
}

/// `unshare --pid --fork bash -c …`: the namespace's init (bash) exits
/// 137 after its child's SIGKILL, and unshare passes 137 on.
#[test]
fn unshare_passes_its_childs_128_plus_n_on() {
    let r = report("unshare");
    let sleep = cert(&r, &["sleep", "30.6"]);
    let bash = cert(&r, &["bash", "-c"]);
    let unshare = cert(&r, &["unshare"]);
    assert_link(bash, sleep, sleep, LinkVia::Child, LinkEvidence::ExitCode);
    assert_link(unshare, bash, sleep, LinkVia::Child, LinkEvidence::ExitCode);
    assert!(
        unshare
            .consequence_of
            .as_ref()
            .unwrap()
            .detail
            .contains("the status its child exited with"),
        "{:?}",
        unshare.consequence_of
    );
}

/// `set -o pipefail; yes | head -n1`: bash exits 141 because `yes` died of
/// SIGPIPE — expected (its reader finished), so bash's exit is linked to it
/// but stays the failure the verdict names.
#[test]
fn pipefail_141_is_linked_to_an_expected_sigpipe_and_stays_the_failure() {
    let r = report("pipefail");
    let yes = cert(&r, &["yes"]);
    let bash = cert(&r, &["bash", "-c"]);
    assert_eq!((yes.rank, bash.rank), (Rank::Expected, Rank::NonzeroExit));
    assert_link(bash, yes, yes, LinkVia::Child, LinkEvidence::ExitCode);
    assert!(
        r.verdict.starts_with(&format!(
            "No unexpected deaths; 1 non-zero exit: {}",
            bash.headline
        )),
        "{}",
        r.verdict
    );
    assert!(
        bash.headline
            .contains("exited with code 141 because its child `yes`"),
        "{}",
        bash.headline
    );
    assert!(
        bash.rank_reason.contains("an expected death"),
        "{}",
        bash.rank_reason
    );
    // Nothing of the verdict's rank started a chain: no `then:` line.
    assert!(then_paragraph(&r).starts_with("**Run:**"));
}

/// Unlinked: bash runs `grep -q` after the kill and exits with grep's 1 —
/// a later failure, so the script went on after the death.
#[test]
fn a_failure_after_the_death_leaves_the_exit_its_own() {
    let r = report("later_failure");
    let bash = cert(&r, &["bash", "-c"]);
    assert_eq!(bash.rank, Rank::NonzeroExit);
    assert!(bash.consequence_of.is_none(), "{}", bash.headline);
    assert_eq!(r.analysis.counts.consequence, 0);
}

/// Unlinked: bash exec'd its last command (`grep -q`) after the death: the
/// program that exited is not the one that waited.
#[test]
fn an_exec_after_the_death_leaves_the_exit_its_own() {
    let r = report("exec_after");
    let grep = cert(&r, &["grep", "-q"]);
    assert_eq!(grep.rank, Rank::NonzeroExit);
    assert!(grep.consequence_of.is_none(), "{}", grep.headline);
}

/// Unlinked: bash killed its own child and reports 137: its own doing.
#[test]
fn a_child_the_parent_killed_itself_is_no_cause() {
    let r = report("own_kill");
    let bash = cert(&r, &["bash", "-c"]);
    assert_eq!(bash.rank, Rank::NonzeroExit);
    assert!(bash.consequence_of.is_none(), "{}", bash.headline);
    assert_eq!(cert(&r, &["sleep", "30.8"]).rank, Rank::Expected);
}

/// Unlinked: a child exited 1, bash went on for 5.5 s and exited 3: no
/// shared exit code, no words about it, past the window.
#[test]
fn an_exit_past_the_window_without_evidence_stays_its_own() {
    let r = report("gap");
    let bash = cert(&r, &["bash", "-c"]);
    let child = cert(&r, &["sh", "-c"]);
    assert_eq!(
        (bash.rank, child.rank),
        (Rank::NonzeroExit, Rank::NonzeroExit)
    );
    assert!(bash.consequence_of.is_none(), "{}", bash.headline);
    assert_eq!(r.analysis.counts.nonzero_exit, 2);
}

/// Links survive the round trip: the ids cited exist, point to earlier
/// deaths, and every chain's root lists exactly its consequences.
#[test]
fn every_link_names_an_earlier_death_and_every_root_its_chain() {
    for name in [
        "bash137",
        "npx",
        "python_pool",
        "mp_pool",
        "forkserver",
        "node",
        "xargs",
        "make",
        "unshare",
        "pipefail",
    ] {
        let r = report(name);
        let certs = &r.analysis.certificates;
        for c in certs {
            if let Some(l) = &c.consequence_of {
                let (of, root) = (by_id(&r, l.of), by_id(&r, l.root));
                assert!(
                    of.victim.end_seq < c.victim.end_seq,
                    "{name}: {}",
                    c.headline
                );
                assert_ne!(root.rank, Rank::Consequence, "{name}");
                assert!(root.consequences.contains(&c.id), "{name}");
            }
            for &id in &c.consequences {
                let l = by_id(&r, id).consequence_of.as_ref().unwrap();
                assert_eq!(l.root, c.id, "{name}");
            }
        }
        // Deterministic: the same log gives the same bytes.
        assert_eq!(
            render_markdown(&r),
            render_markdown(&report(name)),
            "{name}"
        );
    }
}
