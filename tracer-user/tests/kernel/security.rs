//! Attacks a hostile wrapped command (or a hostile file handed to tracer)
//! can mount against root tracer, each performed for real against the real
//! tracer (root, real kernel) and asserted to fail safely. One module per
//! hole; the threat model is docs/security.md.
mod blinding;
mod bounds;
mod ci_output;
mod ci_tmp;
mod daemon_history;
mod env_residue;
mod metrics_endpoint;
mod orphans;
mod otlp_redirect;
mod output;
mod output_injection;
mod planted_log;
mod redact_cut;
mod setuid_snapshot;
mod test_report;
mod tiocsti;
