#![expect(
    unused_crate_dependencies,
    reason = "main.rs is a thin shell over the library: the package's dependencies are the library's"
)]
use std::process::ExitCode;

use clap::Parser;
use tracer_user::{
    cli::{self, Cli},
    error::report_error,
};

fn main() -> ExitCode {
    cli::init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli::usage_error(&e, std::env::args_os().skip(1)),
    };
    match cli::run(cli) {
        Ok(code) => code,
        Err(err) => report_error(&err),
    }
}
