//! Cascades on the real kernel with the real programs: a process killed
//! (by a sibling the scenario started, aimed at its own child's pid), then
//! its parent — a shell, a Python pool, a Node runner, xargs, make, a
//! wrapper — exiting non-zero because of it. Each later death must point
//! back to the kill, the verdict must lead with it, and it must be counted
//! once. Every signal goes to a process the scenario spawned, once it runs
//! the program it is killed as (`grep -qx sleep /proc/$v/comm`, polled at
//! most 5 s): a fixed pause lost that race on a loaded machine.
use crate::common::*;
use tracer_user::{
    analysis::{Certificate, LinkEvidence, LinkVia, Rank},
    report::{render_markdown, Report},
};

/// The unexpected death the run is about: exactly one.
fn root(rep: &Report) -> &Certificate {
    let un: Vec<&Certificate> = rep
        .analysis
        .certificates
        .iter()
        .filter(|c| c.rank == Rank::Unexpected)
        .collect();
    assert_eq!(un.len(), 1, "one root cause; verdict: {}", rep.verdict);
    assert!(
        rep.verdict
            .starts_with(&format!("1 unexpected death: {}", un[0].headline)),
        "the verdict leads with the root: {}",
        rep.verdict
    );
    un[0]
}

/// `c` is a consequence of `of`, in the chain rooted at `root`.
fn follows(c: &Certificate, of: &Certificate, root: &Certificate, evidence: LinkEvidence) {
    assert_eq!(c.rank, Rank::Consequence, "{}", c.headline);
    let l = c.consequence_of.as_ref().expect("linked");
    assert_eq!(
        (l.of, l.root, l.evidence),
        (of.id, root.id, evidence),
        "{}: {}",
        c.headline,
        l.detail
    );
    assert!(
        c.headline.ends_with(&format!("(see #{})", root.id)),
        "{}",
        c.headline
    );
}

/// report.md's second paragraph: the chain under the verdict.
fn then_line(rep: &Report) -> String {
    render_markdown(rep)
        .split("\n\n")
        .nth(1)
        .unwrap_or_default()
        .to_string()
}

