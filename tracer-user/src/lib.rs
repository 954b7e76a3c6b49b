//! tracer: why did the processes of a CI job die?
//!
//! Data flows one way: kernel (`capture`) -> event log (`eventlog`) ->
//! process model (`model`) -> cause-of-death analysis (`analysis`) ->
//! renderers (`report`).
pub mod analysis;
pub mod capture;
pub mod cli;
pub mod commands;
pub mod error;
pub mod eventlog;
pub mod live;
pub mod metrics;
pub mod model;
pub mod otlp;
pub mod outdir;
pub mod redact;
pub mod report;
pub mod run;
pub mod snapshot;
pub mod summarize;
pub mod text;

// A dev-dependency only the offline tests use (the renderers' property
// tests); the library's own unit tests do not.
#[cfg(test)]
use fastrand as _;
