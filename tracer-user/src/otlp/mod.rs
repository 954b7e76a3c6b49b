//! `--otlp-endpoint`: every certificate, near miss, foreign signal and leak
//! as an OpenTelemetry log record, over OTLP/HTTP with protobuf bodies (the
//! OpenTelemetry project's own wire types). Export is best effort: a
//! bounded queue, retries with backoff, a deadline at the end; a failing
//! collector never fails or holds up the run, it is reported in the loss
//! section (docs/metrics.md).
mod records;
mod sender;

use std::time::Duration;

use serde::Serialize;

pub use records::Context;
pub use sender::Exporter;

use crate::{analysis::Analysis, eventlog::Header, live::Seen};

/// The variables that carry the exporter's header secrets (API keys). When
/// tracer exports, `record` removes them from the wrapped command's
/// environment: they are tracer's to send, not the job's to read.
pub const HEADER_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
];

/// How long the end of a run waits for the queue to drain (a dead
/// collector costs at most this, plus one request's timeout).
pub const FINISH_GRACE: Duration = Duration::from_secs(5);

/// Where to send, resolved from the flag and the standard variables.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The full URL of the logs endpoint (`…/v1/logs`).
    pub url: String,
    pub headers: Vec<(String, String)>,
}

impl Endpoint {
    /// `--otlp-endpoint`, else `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` (used as
    /// is, as the specification says), else `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// (a base URL: `/v1/logs` is appended). Headers from
    /// `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_LOGS_HEADERS`.
    pub fn resolve(flag: Option<&str>) -> Option<Self> {
        Self::resolve_with(flag, |k| std::env::var(k).ok())
    }

    fn resolve_with(flag: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let set = |k: &str| env(k).filter(|v| !v.trim().is_empty());
        let url = match (flag, set("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")) {
            (Some(f), _) => logs_url(f),
            (None, Some(signal)) => signal.trim().to_string(),
            (None, None) => logs_url(&set("OTEL_EXPORTER_OTLP_ENDPOINT")?),
        };
        let [all, logs] = HEADER_VARS;
        let mut headers = parse_headers(&set(all).unwrap_or_default());
        for (k, v) in parse_headers(&set(logs).unwrap_or_default()) {
            headers.retain(|(h, _)| !h.eq_ignore_ascii_case(&k));
            headers.push((k, v));
        }
        Some(Self { url, headers })
    }
}

/// A base URL gets the logs path; one that names a path already is kept.
fn logs_url(base: &str) -> String {
    let base = base.trim();
    let after_scheme = base.split_once("://").map_or(base, |(_, rest)| rest);
    match after_scheme.find('/') {
        Some(i) if !after_scheme[i..].trim_end_matches('/').is_empty() => base.to_string(),
        _ => format!("{}/v1/logs", base.trim_end_matches('/')),
    }
}

/// `k1=v1,k2=v2`, values percent-decoded (the W3C baggage form the
/// specification uses); malformed entries are skipped.
fn parse_headers(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            let k = k.trim();
            (!k.is_empty()).then(|| (k.to_string(), percent_decode(v.trim())))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What became of the export, for the report's loss section.
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ExportFacts {
    /// The logs endpoint (credentials in headers are never shown).
    pub endpoint: String,
    /// Log records handed to the exporter.
    pub records: u64,
    /// Records the collector accepted.
    pub delivered: u64,
    /// Not delivered: the collector refused or was unreachable after the
    /// retries, the queue was full, or the run ended first.
    pub undelivered: u64,
    /// The last failure, one line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `record` and `report`: export the findings of a whole log's analysis
/// (the one its reports are written from), wait (bounded) for delivery.
pub fn export_analysis(endpoint: Endpoint, header: &Header, analysis: &Analysis) -> ExportFacts {
    let mut exporter = Exporter::start(endpoint, Context::from_env(header));
    let found = Seen::default().fresh(analysis.clone());
    exporter.send(&found, header.boot_to_wall_ns);
    exporter.finish(FINISH_GRACE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn endpoint_from_flag_and_standard_variables() {
        let e = Endpoint::resolve_with(Some("http://c:4318"), env(&[])).unwrap();
        assert_eq!(e.url, "http://c:4318/v1/logs");
        let e = Endpoint::resolve_with(Some("http://c:4318/custom/logs"), env(&[])).unwrap();
        assert_eq!(e.url, "http://c:4318/custom/logs");
        assert!(Endpoint::resolve_with(None, env(&[])).is_none());
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "api-key=a%20b,x-tenant=ci, bad",
            ),
            ("OTEL_EXPORTER_OTLP_LOGS_HEADERS", "X-Tenant=logs"),
        ];
        let e = Endpoint::resolve_with(None, env(&vars)).unwrap();
        assert_eq!(e.url, "http://base:4318/v1/logs");
        assert_eq!(
            e.headers,
            vec![
                ("api-key".to_string(), "a b".to_string()),
                ("X-Tenant".to_string(), "logs".to_string())
            ]
        );
        let vars = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318"),
            (
                "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT",
                "http://logs:4318/v1/logs",
            ),
        ];
        let e = Endpoint::resolve_with(None, env(&vars)).unwrap();
        assert_eq!(e.url, "http://logs:4318/v1/logs");
        // The flag wins over the variables.
        let e = Endpoint::resolve_with(Some("http://flag:1"), env(&vars)).unwrap();
        assert_eq!(e.url, "http://flag:1/v1/logs");
    }

    #[test]
    fn percent_decoding_leaves_malformed_escapes() {
        assert_eq!(percent_decode("a%3Db%zz%4"), "a=b%zz%4");
    }
}
