//! The subcommands: each owns its arguments and its `run`. They sit on top:
//! they import the runtime (`run`) and the pipeline, nothing imports them
//! but `cli`.
pub mod daemon;
pub mod fail_on;
pub mod integrations;
pub mod output;
pub mod parse_crash;
pub mod record;
pub mod report;
pub mod summarize;
