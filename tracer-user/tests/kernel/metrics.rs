//! `tracer daemon --metrics-listen`, scraped by a real Prometheus server
//! (Debian's `prometheus`, installed by `cargo xtask test`): deaths the test
//! causes show up in Prometheus' own query API.
use std::{
    io::Write,
    net::TcpListener,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use crate::common::{metrics_daemon::*, *};
use nix::{sys::signal::kill, unistd::Pid};

/// A port nobody listens on right now (the kernel's pick).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn prometheus(dir: &Path, target: &str) -> (Reaped, String) {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: tracer\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={listen}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .expect("prometheus (Debian package `prometheus`; `cargo xtask test` installs it)");
    (Reaped(child), listen)
}

/// The value of an instant query: the sum over all series (0 when none).
fn query(prom: &str, q: &str) -> Option<f64> {
    let url = format!("http://{prom}/api/v1/query");
    let body = ureq::get(&url)
        .query("query", q)
        .call()
        .ok()?
        .body_mut()
        .read_to_string()
        .ok()?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    assert_eq!(v["status"], "success", "query {q}: {body}");
    let series = v["data"]["result"].as_array()?;
    Some(
        series
            .iter()
            .filter_map(|s| s["value"][1].as_str()?.parse::<f64>().ok())
            .sum(),
    )
}

