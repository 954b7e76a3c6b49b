//! tracer: why did the processes of a CI job die?
//!
//! Data flows one way: kernel (`capture`) -> event log (`eventlog`) ->
//! process model (`model`) -> cause-of-death analysis (`analysis`) ->
//! renderers (`report`).
//!
//! Nothing here prints with `println!`/`eprintln!`: they panic when the
//! stream is a pipe whose reader has gone (EPIPE), and a wrapper must pass
//! its command's status through whatever became of its own output. Lines go
//! through [`say!`] (stderr) instead, which drops what cannot be written.
#![deny(clippy::print_stderr, clippy::print_stdout)]

/// `eprintln!` that never panics: a line for stderr, dropped if stderr is a
/// closed pipe (EPIPE) or otherwise unwritable. tracer's status must not
/// depend on whether anyone still reads its messages.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{
        use ::std::io::Write as _;
        let _ = ::std::writeln!(::std::io::stderr(), $($arg)*);
    }};
}

pub mod analysis;
pub mod capture;
pub mod cli;
pub mod commands;
pub mod error;
pub mod eventlog;
pub mod labels;
pub mod live;
pub mod metrics;
pub mod model;
pub mod otlp;
pub mod outdir;
pub mod redact;
pub mod report;
pub mod resources;
pub mod run;
pub mod snapshot;
pub mod summarize;
pub mod symbolize;
pub mod text;

// A dev-dependency only the offline tests use (the renderers' property
// tests); the library's own unit tests do not.
#[cfg(test)]
use fastrand as _;
