//! Which test: real programs whose one test kills what another test owns,
//! each end named by what the kernel shows of the runner (docs/report.md,
//! "Which test"). Hermetic: every kill aims at a marker this test made.
use std::process::Command;

use serde_json::Value;

use crate::common::*;

fn report(r: &Recorded) -> Value {
    serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap()
}

/// The one certificate whose victim ran `marker`.
fn certificate<'a>(rep: &'a Value, marker: &str) -> &'a Value {
    rep["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["victim"]["argv"][0] == marker)
        .unwrap_or_else(|| panic!("no certificate for {marker}: {rep:#}"))
}

/// libtest runs each test on a thread named after it: two such threads of
/// this very binary (named as libtest names them), one starting a sleeper,
/// the other `pkill`ing it. Both ends are helpers of their thread's test.
#[test]
fn libtest_threads_name_the_victims_and_the_killers_test() {
    let marker = format!("tn-libtest-{}", std::process::id());
    let s = scenario(|| {
        let marker = std::env::var("TN_MARKER").unwrap();
        let m2 = marker.clone();
        let owner = std::thread::Builder::new()
            .name("owns_a_sleeper".into())
            .spawn(move || {
                let _ = Command::new("bash")
                    .args(["-c", &format!("exec -a {m2} sleep 30")])
                    .status();
            })
            .unwrap();
        let cleanup = std::thread::Builder::new()
            .name("cleanup_kills".into())
            .spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(400));
                let _ = Command::new("pkill")
                    .args(["-KILL", "-f", &format!("^{marker}")])
                    .status();
            })
            .unwrap();
        owner.join().unwrap();
        cleanup.join().unwrap();
    });
    let junit_dir = tempfile::tempdir().unwrap();
    let junit = junit_dir.path().join("deaths.xml");
    let r = s.record_env(
        &["--junit", junit.to_str().unwrap()],
        &[("TN_MARKER", &marker)],
    );
    let rep = report(&r);
    let c = certificate(&rep, &marker);
    let (v, k) = (&c["victim"]["test"], &c["killer"]["test"]);
    assert_eq!(v["name"], "owns_a_sleeper", "{c:#}");
    assert_eq!(v["via"], "spawned");
    assert_eq!(v["runner"], "cargo_test");
    assert_eq!(k["name"], "cleanup_kills", "{c:#}");
    assert_eq!(k["source"], "argv/env");
    // The two spawners are two threads of the one test binary.
    assert_eq!(v["spawned_by"]["pid"], k["spawned_by"]["pid"]);
    assert_ne!(v["spawned_by"]["tid"], k["spawned_by"]["tid"]);
    let headline = c["headline"].as_str().unwrap();
    assert!(
        headline.ends_with(
            ", spawned by `cleanup_kills` (cargo test); the victim was spawned by \
             `owns_a_sleeper` (cargo test)"
        ),
        "{headline}"
    );
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(
        md.contains("spawned by `cleanup_kills` (cargo test)"),
        "{md}"
    );
}