fn shell_137(shell: &str, script: &str, code: i32) {
    let r = record(&[], &[shell, "-c", script]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(code), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    let sh = cert_by_argv(&rep, &[shell, "-c"]);
    follows(sh, dead, dead, LinkEvidence::ExitCode);
    assert!(
        sh.headline
            .contains(&format!("exited with code {code} because its child `sleep")),
        "{}",
        sh.headline
    );
    assert_eq!(rep.analysis.counts.unexpected, 1);
    assert!(
        then_line(&rep).starts_with(&format!("then: `{shell} -c")),
        "{}",
        then_line(&rep)
    );
}

#[test]
fn bash_137_after_its_child_was_sigkilled() {
    shell_137(
        "bash",
        "sleep 31.1 & v=$!; sh -c \"for i in \\$(seq 500); do grep -qx sleep /proc/$v/comm && break; sleep .01; done; kill -9 $v\"; wait $v",
        137,
    );
}

#[test]
fn bash_143_after_its_child_was_sigtermed() {
    shell_137(
        "bash",
        "sleep 31.2 & v=$!; sh -c \"for i in \\$(seq 500); do grep -qx sleep /proc/$v/comm && break; sleep .01; done; kill -TERM $v\"; wait $v",
        143,
    );
}

#[test]
fn dash_143_after_its_child_was_sigtermed() {
    shell_137(
        "dash",
        "sleep 31.3 & v=$!; sh -c \"for i in \\$(seq 500); do grep -qx sleep /proc/$v/comm && break; sleep .01; done; kill -TERM $v\" & wait $v",
        143,
    );
}

#[test]
fn bash_set_e_stops_at_the_killed_child() {
    shell_137(
        "bash",
        "set -e; sleep 31.4 & v=$!; (for i in $(seq 500); do grep -qx sleep /proc/$v/comm && break; sleep .01; done; kill -9 $v) & wait $v; echo unreachable",
        137,
    );
}

#[test]
fn bash_wait_n_reports_the_killed_job() {
    shell_137(
        "bash",
        "sleep 31.5 & v=$!; sh -c \"for i in \\$(seq 500); do grep -qx sleep /proc/$v/comm && break; sleep .01; done; kill -9 $v\" & wait -n $v; exit $?",
        137,
    );
}

#[test]
fn bash_139_after_its_child_segfaulted() {
    let r = record(
        &[],
        &[
            "bash",
            "-c",
            "ulimit -c 0; python3 -c 'import ctypes; ctypes.string_at(0)'; exit $?",
        ],
    );
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    assert_eq!(
        dead.cause.signal.as_ref().map(|s| s.sig_name.as_str()),
        Some("SIGSEGV")
    );
    let sh = cert_by_argv(&rep, &["bash", "-c"]);
    follows(sh, dead, dead, LinkEvidence::ExitCode);
    assert!(
        sh.headline.contains("crashed with SIGSEGV"),
        "{}",
        sh.headline
    );
}

#[test]
fn pipefail_141_names_the_sigpipe_it_reports() {
    let r = record(
        &["--fail-on", "unexpected-death"],
        &["bash", "-c", "set -o pipefail; yes | head -n1 >/dev/null"],
    );
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(141), "{}", r.stderr());
    let rep = default_report(&r);
    let yes = cert_by_argv(&rep, &["yes"]);
    let sh = cert_by_argv(&rep, &["bash", "-c"]);
    // `yes | head` is the normal end of a pipeline: expected, so bash's 141
    // is the failure the verdict names, and it says why.
    assert_eq!((yes.rank, sh.rank), (Rank::Expected, Rank::NonzeroExit));
    let l = sh.consequence_of.as_ref().expect("linked to the SIGPIPE");
    assert_eq!((l.of, l.evidence), (yes.id, LinkEvidence::ExitCode));
    assert!(
        rep.verdict.starts_with(&format!(
            "No unexpected deaths; 1 non-zero exit: {}",
            sh.headline
        )),
        "{}",
        rep.verdict
    );
    assert!(
        sh.headline
            .contains("exited with code 141 because its child `yes`"),
        "{}",
        sh.headline
    );
}

