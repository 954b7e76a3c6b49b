//! Round 3, finding 8: the OTLP exporter followed redirects. A collector
//! endpoint (or whoever answers on its address) that said `307 Location:
//! elsewhere` got the request re-sent there with OTEL_EXPORTER_OTLP_HEADERS
//! (API keys), and the records another host took were counted as
//! delivered. And the wrapped command inherited those same header secrets
//! from tracer's environment. Here a server on 127.0.0.1 answers each
//! redirect status (307 among them) to a second one that records what
//! reaches it; the command prints its environment.
use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    thread::JoinHandle,
};

use serde_json::Value;

use crate::common::*;

/// What one request brought: its path and headers (names lowercased).
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: Vec<(String, String)>,
}

/// A one-answer HTTP server on 127.0.0.1 (a port of the kernel's choice)
/// that records every request; stopped and joined on drop.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// `answer` is the status line and headers after `HTTP/1.1 `.
    fn start(answer: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    if let Ok(conn) = conn {
                        if let Some(s) = serve(conn, &answer) {
                            seen.lock().unwrap().push(s);
                        }
                    }
                }
            })
        };
        Server {
            port,
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One request read whole (head, then Content-Length bytes of body), one
/// answer, and the connection closed.
fn serve(conn: TcpStream, answer: &str) -> Option<Seen> {
    conn.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .ok()?;
    let mut r = BufReader::new(conn.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    let mut w = conn;
    let _ = write!(
        w,
        "HTTP/1.1 {answer}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    Some(Seen { path, headers })
}

const SECRETS: [(&str, &str); 2] = [
    ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cret-all"),
    ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "x-tenant=s3cret-logs"),
];

/// Every redirect status. ureq followed 301, 302 and 303 as a GET to the
/// new host with every header but Authorization and Cookie (the API key
/// went along, and the 200 there counted as delivered); 307 and 308 of a
/// POST it did not follow, but retried as an error.
#[test]
fn otlp_redirects_are_not_followed_and_the_command_never_sees_the_headers() {
    for status in [
        "301 Moved Permanently",
        "302 Found",
        "303 See Other",
        "307 Temporary Redirect",
        "308 Permanent Redirect",
    ] {
        redirected(status);
    }
}

fn redirected(status: &str) {
    let code = &status[..3];
    let elsewhere = Server::start("200 OK".into());
    let endpoint = Server::start(format!("{status}\r\nLocation: {}/v1/logs", elsewhere.url()));
    let mut env = SECRETS.to_vec();
    env.push(("TRACER_TEST_PASSED_ON", "kept"));
    // A death to export, then the command's whole environment on stdout.
    let r = record_env(
        &["--otlp-endpoint", &endpoint.url()],
        &["sh", "-c", "sleep 30 & kill -KILL $!; wait; env"],
        &env,
    );
    assert_eq!(r.code(), Some(0), "{code}: {}", r.stderr());

    // The endpoint was asked, with the headers (it is the configured one)...
    let asked = endpoint.seen();
    assert!(!asked.is_empty(), "{code}: the endpoint got no request");
    assert_eq!(asked[0].path, "/v1/logs");
    assert!(
        asked[0]
            .headers
            .contains(&("api-key".into(), "s3cret-all".into())),
        "{code}: {asked:?}"
    );
    // ...and nothing went where its answer pointed.
    let leaked = elsewhere.seen();
    assert!(
        leaked.is_empty(),
        "{code}: the redirect was followed, headers and all: {leaked:?}"
    );
    assert_eq!(asked.len(), 1, "{code}: a redirect is final, not retried");

    // A redirect is a reported failure, not a delivery.
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(r.path("report.json")).unwrap()).unwrap();
    let export = &report["log"]["export"];
    assert_eq!(export["delivered"], 0, "{code}: {export}");
    assert!(export["records"].as_u64().unwrap() >= 1, "{code}: {export}");
    assert_eq!(export["undelivered"], export["records"], "{code}: {export}");
    let error = export["error"].as_str().unwrap();
    assert!(
        error.contains(&format!("HTTP {code}")) && error.contains("redirect: not followed"),
        "{error}"
    );
    let md = std::fs::read_to_string(r.path("report.md")).unwrap();
    assert!(md.contains("not delivered"), "{code}: {md}");

    // The command got tracer's environment minus the exporter's secrets.
    let seen_env = String::from_utf8_lossy(&r.output.stdout);
    assert!(
        seen_env.contains("TRACER_TEST_PASSED_ON=kept"),
        "{seen_env}"
    );
    for (var, value) in SECRETS {
        assert!(!seen_env.contains(var), "{code}: {var} reached the command");
        assert!(
            !seen_env.contains(value),
            "{code}: {value} reached the command"
        );
    }
}

/// Without an OTLP export of tracer's own, the variables are the job's: a
/// job that exports with its own SDK keeps its headers.
#[test]
fn without_an_export_the_command_keeps_its_otlp_headers() {
    let r = record_env(&[], &["sh", "-c", "env"], &SECRETS);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let seen_env = String::from_utf8_lossy(&r.output.stdout);
    for (var, value) in SECRETS {
        assert!(
            seen_env.contains(&format!("{var}={value}")),
            "{var} was withheld with no export: {seen_env}"
        );
    }
}
