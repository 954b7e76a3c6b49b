//! The export thread: requests wait in a bounded queue, each is POSTed with
//! retries and exponential backoff; the run never waits on the network
//! except for a bounded grace at its very end.
use std::{
    sync::{
        mpsc::{sync_channel, Receiver, SyncSender, TrySendError},
        Arc, Mutex,
    },
    thread::JoinHandle,
    time::{Duration, Instant},
};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use prost::Message;

use super::{Context, Endpoint, ExportFacts};
use crate::live::Findings;

/// Requests (one per look, or one per run) waiting to be sent.
const QUEUE: usize = 64;
/// Attempts per request, and the first pause between them (doubled each time).
const ATTEMPTS: u32 = 5;
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// One request's whole exchange, connect to last byte.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

pub struct Exporter {
    queue: Option<SyncSender<(u64, Vec<u8>)>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Mutex<Shared>>,
    ctx: Context,
}

#[derive(Default)]
struct Shared {
    facts: ExportFacts,
    /// Set by `finish`: no retry or new attempt starts after it.
    deadline: Option<Instant>,
}

impl Exporter {
    pub fn start(endpoint: Endpoint, ctx: Context) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            facts: ExportFacts {
                endpoint: endpoint.url.clone(),
                ..Default::default()
            },
            deadline: None,
        }));
        let (tx, rx) = sync_channel(QUEUE);
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("otlp".into())
                .spawn(move || run(endpoint, rx, shared))
                .ok()
        };
        Self {
            queue: Some(tx),
            thread,
            shared,
            ctx,
        }
    }

    /// Queue the findings as one request; never blocks (a full queue drops
    /// them, counted).
    pub fn send(&mut self, found: &Findings, boot_to_wall_ns: i64) {
        let Some(req) = self.ctx.request(found, boot_to_wall_ns) else {
            return;
        };
        let n = count(&req);
        let body = req.encode_to_vec();
        let mut sh = lock(&self.shared);
        sh.facts.records += n;
        let refused = match &self.queue {
            Some(q) if self.thread.is_some() => match q.try_send((n, body)) {
                Ok(()) => None,
                Err(TrySendError::Full(_)) => Some("the export queue was full"),
                Err(TrySendError::Disconnected(_)) => Some("the export thread ended"),
            },
            _ => Some("the export thread could not start"),
        };
        if let Some(why) = refused {
            sh.facts.undelivered += n;
            sh.facts.error = Some(why.into());
        }
    }

    /// Stop taking requests, give the queue until `grace` to drain, and say
    /// what became of the export.
    pub fn finish(mut self, grace: Duration) -> ExportFacts {
        lock(&self.shared).deadline = Some(Instant::now() + grace);
        self.queue = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let facts = lock(&self.shared).facts.clone();
        if facts.undelivered > 0 {
            // The summary and the reports say it; this is for -v logs.
            log::info!(
                "OTLP export to {}: {} of {} records not delivered ({})",
                facts.endpoint,
                facts.undelivered,
                facts.records,
                facts.error.as_deref().unwrap_or("unknown error")
            );
        }
        facts
    }
}

fn lock(m: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn count(req: &ExportLogsServiceRequest) -> u64 {
    req.resource_logs
        .iter()
        .flat_map(|r| &r.scope_logs)
        .map(|s| s.log_records.len() as u64)
        .sum()
}

fn run(endpoint: Endpoint, rx: Receiver<(u64, Vec<u8>)>, shared: Arc<Mutex<Shared>>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(REQUEST_TIMEOUT))
        // A redirect is answered, never followed: following it sent the
        // OTEL_EXPORTER_OTLP_HEADERS (API keys) wherever the answer pointed
        // and counted records another host took as delivered.
        .max_redirects(0)
        .http_status_as_error(false)
        .user_agent(concat!("tracer/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let past_deadline = || lock(&shared).deadline.is_some_and(|d| Instant::now() >= d);
    for (n, body) in rx {
        let result = if past_deadline() {
            Err("the run ended before it could be sent".to_string())
        } else {
            deliver(&agent, &endpoint, &body, past_deadline)
        };
        let mut sh = lock(&shared);
        match result {
            Ok(()) => sh.facts.delivered += n,
            Err(e) => {
                sh.facts.undelivered += n;
                sh.facts.error = Some(e);
            }
        }
    }
}

/// POST one request; retry what may succeed later (no answer, 429, 502,
/// 503, 504) with exponential backoff, until the attempts or the deadline
/// run out. A redirect (3xx) is a final failure, said as such.
fn deliver(
    agent: &ureq::Agent,
    endpoint: &Endpoint,
    body: &[u8],
    past_deadline: impl Fn() -> bool,
) -> Result<(), String> {
    if !endpoint.url.starts_with("http://") {
        return Err(format!(
            "{}: only http:// endpoints are supported (send to a collector beside the job)",
            endpoint.url
        ));
    }
    let mut pause = FIRST_BACKOFF;
    let mut last = String::new();
    for attempt in 1..=ATTEMPTS {
        let mut req = agent
            .post(&endpoint.url)
            .header("Content-Type", "application/x-protobuf");
        for (k, v) in &endpoint.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        match req.send(body) {
            Ok(resp) => {
                let code = resp.status().as_u16();
                if (200..300).contains(&code) {
                    return Ok(());
                }
                last = format!("{} answered HTTP {code}", endpoint.url);
                if (300..400).contains(&code) {
                    return Err(format!(
                        "{last}, a redirect: not followed (the export headers would go \
                         wherever it points); set the collector's own URL"
                    ));
                }
                if !matches!(code, 429 | 502 | 503 | 504) {
                    return Err(last);
                }
            }
            Err(e) => last = format!("{}: {e}", endpoint.url),
        }
        if attempt == ATTEMPTS || past_deadline() {
            break;
        }
        std::thread::sleep(pause);
        pause *= 2;
    }
    Err(last)
}
