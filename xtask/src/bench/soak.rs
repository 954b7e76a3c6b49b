//! `cargo xtask bench --soak`: a daemon that runs for hours must cost the same
//! per event at the end as at the start. A busy job (short processes, some
//! killed by their parent: a few thousand events a second) runs under
//! `tracer daemon --root-pid JOB --metrics-listen … --metrics-interval 1s`;
//! every period the daemon's CPU time (from /proc), its RSS and the events it
//! has handed to its log (its own `tracer_events_total`, scraped) are sampled,
//! and the table shows CPU per 1,000 events and RSS over time: flat is the
//! target. Then SIGTERM: how long the reports take, and their sizes.
//! It prints; it asserts nothing.
use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};

use super::soak_cgroup::SoakCgroup;

pub(crate) struct SoakOpts {
    /// How long the job runs.
    pub secs: u64,
    /// One sample every this many seconds.
    pub period: u64,
    /// The job in its own memory cgroup (`cgroup::SoakCgroup`), churning
    /// memory too, watched with `daemon --cgroup`: the resources sampler
    /// runs (`--root-pid` has no cgroup of its own to sample).
    pub cgroup: bool,
}

/// The job: a shell that forks short processes as fast as it can and kills
/// every other one (so each round is fork, exec, signal, exit records and,
/// for the killed ones, a certificate of an expected death).
const JOB: &str = "while :; do sleep 5 & kill -TERM $!; /bin/true; wait; done";

/// The cgroup soak's job: the same rounds, each also a `dd` whose buffer
/// (1 to 32 MiB, a new size each round) is allocated, written and freed.
const MEMORY_JOB: &str = "i=0; while :; do sleep 5 & kill -TERM $!; /bin/true; wait; \
     i=$((i % 32 + 1)); dd if=/dev/zero of=/dev/null bs=${i}M count=1 2>/dev/null; done";

pub(crate) fn run(tracer: &Path, scratch: &Path, opts: &SoakOpts) -> Result<String> {
    let dir = scratch.join("soak");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let cg = match opts.cgroup {
        true => Some(SoakCgroup::new()?),
        false => None,
    };
    let (script, watch) = match &cg {
        Some(cg) => (
            format!(
                "echo $$ > {} && exec sh -c '{MEMORY_JOB}'",
                cg.dir.join("cgroup.procs").display()
            ),
            Watch::Cgroup(cg.dir.clone()),
        ),
        None => (JOB.to_string(), Watch::RootPid),
    };
    let mut job = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting the soak job")?;
    let result = soak(tracer, &dir, job.id(), &watch, opts);
    let _ = job.kill();
    let _ = job.wait();
    // The job's last `sleep 5` ends by itself; the cgroup is removed once
    // it is empty (SoakCgroup's drop).
    drop(cg);
    result
}

/// What the daemon watches: the job's process tree, or its cgroup.
enum Watch {
    RootPid,
    Cgroup(std::path::PathBuf),
}

