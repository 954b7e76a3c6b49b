//! The `/metrics` endpoint: a small sync HTTP server in its own thread, so a
//! slow scraper never holds up the capture loop.
use std::{sync::Arc, thread};

use prometheus_client::registry::Registry;
use tiny_http::{Header, Method, Response, Server};

use super::Staged;
use crate::error::TracerError;

const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Listen on `addr` (ADDR:PORT) and serve `registry` until the process ends.
/// Returns the address actually bound (port 0 picks one).
pub fn serve(addr: &str, registry: Registry, staged: Arc<Staged>) -> Result<String, TracerError> {
    let server = Server::http(addr).map_err(|source| TracerError::MetricsListen {
        addr: addr.to_string(),
        source,
    })?;
    let bound = server
        .server_addr()
        .to_ip()
        .map_or_else(|| addr.to_string(), |a| a.to_string());
    let registry = Arc::new(registry);
    thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for req in server.incoming_requests() {
                let path = req.url().split('?').next().unwrap_or("");
                let resp = if *req.method() != Method::Get {
                    Response::from_string("only GET\n").with_status_code(405)
                } else if path == "/metrics" {
                    let mut body = String::new();
                    match staged.encode(&registry, &mut body) {
                        Ok(()) => Response::from_string(body).with_header(
                            Header::from_bytes("Content-Type", CONTENT_TYPE)
                                .expect("static header"),
                        ),
                        Err(_) => Response::from_string("encoding failed\n").with_status_code(500),
                    }
                } else {
                    Response::from_string("tracer: metrics are at /metrics\n").with_status_code(404)
                };
                if let Err(e) = req.respond(resp) {
                    log::debug!("metrics client went away: {e}");
                }
            }
        })
        .map_err(TracerError::MetricsThread)?;
    Ok(bound)
}
