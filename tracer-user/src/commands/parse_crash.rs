//! `tracer __parse-crash-stacks`: hidden, internal. The parse child tracer
//! re-executes itself as to unwind and name crashes (`symbolize::sandbox`):
//! confined first, then a request on stdin, answers on stdout. Never run
//! by hand.
use std::process::ExitCode;

use crate::{capture::decode, error::TracerError, symbolize::sandbox};

#[derive(clap::Args, Debug, Clone)]
pub struct ParseCrashArgs {
    /// The user to drop to before reading anything.
    #[arg(long)]
    pub uid: u32,
    #[arg(long)]
    pub gid: u32,
    /// The filesystem ids it keeps (the command's user).
    #[arg(long)]
    pub fs_uid: u32,
    #[arg(long)]
    pub fs_gid: u32,
    /// The module copies' memfds handed over (every other fd is closed).
    #[arg(long, value_delimiter = ',')]
    pub fds: Vec<i32>,
}

pub fn run(args: &ParseCrashArgs) -> Result<ExitCode, TracerError> {
    let who = crate::symbolize::Identity {
        uid: args.uid,
        gid: args.gid,
        fs_uid: args.fs_uid,
        fs_gid: args.fs_gid,
    };
    let code = sandbox::serve(who, &args.fds, |bytes| decode::decode_crash(bytes).ok());
    Ok(ExitCode::from(code))
}