/// pytest sets `PYTEST_CURRENT_TEST` in os.environ for each test (and xdist
/// `PYTEST_XDIST_WORKER`): a Python program doing just that, one "test"
/// starting a sleeper, the next pkill-ing it. Only the runners' variables
/// reach the log; a token beside them never does.
#[test]
fn pytest_environment_names_both_tests_and_keeps_no_secret() {
    let marker = format!("tn-pytest-{}", std::process::id());
    let secret = format!("ghp_{:x}", std::process::id() as u64 * 0x9e37_79b9);
    let script = r#"
import os, subprocess, sys, time
marker = sys.argv[1]
os.environ["PYTEST_XDIST_WORKER"] = "gw1"
os.environ["PYTEST_CURRENT_TEST"] = "tests/test_pool.py::test_owns_a_sleeper (call)"
sleeper = subprocess.Popen(["bash", "-c", f"exec -a {marker} sleep 30"])
time.sleep(0.3)
os.environ["PYTEST_CURRENT_TEST"] = "tests/test_cleanup.py::test_kills_stray_workers (teardown)"
subprocess.run(["pkill", "-KILL", "-f", f"^{marker}"])
sleeper.wait()
"#;
    let r = record_env(
        &[],
        &["python3", "-c", script, &marker],
        &[("GITHUB_TOKEN", &secret)],
    );
    let rep = report(&r);
    let c = certificate(&rep, &marker);
    let (v, k) = (&c["victim"]["test"], &c["killer"]["test"]);
    assert_eq!(
        v["name"], "tests/test_pool.py::test_owns_a_sleeper",
        "{c:#}"
    );
    assert_eq!(
        (&v["phase"], &v["worker"]),
        (&"call".into(), &"xdist gw1".into())
    );
    assert_eq!(v["file"], "tests/test_pool.py");
    assert_eq!(
        k["name"], "tests/test_cleanup.py::test_kills_stray_workers",
        "{c:#}"
    );
    assert_eq!(
        (&k["phase"], &k["via"]),
        (&"teardown".into(), &"spawned".into())
    );
    let headline = c["headline"].as_str().unwrap();
    assert!(
        headline.contains(
            ", spawned by `tests/test_cleanup.py::test_kills_stray_workers` (teardown) in xdist gw1"
        ),
        "{headline}"
    );
    for file in ["events.ndjson", "report.json", "report.md", "report.html"] {
        let text = std::fs::read_to_string(r.path(file)).unwrap();
        assert!(!text.contains(&secret), "{file} holds the secret");
    }
}

/// A mark: what the in-process integrations write (`--tests`), here from
/// Python: a write to an fd that can never be open, which fails with EBADF.
const MARK_PY: &str = r#"
import json, os, signal, subprocess, sys, threading, time
MARK_FD = 0x7FFFFFF0
def mark(ev, name, worker="1"):
    payload = {"ev": ev, "runner": "vitest", "worker": worker, "file": "pool.test.js", "name": name, "phase": "call"}
    try:
        os.write(MARK_FD, ("tracer-test-mark/1 " + json.dumps(payload)).encode())
    except OSError as e:
        assert e.errno == 9, e  # EBADF: nothing is ever open there
marker, forged = sys.argv[1], int(sys.argv[2])
started = threading.Event()
box = {}
def owner():
    mark("begin", "owns a sleeper")
    box["p"] = subprocess.Popen(["bash", "-c", f"exec -a {marker} sleep 30"])
    started.set()
    box["p"].wait()
    mark("end", "owns a sleeper")
def cleanup():
    started.wait()
    time.sleep(0.2)
    mark("begin", "cleanup kills stray workers", "2")
    os.kill(box["p"].pid, signal.SIGKILL)
    mark("end", "cleanup kills stray workers", "2")
def flood():
    # A hostile test claiming the other tests' names, a million times.
    for _ in range(forged):
        mark("begin", "cleanup kills stray workers", "2")
threads = [threading.Thread(target=f) for f in (owner, cleanup)]
if forged:
    threads.append(threading.Thread(target=flood))
for t in threads: t.start()
for t in threads: t.join()
"#;

/// A mark labels exactly the thread that wrote it: the victim's test is the
/// thread that forked its sleeper, the killer's the thread that called
/// kill(), both `exact`.
#[test]
fn marks_name_the_thread_that_wrote_them() {
    let marker = format!("tn-mark-{}", std::process::id());
    let r = record(&[], &["python3", "-c", MARK_PY, &marker, "0"]);
    let rep = report(&r);
    let c = certificate(&rep, &marker);
    let (v, k) = (&c["victim"]["test"], &c["killer"]["test"]);
    assert_eq!(
        (&v["name"], &v["via"], &v["source"], &v["worker"]),
        (
            &"owns a sleeper".into(),
            &"spawned".into(),
            &"exact".into(),
            &"vitest worker 1".into()
        ),
        "{c:#}"
    );
    assert_eq!(
        (&k["name"], &k["via"], &k["worker"]),
        (
            &"cleanup kills stray workers".into(),
            &"own".into(),
            &"vitest worker 2".into()
        ),
        "{c:#}"
    );
    let headline = c["headline"].as_str().unwrap();
    assert!(
        headline.contains(", in `pool.test.js > cleanup kills stray workers` in vitest worker 2"),
        "{headline}"
    );
}

