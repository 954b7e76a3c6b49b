//! `--otlp-endpoint`: certificates as OpenTelemetry log records over
//! OTLP/HTTP, received by a small HTTP server the test starts that decodes
//! each request with the OpenTelemetry project's own Python proto package
//! (tests/kernel/otlp/receiver.py, in a venv of tests/kernel/otlp/requirements.txt).
use std::{
    io::Write,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::OnceLock,
    time::{Duration, Instant},
};

use crate::common::*;
use nix::{sys::signal::kill, unistd::Pid};
use serde_json::Value;

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kernel/otlp")
}

/// The receiver's venv under target/: made once, reused while
/// requirements.txt is unchanged.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("otlp-venv");
        let req = here().join("requirements.txt");
        let stamp = dir.join("requirements.stamp");
        let want = std::fs::read(&req).unwrap();
        if std::fs::read(&stamp).ok().as_ref() != Some(&want) {
            let _ = std::fs::remove_dir_all(&dir);
            let ok = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&dir)
                .status()
                .expect("python3 -m venv (Debian: python3-venv)");
            assert!(ok.success(), "python3 -m venv failed");
            let ok = Command::new(dir.join("bin/pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(&req)
                .status()
                .unwrap();
            assert!(ok.success(), "pip install -r {req:?} failed");
            std::fs::write(&stamp, want).unwrap();
        }
        dir.join("bin/python")
    })
}

/// The test's OTLP receiver, killed and reaped at the end.
struct Receiver {
    child: Child,
    out: PathBuf,
    url: String,
    _dir: tempfile::TempDir,
}

impl Receiver {
    /// `status` other than 200: a collector that refuses every request.
    fn start(status: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("received.ndjson");
        let portfile = dir.path().join("port");
        let child = Command::new(python())
            .arg(here().join("receiver.py"))
            .arg(&out)
            .arg(&portfile)
            .arg(status.to_string())
            .spawn()
            .unwrap();
        let mut r = Self {
            child,
            out,
            url: String::new(),
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let port = loop {
            if let Ok(p) = std::fs::read_to_string(&portfile) {
                break p;
            }
            assert!(
                r.child.try_wait().unwrap().is_none(),
                "receiver.py ended before listening"
            );
            assert!(Instant::now() < deadline, "receiver.py never listened");
            std::thread::sleep(Duration::from_millis(20));
        };
        r.url = format!("http://127.0.0.1:{}", port.trim());
        r
    }

    fn received(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn report_json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap()
}

fn deaths(received: &[Value]) -> Vec<&Value> {
    received
        .iter()
        .filter(|r| r["event_name"] == "tracer.death")
        .collect()
}

/// The record of the death of the process whose argv is `argv`.
fn death_of<'a>(received: &'a [Value], argv: &[&str]) -> &'a Value {
    deaths(received)
        .into_iter()
        .find(|r| r["attributes"]["process.command_args"] == serde_json::json!(argv))
        .unwrap_or_else(|| panic!("no death record of {argv:?} in {received:#?}"))
}

const GITHUB: [(&str, &str); 8] = [
    ("GITHUB_ACTIONS", "true"),
    ("GITHUB_WORKFLOW", "ci"),
    ("GITHUB_RUN_ID", "4242"),
    ("GITHUB_JOB", "unit-tests"),
    ("GITHUB_REPOSITORY", "acme/widgets"),
    ("GITHUB_SERVER_URL", "https://github.example"),
    ("K8S_POD_NAME", "runner-7"),
    ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret%20key"),
];

