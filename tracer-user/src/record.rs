//! `tracer record` and `tracer report`.
use std::process::ExitCode;

use crate::{
    cli::{RecordArgs, ReportArgs},
    error::TracerError,
};

pub fn run(_args: &RecordArgs) -> Result<ExitCode, TracerError> {
    Err(TracerError::Other("record: not wired yet".into()))
}

pub fn report_only(_args: &ReportArgs) -> Result<ExitCode, TracerError> {
    Err(TracerError::Other("report: not wired yet".into()))
}