/// 10^6 forged marks from a third thread: the kernel sends at most its
/// rate, the rest is counted in the loss line, and the certificate is the
/// one without the flood — the forger labels only its own thread.
#[test]
fn a_million_forged_marks_label_only_their_writer() {
    let marker = format!("tn-forged-{}", std::process::id());
    let r = record(&[], &["python3", "-c", MARK_PY, &marker, "1000000"]);
    let rep = report(&r);
    let c = certificate(&rep, &marker);
    assert_eq!(c["victim"]["test"]["name"], "owns a sleeper", "{c:#}");
    assert_eq!(c["killer"]["test"]["name"], "cleanup kills stray workers");
    assert_eq!(c["killer"]["test"]["via"], "own");
    assert!(c["killer"]["test"]["one_of"].is_null(), "{c:#}");
    let dropped = rep["log"]["lost"]["marks_dropped"].as_u64().unwrap_or(0);
    // Every forged mark is sent or counted, whatever the flood's length (a
    // loaded machine stretches it over more 100 ms windows, so more are
    // sent): the log's marks and the drops add up to every write, the
    // flood's million and the two tests' two each.
    let kept = r
        .events()
        .filter(|e| matches!(e, tracer_user::eventlog::Record::TestMark(_)))
        .count() as u64;
    assert_eq!(
        kept + dropped,
        1_000_004,
        "{kept} marks kept, {dropped} dropped"
    );
    assert!(dropped > kept, "{kept} marks kept, {dropped} dropped");
    // Not a loss of events: the log is still complete.
    assert_eq!(rep["log"]["lost"]["ringbuf_full"], 0);
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(
        md.contains("test marks over the per-thread rate, not sent"),
        "{md}"
    );
    // The flood's kept marks are on its own thread, none on the others.
    let marks = r
        .events()
        .test_marks()
        .map(|m| m.task.tid)
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(marks.len(), 3, "three writer threads: {marks:?}");
}

/// The Node integration's marks (integrations/node/preload.js, its `mark`) from two
/// worker threads of one process, as vitest's threads pool runs tests: one
/// spawns a sleeper, the other `process.kill`s it. Each end is named by its
/// own thread (tid ≠ pid), the process's other test never taken for it.
#[test]
fn node_worker_threads_mark_their_own_tests() {
    let marker = format!("tn-node-{}", std::process::id());
    let lib = concat!(env!("CARGO_MANIFEST_DIR"), "/integrations/node/preload.js");
    let script = r#"
const { Worker, isMainThread, workerData } = require('worker_threads');
const [lib, marker] = process.argv.slice(2);
if (isMainThread) {
  const sab = new SharedArrayBuffer(8);
  const owner = new Worker(__filename, { argv: [lib, marker], workerData: { role: 'owner', sab } });
  const cleanup = new Worker(__filename, { argv: [lib, marker], workerData: { role: 'cleanup', sab } });
} else {
  const { mark } = require(lib);
  const shared = new Int32Array(workerData.sab);
  const t = (name, worker) => ({ runner: 'vitest', worker, file: 'pool.test.js', name, phase: 'call' });
  if (workerData.role === 'owner') {
    mark('begin', t('owns a sleeper', 1));
    const cp = require('child_process').spawn('bash', ['-c', `exec -a ${marker} sleep 30`]);
    Atomics.store(shared, 0, cp.pid);
    Atomics.notify(shared, 0);
    cp.on('exit', () => mark('end', t('owns a sleeper', 1)));
  } else {
    mark('begin', t('cleanup kills stray workers', 2));
    Atomics.wait(shared, 0, 0);
    setTimeout(() => {
      process.kill(Atomics.load(shared, 0), 'SIGKILL');
      mark('end', t('cleanup kills stray workers', 2));
    }, 200);
  }
}
"#;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pool.js");
    std::fs::write(&file, script).unwrap();
    let r = record(&[], &["node", file.to_str().unwrap(), lib, &marker]);
    let rep = report(&r);
    let c = certificate(&rep, &marker);
    let (v, k) = (&c["victim"]["test"], &c["killer"]["test"]);
    assert_eq!(
        (&v["name"], &v["via"]),
        (&"owns a sleeper".into(), &"spawned".into()),
        "{c:#}"
    );
    assert_ne!(
        v["spawned_by"]["tid"], v["spawned_by"]["pid"],
        "a worker thread forked it"
    );
    assert_eq!(
        (&k["name"], &k["via"]),
        (&"cleanup kills stray workers".into(), &"own".into()),
        "{c:#}"
    );
    assert_ne!(
        c["killer"]["tid"], c["killer"]["process"]["pid"],
        "a worker thread killed"
    );
    assert!(c["headline"].as_str().unwrap().contains(
        ", in `pool.test.js > cleanup kills stray workers` in vitest worker 2; the victim was spawned by \
         `pool.test.js > owns a sleeper` in vitest worker 1"
    ), "{}", c["headline"]);
}

