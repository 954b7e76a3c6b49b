use std::process::ExitCode;

use clap::Parser;
use tracer_user::{cli::Cli, error::report_error};

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().filter_or("TRACER_LOG", "warn"))
        .format_timestamp(None)
        .init();
    let cli = Cli::parse();
    match tracer_user::cli::run(cli) {
        Ok(code) => code,
        Err(err) => report_error(&err),
    }
}
