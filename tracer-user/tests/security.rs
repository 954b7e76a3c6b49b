//! Attacks a hostile wrapped command (or a hostile file handed to tracer)
//! can mount against root tracer, each performed for real and each asserted
//! to fail safely. The threat model is docs/security.md.
mod common;

#[path = "security/output.rs"]
mod output;

#[path = "security/redact_cut.rs"]
mod redact_cut;

#[path = "security/orphans.rs"]
mod orphans;

#[path = "security/setuid_snapshot.rs"]
mod setuid_snapshot;

#[path = "security/tiocsti.rs"]
mod tiocsti;