/// Poll Prometheus until `q` reaches `want` (scrapes are every second).
fn wait_for(prom: &str, q: &str, want: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = query(prom, q);
        if got.is_some_and(|v| v >= want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never showed {q} >= {want} (last: {got:?})"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn prometheus_scrapes_the_deaths_a_daemon_sees() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let prom_dir = dir.path().join("prom");
    std::fs::create_dir_all(&prom_dir).unwrap();
    // The test's own shell: waits for a line, then loses a child to a
    // sibling's SIGKILL, a child to its own SIGTERM, a Python to a
    // segfault, and tries a kill(2) on a pid that cannot exist (above the
    // kernel's largest pid_max): a near miss.
    let mut sh = Reaped(
        Command::new("sh")
            .args([
                "-c",
                "read go; \
                 sleep 30 & a=$!; until read c </proc/$a/comm && [ \"$c\" = sleep ]; do :; done; sh -c \"kill -KILL $a\"; wait $a; \
                 sleep 30 & kill -TERM $!; wait; \
                 python3 -c 'import ctypes; ctypes.string_at(0)'; \
                 kill -TERM 4194400 2>/dev/null; exit 0",
            ])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut daemon = Reaped(
        tracer()
            .args(["daemon", "--output"])
            .arg(&out)
            .args(["--root-pid", &sh.0.id().to_string()])
            .args([
                "--metrics-listen",
                "127.0.0.1:0",
                "--metrics-interval",
                "500ms",
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (target, _) = metrics_addr(&mut daemon.0);
    let (_prom, prom) = prometheus(&prom_dir, &target);
    wait_for(&prom, "up{job=\"tracer\"}", 1.0);
    wait_for(&prom, "tracer_build_info", 1.0);
    wait_for_log(&out, &format!("\"pid\":{0},\"tid\":{0}", sh.0.id()));

    sh.0.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(sh.0.wait().unwrap().success());

    wait_for(
        &prom,
        "tracer_deaths_total{rank=\"unexpected\",cause=\"killed_in_run\",signal=\"SIGKILL\",killer_relation=\"sibling\"}",
        1.0,
    );
    wait_for(
        &prom,
        "tracer_deaths_total{cause=\"killed_in_run\",signal=\"SIGTERM\",killer_relation=\"parent\"}",
        1.0,
    );
    wait_for(
        &prom,
        "tracer_deaths_total{cause=\"fault\",signal=\"SIGSEGV\"}",
        1.0,
    );
    wait_for(&prom, "tracer_near_misses_total{errno=\"ESRCH\"}", 1.0);
    wait_for(&prom, "tracer_events_total{type=\"exit\"}", 4.0);
    wait_for(&prom, "tracer_events_total{type=\"kill_call\"}", 3.0);
    wait_for(&prom, "tracer_ringbuf_bytes", 1.0);
    wait_for(&prom, "process_resident_memory_bytes", 1.0);
    // Counted once each however often the log is analysed again.
    assert_eq!(
        query(&prom, "sum(tracer_deaths_total{signal=\"SIGKILL\"})"),
        Some(1.0)
    );
    assert_eq!(
        query(&prom, "sum(tracer_events_lost_total)"),
        Some(0.0),
        "nothing lost in a quiet run"
    );

    dashboard_queries_work(&prom);

    // The daemon still stops cleanly and writes its reports.
    kill(
        Pid::from_raw(daemon.0.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(daemon.0.wait().unwrap().code(), Some(0));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert!(report["counts"]["unexpected"].as_u64().unwrap() >= 1);
}

/// Every query of the shipped Grafana dashboard, with Grafana's variables
/// filled in as Grafana would, is valid PromQL on a real server, and the
/// death panels show the deaths.
fn dashboard_queries_work(prom: &str) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/kubernetes/grafana-dashboard.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut showed = Vec::new();
    for panel in dash["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$__range", "10m")
                .replace("$instance", ".*")
                .replace("$job", ".*");
            let url = format!("http://{prom}/api/v1/query");
            let body = ureq::get(&url)
                .query("query", &expr)
                .call()
                .unwrap_or_else(|e| panic!("dashboard query {expr}: {e}"))
                .body_mut()
                .read_to_string()
                .unwrap();
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(v["status"], "success", "dashboard query {expr}: {body}");
            if !v["data"]["result"].as_array().unwrap().is_empty() {
                showed.push(panel["title"].as_str().unwrap().to_string());
            }
        }
    }
    for title in [
        "Unexpected deaths",
        "Deaths by cause",
        "Unexpected deaths by signal and killer",
        "Unexpected deaths by node",
        "Events by type",
        "Tracer versions and kernels",
    ] {
        assert!(
            showed.iter().any(|t| t == title),
            "panel {title} is empty: {showed:?}"
        );
    }
}

#[test]
fn metrics_listen_on_a_taken_port_is_one_clear_error() {
    require_root();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = tracer()
        .args(["daemon", "--all", "--output"])
        .arg(dir.path())
        .args(["--metrics-listen", &addr])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(70));
    let line = one_line_failure(&out);
    assert!(line.contains("--metrics-listen"), "{line}");
}

/// Only GET /metrics is served, once per connection: another path is 404,
/// another method 405 (HEAD too: it would let counters held at 0 count
/// unseen), and a second request pipelined on the same connection gets no
/// answer, the connection is closed after the first.
#[test]
fn only_get_metrics_is_served_once_per_connection() {
    require_root();
    let d = MetricsDaemon::start();
    let (status, text) = d.scrape(Duration::from_secs(5)).unwrap();
    assert_eq!(status, 200, "{text}");
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let head = head.to_ascii_lowercase();
    assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
    assert!(
        head.contains("\r\ncontent-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(body.contains("tracer_build_info{"), "{body}");
    assert!(body.ends_with("# EOF\n"), "{body}");

    let (status, _) = get(&d.addr, "/", Duration::from_secs(5)).unwrap();
    assert_eq!(status, 404);
    let (status, _) = get(&d.addr, "/metrics?x=1", Duration::from_secs(5)).unwrap();
    assert_eq!(status, 200, "a query string is still /metrics");
    for method in ["POST", "HEAD", "PUT", "DELETE"] {
        let mut s = std::net::TcpStream::connect(&d.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            s,
            "{method} /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
        )
        .unwrap();
        let text = read_answer(&mut s).unwrap();
        assert_eq!(status_of(&text), Some(405), "{method}: {text}");
        assert!(
            text.to_ascii_lowercase().contains("\r\nallow: get\r\n"),
            "{method}: {text}"
        );
    }

    let mut s = std::net::TcpStream::connect(&d.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(
        b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    .unwrap();
    let text = read_answer(&mut s).unwrap();
    assert_eq!(text.matches("HTTP/1.1 ").count(), 1, "{text}");
}
