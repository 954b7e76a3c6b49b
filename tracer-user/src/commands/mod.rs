//! The subcommands: each owns its arguments and its `run`.
pub mod daemon;
pub mod fail_on;
pub mod record;