/// Writes `body` as `name` into a fresh directory kept alive by the caller.
fn script(dir: &tempfile::TempDir, name: &str, body: &str) -> String {
    let path = dir.path().join(name);
    std::fs::write(&path, body).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn concurrent_futures_broken_process_pool() {
    let dir = tempfile::tempdir().unwrap();
    let py = script(
        &dir,
        "pool.py",
        r#"
import concurrent.futures as cf, subprocess, time
def work(x):
    time.sleep(30 if x == 0 else 1)
    return x
if __name__ == "__main__":
    with cf.ProcessPoolExecutor(2) as ex:
        futs = [ex.submit(work, i) for i in range(2)]
        time.sleep(0.3)
        subprocess.run(["kill", "-9", str(sorted(ex._processes)[0])])
        print([f.result() for f in futs])
"#,
    );
    let r = record(&[], &["python3", &py]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    let main = cert_by_argv(&rep, &["python3", &py]);
    follows(main, dead, dead, LinkEvidence::LastWords);
    assert!(
        main.consequence_of
            .as_ref()
            .unwrap()
            .detail
            .contains("BrokenProcessPool"),
        "{:?}",
        main.consequence_of
    );
}

#[test]
fn multiprocessing_pool_after_a_lost_worker() {
    let dir = tempfile::tempdir().unwrap();
    let py = script(
        &dir,
        "mp.py",
        // The worker killed is the one running task 0, found by the pid it
        // writes: an idle worker waits for tasks holding the pool's queue
        // lock, and SIGKILLed there it would hang the pool's terminate()
        // for ever (the lock is never released). The pool is not left to
        // terminate() either: its _help_stuff_finish polls the task pipe
        // and then reads it, racing an idle worker for the same bytes, and
        // under load it lost and read for ever (seen: 27 min). The parent
        // kills its own workers instead, after the traceback. `kill` is
        // started by posix_spawn, not subprocess: subprocess's exec-status
        // pipe is open in the parent until fork_exec returns, and the pool's
        // thread, forking the dead worker's replacement in that window
        // (the parent descheduled under load), gave the replacement its
        // write end: the parent read it for ever (seen: 21 min in CI).
        r#"
import multiprocessing as mp, os, sys, time, traceback
PID = sys.argv[1]
def work(x):
    if x == 0:
        with open(PID + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(PID + ".tmp", PID)
        time.sleep(30)
    return x
if __name__ == "__main__":
    p = mp.Pool(2)
    r = p.map_async(work, range(2), chunksize=1)
    while not os.path.exists(PID):
        time.sleep(0.05)
    os.waitpid(os.posix_spawnp("kill", ["kill", "-9", open(PID).read()], os.environ), 0)
    try:
        print(r.get(timeout=2))
    except mp.TimeoutError:
        traceback.print_exc()
        for w in p._pool:
            w.kill()
        os._exit(1)
"#,
    );
    let pid_file = dir.path().join("task0.pid");
    let r = record(&[], &["python3", &py, pid_file.to_str().unwrap()]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    let main = cert_by_argv(&rep, &["python3", &py]);
    // TimeoutError 2 s later names nothing: the window ties them.
    follows(main, dead, dead, LinkEvidence::Window);
    assert_eq!(main.consequence_of.as_ref().unwrap().via, LinkVia::Child);
}

#[test]
fn a_node_parent_after_its_worker_was_killed() {
    let dir = tempfile::tempdir().unwrap();
    let js = script(
        &dir,
        "runner.js",
        r#"
const { fork, spawn } = require('child_process');
if (process.argv[2] === 'child') { setTimeout(() => {}, 30000); return; }
const c = fork(__filename, ['child']);
c.on('exit', (code, sig) => {
  console.error(`Error: Worker exited unexpectedly (code=${code}, signal=${sig})`);
  process.exit(1);
});
setTimeout(() => spawn('kill', ['-9', String(c.pid)]), 300);
"#,
    );
    let r = record(&[], &["node", &js]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    assert_eq!(dead.victim.process.argv.last().unwrap(), "child");
    let parent = rep
        .analysis
        .certificates
        .iter()
        .find(|c| c.victim.process.argv.len() == 2)
        .expect("the runner's certificate");
    assert_eq!(parent.victim.process.argv[1], js);
    follows(parent, dead, dead, LinkEvidence::LastWords);
}

/// npx runs the package's bin through `sh -c`; the bin is a runner whose
/// worker is killed. One root, then the runner, sh -c and npx.
#[test]
fn npx_and_sh_c_pass_the_runners_failure_on() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(
        dir.path().join("package.json"),
        r#"{"name":"cascade","version":"1.0.0"}"#,
    )
    .unwrap();
    let js = script(
        &dir,
        "runme.js",
        r#"#!/usr/bin/env node
const { fork, spawn } = require('child_process');
if (process.argv[2] === 'child') { setTimeout(() => {}, 30000); return; }
const c = fork(__filename, ['child']);
c.on('exit', (code, sig) => {
  console.error(`Error: Worker exited unexpectedly (code=${code}, signal=${sig})`);
  process.exit(1);
});
setTimeout(() => spawn('kill', ['-9', String(c.pid)]), 300);
"#,
    );
    std::fs::set_permissions(&js, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(&js, bin.join("runme")).unwrap();
    let cmd = format!("cd '{}' && exec npx --offline runme", dir.path().display());
    let r = record(&[], &["sh", "-c", &cmd]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(1), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    let runner = cert_by_argv(&rep, &["node", &bin.join("runme").display().to_string()]);
    let sh = cert_by_argv(&rep, &["sh", "-c", "'runme'"]);
    let npx = rep
        .analysis
        .certificates
        .iter()
        .find(|c| c.victim.process.argv.iter().any(|a| a.ends_with("npx")))
        .expect("npx's own certificate");
    follows(runner, dead, dead, LinkEvidence::LastWords);
    follows(sh, runner, dead, LinkEvidence::Window);
    follows(npx, sh, dead, LinkEvidence::Window);
    assert_eq!(dead.consequences, [runner.id, sh.id, npx.id]);
    assert_eq!(rep.analysis.counts.unexpected, 1);
    let then = then_line(&rep);
    assert!(
        then.contains(&format!(
            "exited 1 (#{}) → `sh -c 'runme'` (pid {}) exited 1 (#{}) → ",
            runner.id, sh.victim.process.pid, sh.id
        )),
        "{then}"
    );
}

#[test]
fn xargs_125_after_its_command_was_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pid = dir.path().join("victim.pid");
    let cmd = format!(
        "printf 'v\\nk\\n' | xargs -n1 -P2 sh -c 'if [ \"$0\" = v ]; then echo $$ > {p}; exec sleep 31.6; \
         else while [ ! -s {p} ]; do sleep .05; done; for i in $(seq 500); do grep -qx sleep /proc/$(cat {p})/comm && break; sleep .01; done; kill -9 $(cat {p}); fi'",
        p = pid.display()
    );
    let r = record(&[], &["sh", "-c", &cmd]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(125), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    let xargs = cert_by_argv(&rep, &["xargs"]);
    follows(xargs, dead, dead, LinkEvidence::LastWords);
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
    let sh = cert_by_argv(&rep, &["sh", "-c", &cmd]);
    follows(sh, xargs, dead, LinkEvidence::Window);
}

#[test]
fn make_j_2_after_a_recipe_was_killed() {
    let dir = tempfile::tempdir().unwrap();
    script(
        &dir,
        "Makefile",
        "all: a b\na:\n\techo $$$$ > a.pid; exec sleep 31.7\nb:\n\twhile [ ! -s a.pid ]; do sleep .05; done; \
         for i in $$(seq 500); do grep -qx sleep /proc/$$(cat a.pid)/comm && break; sleep .01; done; kill -9 $$(cat a.pid); sleep 1\n",
    );
    let r = record(&[], &["make", "-j2", "-C", dir.path().to_str().unwrap()]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(2), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    let make = cert_by_argv(&rep, &["make"]);
    // make waits for `b` (1 s more) and says "[Makefile:3: a] Killed".
    follows(make, dead, dead, LinkEvidence::LastWords);
    assert!(
        make.consequence_of
            .as_ref()
            .unwrap()
            .detail
            .contains("Killed"),
        "{:?}",
        make.consequence_of
    );
}

#[test]
fn unshare_passes_the_namespace_inits_137_on() {
    let r = record(
        &[],
        &[
            "unshare",
            "--pid",
            "--fork",
            // Its own /proc, so the killer's `/proc/$v` is the namespace's $v.
            "--mount-proc",
            "bash",
            "-c",
            "sleep 31.8 & v=$!; sh -c \"for i in \\$(seq 500); do grep -qx sleep /proc/$v/comm && break; sleep .01; done; kill -9 $v\"; wait $v",
        ],
    );
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(137), "{}", r.stderr());
    let rep = default_report(&r);
    let dead = root(&rep);
    let bash = cert_by_argv(&rep, &["bash", "-c"]);
    let unshare = cert_by_argv(&rep, &["unshare"]);
    follows(bash, dead, dead, LinkEvidence::ExitCode);
    follows(unshare, bash, dead, LinkEvidence::ExitCode);
    assert!(
        rep.verdict.starts_with("1 unexpected death: `sleep 31.8`"),
        "{}",
        rep.verdict
    );
}

/// The same run, judged by `--fail-on unexpected-death`: one death found,
/// the command's own status kept.
#[test]
fn fail_on_counts_the_root_once() {
    let r = record(
        &["--fail-on", "unexpected-death"],
        &[
            "sh",
            "-c",
            "bash -c 'sleep 31.9 & v=$!; sh -c \"for i in \\$(seq 500); do grep -qx sleep /proc/$v/comm && break; sleep .01; done; kill -9 $v\"; wait $v'",
        ],
    );
    assert_eq!(r.code(), Some(137), "{}", r.stderr());
    assert!(
        r.stderr().contains("--fail-on unexpected-death: 1 found"),
        "{}",
        r.stderr()
    );
    let rep = default_report(&r);
    assert_eq!(rep.analysis.counts.consequence, 2, "{}", rep.verdict);
}