/// Without `--tests`, vitest's workers are still named: it sets
/// `VITEST_POOL_ID` in a worker once it runs, so what a worker spawns has it
/// at exec. Two shells stand for two workers: one's child is the sleeper,
/// the other's child pkills it.
#[test]
fn vitest_pool_ids_name_the_workers_of_both_ends() {
    let marker = format!("tn-pool-{}", std::process::id());
    let script = format!(
        "(export VITEST_POOL_ID=1; bash -c 'exec -a {marker} sleep 30'; true) & \
         (sleep 0.3; export VITEST_POOL_ID=2; pkill -KILL -f '^{marker}'; true); wait"
    );
    let r = record(&[], &["sh", "-c", &script]);
    let rep = report(&r);
    let c = certificate(&rep, &marker);
    assert_eq!(c["victim"]["worker"], "a child of vitest worker 1", "{c:#}");
    assert_eq!(c["killer"]["worker"], "a child of vitest worker 2", "{c:#}");
    assert!(c["victim"]["test"].is_null());
    let headline = c["headline"].as_str().unwrap();
    assert!(
        headline
            .ends_with(", from a child of vitest worker 2; the victim: a child of vitest worker 1"),
        "{headline}"
    );
}

/// The exec records of `path` in the log, each with its runner variables.
fn execs_of(r: &Recorded, path: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    r.events()
        .execs()
        .filter(|x| x.filename == path)
        .map(|x| x.test_env.clone())
        .collect()
}

/// The runner's variables are read in the kernel at exec, so a helper that
/// is gone before the ring is drained keeps them: 40 `/bin/true`s, each
/// over by the time the record could be read from /proc (83 % of them lost
/// their variables when they were read there), all named. Beside them, a
/// token and two names that only start or end like a runner's reach none
/// of the log: the kernel sends the exact names only.
#[test]
fn a_helper_gone_before_the_drain_keeps_its_runners_variables() {
    let secret = format!("ghp_{:x}", std::process::id() as u64 * 0x2545_f491);
    let script = r#"
import os, subprocess
secret = os.environ["GITHUB_TOKEN"]
env = dict(os.environ)
env["PYTEST_CURRENT_TESTX"] = secret + "-x"
env["NEXTEST_SECRET"] = secret + "-n"
env["PYTEST_XDIST_WORKER"] = "gw3"
for i in range(40):
    env["PYTEST_CURRENT_TEST"] = f"tests/test_helpers.py::test_true[{i}] (call)"
    subprocess.run(["/bin/true"], env=env, check=True)
"#;
    let r = record_env(
        &[],
        &["python3", "-c", script],
        &[("GITHUB_TOKEN", &secret)],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let execs = execs_of(&r, "/bin/true");
    assert_eq!(execs.len(), 40);
    for (i, env) in execs.iter().enumerate() {
        let want = format!("tests/test_helpers.py::test_true[{i}] (call)");
        assert_eq!(
            env.get("PYTEST_CURRENT_TEST"),
            Some(&want),
            "exec {i}: {env:?}"
        );
        assert_eq!(
            env.get("PYTEST_XDIST_WORKER").map(String::as_str),
            Some("gw3")
        );
        assert_eq!(env.len(), 2, "{env:?}");
    }
    for file in ["events.ndjson", "report.json", "report.md", "report.html"] {
        let text = std::fs::read_to_string(r.path(file)).unwrap();
        assert!(!text.contains(&secret), "{file} holds the secret");
    }
}
