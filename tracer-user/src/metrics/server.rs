//! The `/metrics` endpoint: hyper's HTTP/1.1 server on a current-thread
//! tokio runtime in a thread of its own, so neither a slow scraper nor a
//! flood of connections ever holds up the capture loop (the daemon's event
//! loop drains the ring: time spent there on hostile peers would cost
//! events).
//!
//! Anyone who can reach the port is a peer of the root daemon (the DaemonSet
//! listens on 0.0.0.0), so every resource a connection takes is bounded:
//!
//! - the request head (request line and headers): [`MAX_HEAD`], answered
//!   `431` and closed beyond (tiny_http, used before, read a head into an
//!   unbounded buffer: 256 MiB of request line grew the daemon by 264 MiB);
//! - time: [`HEAD_TIMEOUT`] to send the head, at a minimum byte rate
//!   (`conns::MIN_HEAD_RATE`), [`CONNECTION_DEADLINE`] for the whole
//!   connection, the response written included (the write timeout: a client
//!   that never reads holds its own connection only);
//! - connections: at most [`MAX_CONNECTIONS`] at once, [`PER_PEER`] from one
//!   address; a newcomer over either closes the oldest connection still
//!   sending its head (`conns.rs`: a slowloris once kept every scrape at
//!   `503`), and is answered `503` only when every one is being answered;
//! - one request per connection (`Connection: close`): a pipelining client
//!   gets one answer, not a queue of them to hold in buffers;
//! - accepting: out of file descriptors (EMFILE, ENFILE) the loop backs off
//!   and tries again, it never ends (tiny_http's accept thread ended, and the
//!   port refused for the daemon's life).
//!
//! Why hyper 1.x (`server::conn::http1`): it is the HTTP implementation the
//! Rust ecosystem's servers are built on, maintained, and it has these limits
//! built in (`max_header_size` answers 431 and closes, `header_read_timeout`,
//! `keep_alive(false)`), on the tokio the daemon already uses (features
//! `rt`, `net`, `time`: no new tokio feature). hyper-util supplies only its
//! tokio adapters (`TokioIo`, `TokioTimer`). A hand-written front would have
//! been as small, but an HTTP parser is where hostile input lands first.
use std::{
    convert::Infallible,
    io,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    thread,
    time::{Duration, Instant},
};

use http_body_util::Full;
use hyper::{
    body::{Bytes, Incoming},
    header::{HeaderValue, ALLOW, CONTENT_TYPE},
    server::conn::http1,
    service::service_fn,
    Method, Request, Response, StatusCode,
};
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::registry::Registry;
use tokio::net::{TcpListener, TcpStream};

pub use super::conns::{MAX_CONNECTIONS, PER_PEER};
use super::{
    conns::{head_too_slow, Metered, Slot, Table},
    Staged,
};
use crate::error::TracerError;

const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The largest request head (request line and headers) read: a scraper's is
/// ~200 bytes (Prometheus sends five short headers). 8 KiB is also the
/// smallest read buffer hyper allows, so the buffer never grows past it.
pub const MAX_HEAD: usize = 8 << 10;
/// Time a client has to send its whole request head (slowloris): a
/// scraper's fits in one segment.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// Time a connection may last, from accept to the last byte written:
/// Prometheus gives up on a scrape after its `scrape_timeout` (10 s by
/// default), so a slower one is already lost.
pub const CONNECTION_DEADLINE: Duration = Duration::from_secs(10);
/// How long the accept loop waits after a failed accept, doubling from the
/// first to the last: out of fds, the pending connection stays queued and
/// the listener stays readable, so retrying at once would spin.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));
/// How often a failing accept is said on stderr.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// What a connection finding every place taken by connections being
/// answered is told before it is closed.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 0\r\nretry-after: 1\r\n\r\n";

