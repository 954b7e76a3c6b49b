//! Attacks a hostile wrapped command (or a hostile file handed to tracer)
//! can mount against root tracer, each performed for real against the real
//! tracer (root, real kernel) and asserted to fail safely. One module per
//! hole; the threat model is docs/security.md.
mod common;

#[path = "security/bounds.rs"]
mod bounds;
#[path = "security/ci_output.rs"]
mod ci_output;
#[path = "security/ci_tmp.rs"]
mod ci_tmp;
#[path = "security/metrics_endpoint.rs"]
mod metrics_endpoint;
#[path = "security/orphans.rs"]
mod orphans;
#[path = "security/otlp_redirect.rs"]
mod otlp_redirect;
#[path = "security/output.rs"]
mod output;
#[path = "security/output_injection.rs"]
mod output_injection;
#[path = "security/planted_log.rs"]
mod planted_log;
#[path = "security/redact_cut.rs"]
mod redact_cut;
#[path = "security/setuid_snapshot.rs"]
mod setuid_snapshot;
#[path = "security/tiocsti.rs"]
mod tiocsti;
