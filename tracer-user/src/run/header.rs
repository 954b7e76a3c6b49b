//! The log header of a capture, and the live log file it opens.
use crate::{
    capture::Capture,
    error::{TracerError, WriteContext},
    eventlog::{wall_time, Header, LogWriter, LIVE},
    outdir::OutDir,
    run::clock::{boot_ns, boot_to_wall_ns},
};

/// The log header for a capture started now; `record` and `daemon` differ
/// only in mode, command and scope.
pub fn header(
    mode: &str,
    command: Vec<String>,
    capture: &Capture,
    ring_buffer_bytes: u32,
) -> Header {
    Header {
        schema: crate::eventlog::SCHEMA_VERSION,
        tracer_version: env!("CARGO_PKG_VERSION").into(),
        kernel: nix::sys::utsname::uname()
            .map(|u| u.release().to_string_lossy().into_owned())
            .unwrap_or_default(),
        // The tracer's own: its syscall tables (tracer_common's, the
        // snapshot's) are this architecture's.
        arch: Some(std::env::consts::ARCH.into()),
        hostname: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default(),
        mode: mode.into(),
        command,
        tracer_pid: std::process::id(),
        started_at: wall_time(boot_ns(), boot_to_wall_ns()),
        boot_to_wall_ns: boot_to_wall_ns(),
        hooks: capture.hooks.clone(),
        ring_buffer_bytes: ring_buffer_bytes as u64,
        argv_capture_bytes: tracer_common::ARGV_LEN as u64,
        scope: None,
        segment: 0,
        pid_namespace: (capture.view.level > 0).then_some(capture.view),
        command_user: None,
        redactions: 0,
        ci: crate::eventlog::CiContext::from_env(),
        env_changes: Vec::new(),
    }
}

/// Start the live log (`events.ndjson`) in the held directory, replacing
/// whatever file had its name.
pub fn create_log(out: &OutDir, header: &Header) -> Result<LogWriter, TracerError> {
    let file = out.create_replacing(LIVE).writing(out.display(LIVE))?;
    Ok(LogWriter::new(file, header))
}