/// Listen on `addr` (ADDR:PORT) and serve `registry` until the process ends.
/// Returns the address actually bound (port 0 picks one).
pub fn serve(addr: &str, registry: Registry, staged: Arc<Staged>) -> Result<String, TracerError> {
    let listen_error = |source: io::Error| TracerError::MetricsListen {
        addr: addr.to_string(),
        source: Box::new(source),
    };
    let std_listener = std::net::TcpListener::bind(addr).map_err(listen_error)?;
    std_listener.set_nonblocking(true).map_err(listen_error)?;
    let bound = std_listener.local_addr().map_err(listen_error)?.to_string();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(TracerError::MetricsThread)?;
    let listener = {
        let _in_runtime = rt.enter();
        TcpListener::from_std(std_listener).map_err(listen_error)?
    };
    let scrape = Arc::new(Scrape { registry, staged });
    thread::Builder::new()
        .name("metrics".into())
        .spawn(move || rt.block_on(accept_loop(listener, scrape)))
        .map_err(TracerError::MetricsThread)?;
    Ok(bound)
}

struct Scrape {
    registry: Registry,
    staged: Arc<Staged>,
}

async fn accept_loop(listener: TcpListener, scrape: Arc<Scrape>) {
    let table = Arc::new(Mutex::new(Table::default()));
    let mut backoff = BACKOFF.0;
    let mut warned: Option<Instant> = None;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Once a minute at most: a flood must not flood stderr too.
                if warned.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    warned = Some(Instant::now());
                    log::warn!(
                        "metrics: cannot accept a connection ({e}); trying again, at most {:?} apart",
                        BACKOFF.1
                    );
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF.1);
                continue;
            }
        };
        backoff = BACKOFF.0;
        let Some(slot) = Table::admit(&table, peer.ip()) else {
            // Never blocks: a fresh socket's send buffer is empty.
            let _ = stream.try_write(BUSY);
            continue;
        };
        tokio::spawn(connection(stream, scrape.clone(), slot));
    }
}

async fn connection(stream: TcpStream, scrape: Arc<Scrape>, slot: Slot) {
    let read = Arc::new(AtomicUsize::new(0));
    let head_done = slot.head_done.clone();
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT)
        .max_header_size(MAX_HEAD)
        .max_buf_size(MAX_HEAD)
        .keep_alive(false)
        .serve_connection(
            TokioIo::new(Metered {
                inner: stream,
                read: read.clone(),
            }),
            service_fn(move |req| {
                head_done.store(true, Ordering::Release);
                let scrape = scrape.clone();
                async move { Ok::<_, Infallible>(respond(&scrape, &req)) }
            }),
        );
    tokio::select! {
        done = tokio::time::timeout(CONNECTION_DEADLINE, conn) => match done {
            Ok(Ok(())) => {}
            Ok(Err(e)) => log::debug!("metrics: connection ended: {e}"),
            Err(_) => log::debug!("metrics: connection closed after {CONNECTION_DEADLINE:?}"),
        },
        () = slot.close.notified() => log::debug!("metrics: a slow head closed for a newer connection"),
        () = head_too_slow(&read, &slot.head_done) => log::debug!("metrics: a head under the minimum rate closed"),
    }
}

/// GET /metrics; everything else is 404 (another path) or 405. Not HEAD:
/// every scrape lets the counters held at 0 count ([`Staged::encode`]), so
/// a HEAD, whose body nobody reads, would hide those zeros.
fn respond(scrape: &Scrape, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: &'static str| {
        let mut r = Response::new(Full::from(body));
        *r.status_mut() = status;
        r
    };
    if req.uri().path() != "/metrics" {
        return text(StatusCode::NOT_FOUND, "tracer: metrics are at /metrics\n");
    }
    if req.method() != Method::GET {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET"));
        return r;
    }
    let mut body = String::new();
    if scrape.staged.encode(&scrape.registry, &mut body).is_err() {
        return text(StatusCode::INTERNAL_SERVER_ERROR, "encoding failed\n");
    }
    let mut r = Response::new(Full::from(body));
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
    r
}
