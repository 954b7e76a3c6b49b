//! A real `tracer daemon --metrics-listen 127.0.0.1:0` for the metrics
//! tests, and a plain HTTP/1.1 scrape of it.
use std::{
    io::{self, BufRead, BufReader, Read, Write},
    net::TcpStream,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use super::tracer;

/// A child process of the test, killed and reaped even when an assertion
/// fails first.
pub(crate) struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What the daemon said on stderr after its metrics line (the last 1000
/// lines at most).
pub(crate) type StderrLines = Arc<Mutex<Vec<String>>>;

/// The daemon's metrics address, from the line it prints once listening,
/// returned once it also says it is watching;
/// its stderr is drained from then on (so it never blocks on a full pipe)
/// into the lines returned.
pub(crate) fn metrics_addr(daemon: &mut Child) -> (String, StderrLines) {
    let stderr = daemon.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    // The server listens before the scope is seeded (its first records are
    // counted too); a test that starves the daemon of file descriptors must
    // not do it while the seed's task iterator still needs one, so this
    // waits for the seeded line as well (CI met that race under load).
    let mut addr = None;
    loop {
        let line = lines
            .next()
            .expect("the daemon ended before serving metrics and watching")
            .unwrap();
        if let Some(rest) = line.strip_prefix("tracer: metrics on http://") {
            addr = Some(rest.trim_end_matches("/metrics").to_string());
        }
        if line.starts_with("tracer: daemon watching") {
            break;
        }
    }
    let addr = addr.expect("the daemon said it was watching before serving metrics");
    let said = StderrLines::default();
    let keep = said.clone();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let mut k = keep.lock().unwrap();
            if k.len() < 1000 {
                k.push(line);
            }
        }
    });
    (addr, said)
}

/// A daemon watching one `sleep` of the test's (a quiet scope), serving
/// metrics on a port the kernel picked. Fields drop in order: the daemon is
/// stopped before its output directory goes.
pub(crate) struct MetricsDaemon {
    pub daemon: Reaped,
    /// Held for its drop: the watched `sleep` is killed after the daemon.
    _watched: Reaped,
    pub addr: String,
    pub stderr: StderrLines,
    /// Held for its drop: removed after the daemon stopped.
    _dir: tempfile::TempDir,
}

impl MetricsDaemon {
    pub(crate) fn start() -> Self {
        Self::start_with(|_| {})
    }

    /// `tweak` adjusts the daemon's command before it is spawned.
    pub(crate) fn start_with(tweak: impl FnOnce(&mut Command)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let watched = Reaped(Command::new("sleep").arg("600").spawn().unwrap());
        let mut cmd = tracer();
        cmd.args(["daemon", "--output"])
            .arg(dir.path().join("out"))
            .args(["--root-pid", &watched.0.id().to_string()])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .stderr(Stdio::piped());
        tweak(&mut cmd);
        let mut daemon = Reaped(cmd.spawn().unwrap());
        let (addr, stderr) = metrics_addr(&mut daemon.0);
        Self {
            daemon,
            _watched: watched,
            addr,
            stderr,
            _dir: dir,
        }
    }

    pub(crate) fn pid(&self) -> i32 {
        self.daemon.0.id() as i32
    }

    /// A field of the daemon's /proc/PID/status, in kB (VmRSS, VmHWM).
    pub(crate) fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {field} in /proc/PID/status"))
    }

    /// The daemon's open fds: all, and those that are sockets.
    pub(crate) fn fds(&self) -> (usize, usize) {
        let mut all = 0;
        let mut sockets = 0;
        for e in std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .unwrap()
            .flatten()
        {
            all += 1;
            if std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
            {
                sockets += 1;
            }
        }
        (all, sockets)
    }

    /// GET /metrics on a fresh connection: the status and the whole answer.
    pub(crate) fn scrape(&self, timeout: Duration) -> io::Result<(u16, String)> {
        get(&self.addr, "/metrics", timeout)
    }

    /// Scrape until the answer is 200 or `within` has passed.
    pub(crate) fn scrape_ok_within(&self, within: Duration) -> Result<String, String> {
        let deadline = Instant::now() + within;
        loop {
            let got = self.scrape(Duration::from_secs(2));
            match got {
                Ok((200, text)) => return Ok(text),
                _ if Instant::now() >= deadline => return Err(format!("{got:?}")),
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

/// `GET path` with `Connection: close`, read to the end within `timeout`.
pub(crate) fn get(addr: &str, path: &str, timeout: Duration) -> io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let text = read_answer(&mut s)?;
    Ok((status_of(&text).unwrap_or(0), text))
}

/// Everything the server sends until it closes (at most 1 MiB). A reset
/// after the answer counts as the close: a server that closes with unread
/// request bytes resets the connection, the answer already delivered.
pub(crate) fn read_answer(s: &mut TcpStream) -> io::Result<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    while buf.len() < 1 << 20 {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset && !buf.is_empty() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The status code of an HTTP/1.1 answer.
pub(crate) fn status_of(answer: &str) -> Option<u16> {
    answer.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse().ok()
}