#[test]
fn certificates_arrive_as_otlp_log_records() {
    let rx = Receiver::start(200);
    // A worker SIGKILLed by its sibling, a segfault, a kill(2) that reaches
    // nobody (a pid above the kernel's largest pid_max), then exit 3.
    let r = record_env(
        &["--otlp-endpoint", &rx.url],
        &[
            "sh",
            "-c",
            // Kill only once the child runs sleep, not while it is still the
            // forked shell.
            "sleep 30 & a=$!; until read c </proc/$a/comm && [ \"$c\" = sleep ]; do :; done; \
             sh -c \"kill -KILL $a\"; wait $a; \
             python3 -c 'import ctypes; ctypes.string_at(0)'; \
             kill -TERM 4194400 2>/dev/null; exit 3",
        ],
        &GITHUB,
    );
    assert_eq!(r.code(), Some(3), "{}", r.stderr());
    let got = rx.received();
    let report = report_json(r.dir.path());
    let certs = report["certificates"].as_array().unwrap();

    // One record per certificate, each body the certificate as report.json has it.
    assert_eq!(deaths(&got).len(), certs.len(), "{got:#?}");
    for c in certs {
        let pid = c["victim"]["pid"].as_i64().unwrap();
        let rec = deaths(&got)
            .into_iter()
            .find(|x| x["attributes"]["process.pid"] == pid)
            .unwrap_or_else(|| panic!("certificate of pid {pid} not exported"));
        let body: Value = serde_json::from_str(rec["body"].as_str().unwrap()).unwrap();
        assert_eq!(&body, c, "the body is the certificate");
    }

    let killed = death_of(&got, &["sleep", "30"]);
    let sh = root(&r).pid as i64;
    let a = &killed["attributes"];
    assert_eq!(a["process.parent_pid"], sh);
    assert_eq!(a["process.executable.name"], "sleep");
    assert!(a["process.executable.path"]
        .as_str()
        .unwrap()
        .ends_with("sleep"));
    assert_eq!(a["tracer.rank"], "unexpected");
    assert_eq!(a["tracer.cause"], "killed_in_run");
    assert_eq!(a["tracer.signal"], "SIGKILL");
    assert_eq!(a["tracer.killer.relation"], "sibling");
    assert_eq!(a["event.name"], "tracer.death");
    assert_eq!(
        killed["severity_number"], 17,
        "ERROR for an unexpected death"
    );
    assert_eq!(killed["severity_text"], "ERROR");
    assert!(killed["time_unix_nano"].as_u64().unwrap() > 1_600_000_000_000_000_000);

    let segv = deaths(&got)
        .into_iter()
        .find(|x| x["attributes"]["tracer.signal"] == "SIGSEGV")
        .expect("the segfault exported");
    assert_eq!(segv["attributes"]["tracer.cause"], "fault");

    let near = got
        .iter()
        .find(|x| x["event_name"] == "tracer.near_miss")
        .expect("the near miss exported");
    assert_eq!(near["attributes"]["tracer.errno"], "ESRCH");
    assert_eq!(near["attributes"]["process.pid"], sh);
    assert_eq!(near["severity_text"], "WARN");

    // The resource: host, pod, the CI/CD run; the transport: path,
    // content type, the standard headers variable.
    let host = nix::unistd::gethostname().unwrap();
    for rec in &got {
        let res = &rec["resource"];
        assert_eq!(res["service.name"], "tracer");
        assert_eq!(res["host.name"], host.to_str().unwrap());
        assert_eq!(res["k8s.pod.name"], "runner-7");
        assert_eq!(res["cicd.pipeline.name"], "ci");
        assert_eq!(res["cicd.pipeline.run.id"], "4242");
        assert_eq!(res["cicd.pipeline.task.name"], "unit-tests");
        assert_eq!(
            res["cicd.pipeline.run.url.full"],
            "https://github.example/acme/widgets/actions/runs/4242"
        );
        assert_eq!(rec["path"], "/v1/logs");
        assert_eq!(rec["content_type"], "application/x-protobuf");
        assert_eq!(rec["api_key"], "s3cret key");
    }

    // The report says how the export went.
    let export = &report["log"]["export"];
    assert_eq!(export["records"].as_u64(), Some(got.len() as u64));
    assert_eq!(export["delivered"], export["records"]);
    assert_eq!(export["undelivered"], 0);
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(
        md.contains(&format!(
            "OTLP export: {} records, all delivered.",
            got.len()
        )),
        "{md}"
    );

    // `tracer report --otlp-endpoint` exports the same findings from the log.
    let rx2 = Receiver::start(200);
    let out = tempfile::tempdir().unwrap();
    let rep = tracer()
        .arg("report")
        .arg(r.path("events.ndjson"))
        .arg("--output")
        .arg(out.path())
        .args(["--otlp-endpoint", &rx2.url])
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .output()
        .unwrap();
    assert!(rep.status.success(), "{}", no_panic(&rep));
    let again = rx2.received();
    assert_eq!(again.len(), got.len());
    let bodies = |v: &[Value]| {
        let mut b: Vec<String> = v.iter().map(|x| x["body"].to_string()).collect();
        b.sort();
        b
    };
    assert_eq!(bodies(&again), bodies(&got));
}

