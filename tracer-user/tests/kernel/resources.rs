//! The run's resources over time, on real cgroups with real programs: a
//! slow leak and a sudden spike killed in a memory-limited cgroup (v1 on
//! the host, v2 in the `--cgroup-v2` guest), each with its growing process
//! named and its curve in report.json; a run under a CPU quota that times
//! out, its throttling said. The growers are this test binary itself
//! (scenarios): nothing the VMs' initramfs lacks.
use std::{hint::black_box, thread::sleep, time::Duration};

use serde_json::Value;

use crate::common::cgroup::TestCgroup;
use crate::common::*;
use tracer_user::eventlog::Record;

const LIMIT: u64 = 96 << 20;
const MIB: u64 = 1 << 20;

/// `n` bytes of ones: each page written (zeros could stay unbacked).
fn touched(n: usize) -> Vec<u8> {
    black_box(vec![1u8; n])
}

/// 2 MiB more every 100 ms: the limit is reached in about 5 s.
fn leak() {
    let mut held = Vec::new();
    loop {
        held.push(touched(2 << 20));
        black_box(&held);
        sleep(Duration::from_millis(100));
    }
}

/// 8 MiB, 3 s of calm, then 300 MiB at once; says when the spike began
/// (`spike at NS`, CLOCK_BOOTTIME: the log's clock).
fn spike() {
    use nix::time::{clock_gettime, ClockId};
    let base = touched(8 << 20);
    sleep(Duration::from_secs(3));
    let t = clock_gettime(ClockId::CLOCK_BOOTTIME).unwrap();
    println!(
        "spike at {}",
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    );
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    let big = touched(300 << 20);
    black_box((&base, &big));
}

/// The command joins `cg`, then becomes `argv`.
fn in_cgroup(cg: &TestCgroup, argv: &[String]) -> Vec<String> {
    let script = format!(
        "echo $$ > {} && exec \"$@\"",
        cg.dir.join("cgroup.procs").display()
    );
    let mut cmd = vec!["sh".into(), "-c".into(), script, "sh".into()];
    cmd.extend_from_slice(argv);
    cmd
}

/// The scenario `sc` recorded in `cg`.
fn record_in(cg: &TestCgroup, sc: &Scenario, extra: &[&str]) -> Recorded {
    record_env(extra, &in_cgroup(cg, &sc.argv()), &[sc.env()])
}

/// This test binary's comm: its file name, cut to 15 bytes.
fn own_comm() -> String {
    let exe = std::env::current_exe().unwrap();
    let name = exe.file_name().unwrap().to_str().unwrap();
    name[..name.len().min(15)].to_string()
}

fn report_json(r: &Recorded) -> Value {
    serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap()
}

/// The OOM certificate of the run's root (the scenario, exec'd by the shell).
fn oom_cert(report: &Value) -> &Value {
    report["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cause"]["kind"] == "oom")
        .unwrap_or_else(|| panic!("no OOM certificate: {}", report["verdict"]))
}