fn soak(tracer: &Path, dir: &Path, job: u32, watch: &Watch, opts: &SoakOpts) -> Result<String> {
    let mut daemon = Command::new(tracer);
    match watch {
        Watch::RootPid => daemon.args(["daemon", "--root-pid", &job.to_string()]),
        Watch::Cgroup(cg) => daemon.args(["daemon", "--cgroup"]).arg(cg),
    };
    let mut daemon = daemon
        .arg("--output")
        .arg(dir)
        .args([
            "--metrics-listen",
            "127.0.0.1:0",
            "--metrics-interval",
            "1s",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting tracer daemon")?;
    let addr = match metrics_address(&mut daemon) {
        Ok(a) => a,
        Err(e) => {
            let _ = daemon.kill();
            let _ = daemon.wait();
            return Err(e);
        }
    };
    let pid = daemon.id();
    let mut out = String::new();
    let mut say = |line: String| {
        println!("{line}");
        out.push_str(&line);
        out.push('\n');
    };
    let (job, how) = match watch {
        Watch::RootPid => (JOB, "--root-pid"),
        Watch::Cgroup(_) => (MEMORY_JOB, "--cgroup (its own memory cgroup)"),
    };
    say(format!(
        "job: `{job}` for {} s under `tracer daemon {how}` with metrics every 1 s; a sample every {} s",
        opts.secs, opts.period
    ));
    say(String::new());
    say("| t (s) | events | events/s | daemon CPU (ms) | CPU ms / 1k events | RSS (MB) | cgroup memory (MB) |".into());
    say("| --- | --- | --- | --- | --- | --- | --- |".into());
    // A labelled series is exposed at 0 for its first scrape (metrics/mod.rs):
    // one scrape after the job got going, so the baseline counts what it says.
    std::thread::sleep(Duration::from_secs(2));
    events(&addr)?;
    let t0 = Instant::now();
    let (mut events_then, mut cpu_then) = (events(&addr)?, cpu_ms(pid)?);
    let mut per_k = Vec::new();
    let mut peak_rss = 0.0f64;
    while t0.elapsed() < Duration::from_secs(opts.secs) {
        std::thread::sleep(Duration::from_secs(opts.period));
        let body = scrape(&addr)?;
        let (events_now, cpu_now, rss) = (events_in(&body), cpu_ms(pid)?, rss_mb(pid)?);
        // The sampler's own figure of the watched cgroup: "-" without one.
        let memory = gauge(&body, "tracer_cgroup_memory_bytes")
            .map_or("-".to_string(), |b| format!("{:.1}", b / 1e6));
        let de = events_now.saturating_sub(events_then);
        let dc = cpu_now.saturating_sub(cpu_then);
        let ratio = if de > 0 {
            dc as f64 * 1000.0 / de as f64
        } else {
            0.0
        };
        per_k.push(ratio);
        peak_rss = peak_rss.max(rss);
        say(format!(
            "| {:.0} | {events_now} | {:.0} | {dc} | {ratio:.2} | {rss:.1} | {memory} |",
            t0.elapsed().as_secs_f64(),
            de as f64 / opts.period as f64,
        ));
        (events_then, cpu_then) = (events_now, cpu_now);
    }
    let stop = Instant::now();
    // SAFETY: kill(2) on the daemon we spawned and have not reaped.
    unsafe { libc_kill(pid as i32, 15) };
    // The stop's own peak: the daemon's high-water mark, read until it
    // exits (before the ledger, the stop re-read the whole log: 1.01 GB
    // for a 10-minute soak, far above the run's samples).
    let mut hwm = 0.0f64;
    let status = loop {
        if let Some(status) = daemon.try_wait()? {
            break status;
        }
        hwm = hwm.max(hwm_mb(pid).unwrap_or(0.0));
        std::thread::sleep(Duration::from_millis(20));
    };
    let stop_secs = stop.elapsed().as_secs_f64();
    let third = per_k.len() / 3;
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len().max(1) as f64;
    say(String::new());
    if third > 0 {
        let (first, last) = (mean(&per_k[..third]), mean(&per_k[per_k.len() - third..]));
        say(format!(
            "CPU per 1,000 events: first third {first:.2} ms, last third {last:.2} ms ({:.2}x); peak RSS {peak_rss:.1} MB",
            last / first.max(f64::EPSILON)
        ));
    }
    let size = |name: &str| fs::metadata(dir.join(name)).map(|m| m.len()).unwrap_or(0);
    say(format!(
        "SIGTERM to exit: {stop_secs:.1} s ({status}), peak RSS with the stop {hwm:.1} MB; report.json {} KB, report.md {} KB, log {} MB",
        size("report.json") / 1024,
        size("report.md") / 1024,
        log_bytes(dir) / (1 << 20)
    ));
    Ok(out)
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// The daemon prints `tracer: metrics on http://ADDR/metrics` once bound;
/// its stderr is then drained by a thread so it never blocks on a full pipe.
fn metrics_address(daemon: &mut Child) -> Result<String> {
    let stderr = daemon.stderr.take().context("daemon stderr")?;
    let mut lines = BufReader::new(stderr);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line)? == 0 || Instant::now() > deadline {
            bail!("tracer daemon exited or never served metrics");
        }
        if let Some(rest) = line.trim().strip_prefix("tracer: metrics on http://") {
            let addr = rest.trim_end_matches("/metrics").to_string();
            std::thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
            return Ok(addr);
        }
    }
}

/// `tracer_events_total` summed over its types, from one scrape.
fn events(addr: &str) -> Result<u64> {
    Ok(events_in(&scrape(addr)?))
}

fn events_in(body: &str) -> u64 {
    body.lines()
        .filter(|l| l.starts_with("tracer_events_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// An unlabelled gauge's value, from one scrape.
fn gauge(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// One GET /metrics, headers and body.
fn scrape(addr: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("scraping {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = String::new();
    s.read_to_string(&mut body)?;
    Ok(body)
}

/// utime + stime of `pid`, in ms (clock ticks of 10 ms).
fn cpu_ms(pid: u32) -> Result<u64> {
    let stat = procfs::process::Process::new(pid as i32)?.stat()?;
    let ticks = procfs::ticks_per_second();
    Ok((stat.utime + stat.stime) * 1000 / ticks)
}

fn rss_mb(pid: u32) -> Result<f64> {
    let status = procfs::process::Process::new(pid as i32)?.status()?;
    Ok(status.vmrss.unwrap_or(0) as f64 / 1024.0)
}

/// The process's peak RSS so far (VmHWM).
fn hwm_mb(pid: u32) -> Result<f64> {
    let status = procfs::process::Process::new(pid as i32)?.status()?;
    Ok(status.vmhwm.unwrap_or(0) as f64 / 1024.0)
}

fn log_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".ndjson"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum()
}