/// A port nobody listens on (the kernel's pick, released).
fn dead_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

#[test]
fn a_dead_endpoint_leaves_the_run_unaffected() {
    let url = dead_url();
    let started = Instant::now();
    let r = record(
        &["--otlp-endpoint", &url],
        &["sh", "-c", "sleep 30 & kill -KILL $!; wait; exit 7"],
    );
    assert_eq!(
        r.code(),
        Some(7),
        "the status passes through: {}",
        r.stderr()
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a dead collector held the run up for {:?}",
        started.elapsed()
    );
    let report = report_json(r.dir.path());
    assert!(!report["certificates"].as_array().unwrap().is_empty());
    let export = &report["log"]["export"];
    assert_eq!(export["delivered"], 0);
    assert!(export["undelivered"].as_u64().unwrap() >= 1);
    assert!(
        export["error"].as_str().unwrap().contains("127.0.0.1"),
        "{export}"
    );
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(md.contains("not delivered"), "{md}");
    assert!(r.stderr().contains("OTLP export"), "{}", r.stderr());
    assert!(!r.stderr().contains("panicked"), "{}", r.stderr());
}

#[test]
fn a_refusing_collector_is_retried_then_reported() {
    let rx = Receiver::start(503);
    let r = record(
        &["--otlp-endpoint", &rx.url],
        &["sh", "-c", "sleep 30 & kill -KILL $!; wait"],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let attempts = rx.received().len();
    assert!(attempts >= 2, "retried after 503: {attempts} attempts");
    let export = &report_json(r.dir.path())["log"]["export"];
    assert_eq!(export["delivered"], 0);
    assert!(
        export["error"].as_str().unwrap().contains("HTTP 503"),
        "{export}"
    );
}

/// A daemon of the test's, stopped even when an assertion fails first.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_daemon_exports_deaths_while_it_runs_and_each_once() {
    require_root();
    let rx = Receiver::start(200);
    let dir = tempfile::tempdir().unwrap();
    let mut sh = Command::new("sh")
        .args([
            "-c",
            "read go; sleep 30 & a=$!; until read c </proc/$a/comm && [ \"$c\" = sleep ]; do :; done; sh -c \"kill -KILL $a\"; wait $a; read end",
        ])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut daemon = Reaped(
        tracer()
            .args(["daemon", "--output"])
            .arg(dir.path())
            .args(["--root-pid", &sh.id().to_string()])
            .args(["--otlp-endpoint", &rx.url, "--metrics-interval", "300ms"])
            .spawn()
            .unwrap(),
    );
    wait_for_log(dir.path(), &format!("\"pid\":{0},\"tid\":{0}", sh.id()));
    let mut stdin = sh.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    // Exported while the daemon runs, not only at its end.
    let deadline = Instant::now() + Duration::from_secs(30);
    while deaths(&rx.received()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "no death exported while the daemon ran"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    stdin.write_all(b"end\n").unwrap();
    assert!(sh.wait().unwrap().success());
    kill(
        Pid::from_raw(daemon.0.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(daemon.0.wait().unwrap().code(), Some(0));
    let got = rx.received();
    let killed: Vec<_> = deaths(&got)
        .into_iter()
        .filter(|r| r["attributes"]["tracer.signal"] == "SIGKILL")
        .collect();
    assert_eq!(killed.len(), 1, "exported once: {got:#?}");
    assert_eq!(killed[0]["resource"]["tracer.mode"], "daemon");
    let export = &report_json(dir.path())["log"]["export"];
    assert_eq!(export["undelivered"], 0, "{export}");
    assert_eq!(export["records"].as_u64(), Some(got.len() as u64));
}