#[test]
fn a_slow_leak_is_drawn_up_to_its_oom_kill() {
    let sc = scenario(leak);
    require_root();
    let cg = TestCgroup::with_memory_limit(LIMIT);
    let r = record_in(&cg, &sc, &[]);
    let comm = own_comm();
    assert_eq!(r.code(), Some(137), "OOM-killed: {}", r.stderr());
    let root = root(&r);
    let samples = r
        .events()
        .filter(|e| matches!(e, Record::Resources(_)))
        .count();
    assert!(
        samples >= 4,
        "a 5 s leak sampled at least 4 times: {samples}"
    );

    let report = report_json(&r);
    let g = &oom_cert(&report)["oom"]["memory"];
    // `v1:/NAME` here, `v2:/NAME` on a v2-only machine.
    let label = g["cgroup"].as_str().unwrap();
    assert!(label.ends_with(&format!(":/{}", cg.name())), "{g}");
    assert_eq!(g["limit_bytes"], LIMIT, "{g}");
    let (from, to) = (
        g["from_bytes"].as_u64().unwrap(),
        g["to_bytes"].as_u64().unwrap(),
    );
    assert!(from < 40 * MIB, "the window starts low: {g}");
    assert!(to > LIMIT * 7 / 10, "and climbs near the limit: {g}");
    assert!(g["over_ms"].as_u64().unwrap() >= 2000, "over seconds: {g}");
    let largest = &g["largest"];
    assert_eq!(largest["pid"], root.pid, "{g}");
    assert_eq!(largest["comm"], comm.as_str(), "{g}");
    assert!(largest["grew_bytes"].as_u64().unwrap() > 40 * MIB, "{g}");

    // The curve: the leaker's RSS rising in report.json's resources.
    let res = &report["resources"];
    assert_eq!(res["memory_cgroup"].as_str(), Some(label));
    let procs = res["processes"].as_array().unwrap();
    let py = procs
        .iter()
        .find(|p| p["pid"] == root.pid)
        .unwrap_or_else(|| panic!("the leaker among the largest: {res}"));
    let series: Vec<u64> = py["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[1].as_u64().unwrap())
        .collect();
    assert!(series.len() >= 3, "{series:?}");
    assert!(series.last() > series.first(), "growing: {series:?}");

    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| memory before the kill |"))
        .unwrap_or_else(|| panic!("no growth row:\n{md}"));
    assert!(
        row.contains(&format!("`{comm}`")) && row.contains("limit 96 MiB"),
        "{row}"
    );
    assert!(md.contains("## Resources"), "{md}");
}

#[test]
fn a_sudden_spike_is_told_apart_from_a_leak() {
    let sc = scenario(spike);
    require_root();
    let cg = TestCgroup::with_memory_limit(LIMIT);
    let r = record_in(&cg, &sc, &[]);
    let comm = own_comm();
    assert_eq!(r.code(), Some(137), "OOM-killed: {}", r.stderr());
    let root = root(&r);
    let report = report_json(&r);
    let g = &oom_cert(&report)["oom"]["memory"];
    let spike_t: u64 = String::from_utf8_lossy(&r.output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("spike at ")?.parse().ok())
        .unwrap_or_else(|| panic!("the scenario said when it spiked: {}", r.stderr()));
    // Flat for seconds before the spike: ~8 MiB plus the test binary's
    // own, every sample of the cgroup (a leak climbs there).
    let label = format!(":/{}", cg.name());
    let before: Vec<u64> = r
        .events()
        .filter_map(|e| match e {
            Record::Resources(s)
                if s.at.t < spike_t
                    && s.memory_cgroup
                        .as_deref()
                        .is_some_and(|c| c.ends_with(&label)) =>
            {
                s.memory.as_ref().map(|m| m.usage)
            }
            _ => None,
        })
        .collect();
    assert!(before.len() >= 2, "sampled before the spike: {before:?}");
    assert!(
        before.iter().all(|&b| b < 48 * MIB),
        "no climb before: {before:?}"
    );
    assert!(g["over_ms"].as_u64().unwrap() >= 2000, "{g}");
    assert!(g["from_bytes"].as_u64().unwrap() < 48 * MIB, "{g}");
    assert!(g["last_sample_ms"].as_u64().unwrap() <= 1500, "{g}");
    assert_eq!(g["largest"]["pid"], root.pid, "{g}");
    assert_eq!(g["largest"]["comm"], comm.as_str(), "{g}");
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    let row = md
        .lines()
        .find(|l| l.starts_with("| memory before the kill |"))
        .unwrap_or_else(|| panic!("no growth row:\n{md}"));
    // The spike fills 96 MiB page by page: on a slow machine (TCG) a
    // sample can land while it fills, and that sample is the curve's last
    // point. Below 80 % of the limit the row still says the kill came in
    // a spike after it; with no sample inside the spike, the window's
    // highest is the calm's.
    let last = g["last_bytes"].as_u64().unwrap();
    if last < LIMIT / 10 * 8 {
        assert!(row.contains("then a spike to its 96 MiB limit"), "{row}");
    }
    let last_t = g["kill_t"].as_u64().unwrap() - g["last_sample_ms"].as_u64().unwrap() * 1_000_000;
    if last_t + 1_000_000 < spike_t {
        assert!(g["to_bytes"].as_u64().unwrap() < 48 * MIB, "{g}");
        assert!(last < 48 * MIB, "{g}");
    }
}

#[test]
fn a_throttled_timeout_says_it_was_throttled() {
    require_root();
    // A tenth of a CPU for a process that would use a whole one.
    let cg = TestCgroup::with_cpu_quota(10_000);
    let spin = ["sh", "-c", "while :; do :; done"].map(String::from);
    let r = record(
        &["--timeout", "4s", "--kill-grace", "2s"],
        &in_cgroup(&cg, &spin),
    );
    assert_eq!(r.code(), Some(124), "timed out: {}", r.stderr());
    let report = report_json(&r);
    let snap = report["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["reason"] == "timeout")
        .expect("a timeout snapshot");
    let m = &snap["last_minute"];
    assert!(
        m["throttled_periods_pct"].as_u64().unwrap() >= 50,
        "throttled in most periods: {m}"
    );
    // Throttled most of the span the samples cover, whatever its length
    // (the sampler's ticks on a loaded machine).
    let (throttled, over) = (
        m["throttled_ms"].as_u64().unwrap(),
        m["over_ms"].as_u64().unwrap(),
    );
    assert!(over >= 1000 && throttled * 2 >= over, "{m}");
    assert_eq!(m["quota_pct"], 10, "{m}");
    let verdict = report["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("Timed out, CPU-throttled in "),
        "{verdict}"
    );
}

/// `daemon --cgroup` samples the watched cgroup: its memory and limit are
/// gauges on /metrics (one series each, whatever runs in it), and the
/// samples are in its log.
#[test]
fn a_daemon_exports_its_watched_cgroup() {
    use crate::common::metrics_daemon::{get, metrics_addr, Reaped};
    use std::{
        process::{Command, Stdio},
        time::Instant,
    };
    let sc = scenario(|| {
        let held = touched(24 << 20);
        println!("ready");
        std::io::Write::flush(&mut std::io::stdout()).unwrap();
        sleep(Duration::from_secs(120));
        black_box(&held);
    });
    require_root();
    let cg = TestCgroup::with_memory_limit(LIMIT);
    let dir = tempfile::tempdir().unwrap();
    // 24 MiB held in the cgroup while the daemon watches it.
    let argv = in_cgroup(&cg, &sc.argv());
    let (key, value) = sc.env();
    let mut held = Reaped(
        Command::new(&argv[0])
            .args(&argv[1..])
            .env(key, value)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Up to the body's line (libtest may say what it runs first).
    let mut out = std::io::BufReader::new(held.0.stdout.take().unwrap());
    let mut line = String::new();
    while line.trim() != "ready" {
        line.clear();
        let n = std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert!(n > 0, "the holder ended before it was ready");
    }
    let mut daemon = Reaped(
        tracer()
            .args(["daemon", "--output"])
            .arg(dir.path().join("out"))
            .arg("--cgroup")
            .arg(&cg.dir)
            .args(["--metrics-listen", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (addr, _) = metrics_addr(&mut daemon.0);
    let gauge = |text: &str, name: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let (_, text) = get(&addr, "/metrics", Duration::from_secs(2)).unwrap();
        if gauge(&text, "tracer_cgroup_memory_bytes").is_some_and(|b| b > (20 << 20) as f64) {
            break text;
        }
        assert!(Instant::now() < deadline, "no memory gauge: {text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        gauge(&text, "tracer_cgroup_memory_limit_bytes"),
        Some(LIMIT as f64)
    );
    assert!(
        text.contains("tracer_cgroup_memory_events{event=\"oom_kill\"} 0"),
        "{text}"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.0.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(daemon.0.wait().unwrap().code(), Some(0));
    let log = std::fs::read_to_string(dir.path().join("out/events.ndjson")).unwrap();
    // `v1:/NAME` here, `v2:/NAME` on a v2-only machine.
    let want = format!(":/{}\",\"memory\"", cg.name());
    assert!(
        log.lines()
            .any(|l| l.starts_with("{\"type\":\"resources\"") && l.contains(&want)),
        "no sample of {want} in the daemon's log"
    );
    // The stop's report (from the live ledger, not the log read back) has
    // the section a `tracer report` of the same log has.
    let report: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out/report.json")).unwrap())
            .unwrap();
    let res = &report["resources"];
    assert!(res["samples"].as_u64().unwrap() >= 1, "{res}");
    assert!(res["peak_bytes"].as_u64().unwrap() > 20 * MIB, "{res}");
    assert_eq!(res["limit_bytes"], LIMIT, "{res}");
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    assert!(md.contains("## Resources"), "{md}");
    drop(held);
}

/// Under the daemon, a leak's samples span many looks (one a second
/// here) and its OOM kill comes in the last: the certificate still tells
/// the whole climb, and the stop's report draws the leaker's curve.
#[test]
fn a_daemon_tells_a_leaks_climb_across_its_looks() {
    use crate::common::metrics_daemon::Reaped;
    use std::process::Command;
    let sc = scenario(leak);
    require_root();
    let cg = TestCgroup::with_memory_limit(LIMIT);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut daemon = Reaped(
        tracer()
            .args(["daemon", "--metrics-interval", "1s", "--output"])
            .arg(&out)
            .arg("--cgroup")
            .arg(&cg.dir)
            .spawn()
            .unwrap(),
    );
    wait_for_log(&out, &format!("\"tracer_pid\":{}", daemon.0.id()));
    let argv = in_cgroup(&cg, &sc.argv());
    let (key, value) = sc.env();
    let leaker = Command::new(&argv[0])
        .args(&argv[1..])
        .env(key, value)
        .spawn()
        .unwrap();
    let pid = leaker.id();
    let status = Reaped(leaker).0.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "OOM-killed"
    );
    wait_for_log(&out, "\"type\":\"oom\"");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon.0.id() as i32),
        nix::sys::signal::SIGTERM,
    )
    .unwrap();
    assert_eq!(daemon.0.wait().unwrap().code(), Some(0));
    let report: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    let g = &oom_cert(&report)["oom"]["memory"];
    assert!(
        g["from_bytes"].as_u64().unwrap() < 40 * MIB,
        "from low: {g}"
    );
    assert!(g["to_bytes"].as_u64().unwrap() > LIMIT * 7 / 10, "{g}");
    assert!(g["over_ms"].as_u64().unwrap() >= 2000, "over seconds: {g}");
    assert_eq!(g["largest"]["pid"], pid, "{g}");
    let procs = report["resources"]["processes"].as_array().unwrap();
    let leaker = procs
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("the leaker among the largest: {procs:?}"));
    let series = leaker["series"].as_array().unwrap();
    assert!(series.len() >= 3, "{series:?}");
}
