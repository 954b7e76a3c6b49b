#![expect(
    unused_crate_dependencies,
    reason = "main.rs is a thin shell over the library: the package's dependencies are the library's"
)]
use std::process::ExitCode;

use clap::Parser;
use tracer_user::{cli::Cli, error::report_error};

fn main() -> ExitCode {
    tracer_user::cli::init_logging();
    let cli = Cli::parse();
    match tracer_user::cli::run(cli) {
        Ok(code) => code,
        Err(err) => report_error(&err),
    }
}
