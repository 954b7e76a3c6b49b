//! tracer: why did the processes of a CI job die?
//!
//! Data flows one way: kernel (`capture`) -> event log (`eventlog`) ->
//! process model (`model`) -> cause-of-death analysis (`analysis`) ->
//! renderers (`report`).
pub mod analysis;
pub mod capture;
pub mod cli;
pub mod daemon;
pub mod error;
pub mod eventlog;
pub mod fail_on;
pub mod last_words;
pub mod leaks;
pub mod live;
pub mod metrics;
pub mod model;
pub mod otlp;
pub mod outdir;
pub mod record;
pub mod redact;
pub mod report;
pub mod run_as;
pub mod run_cgroup;
pub mod session;
pub mod snapshot;
pub mod summarize;
pub mod supervise;
pub mod terminal;
pub mod text;
pub mod watchdog;
