//! `--program-stats`: the kernel's own count of each of tracer's eBPF
//! programs' runs and run time. The kernel keeps them only while someone
//! holds a BPF_ENABLE_STATS fd (two clock reads per program run: a few ns,
//! so never on by default); read once at the end of a run into the log's
//! trailer, where `cargo xtask bench` reads ns per run per program.
use std::os::fd::OwnedFd;

use aya::Ebpf;

use crate::{error::TracerError, eventlog::ProgramStat};

/// Turns the kernel's run-time statistics on until the fd is closed.
pub fn enable() -> Result<OwnedFd, TracerError> {
    aya::sys::enable_stats(aya::sys::Stats::RunTime)
        .map_err(|e| TracerError::ProgramStats(e.io_error))
}

/// Every loaded program that ran, by name, with its runs, their time and
/// the instructions its verification took; in name order.
pub fn read(ebpf: &Ebpf) -> Vec<ProgramStat> {
    let mut out: Vec<ProgramStat> = ebpf
        .programs()
        .filter_map(|(name, p)| {
            let info = p.info().ok()?;
            (info.run_count() > 0).then(|| ProgramStat {
                program: name.to_string(),
                runs: info.run_count(),
                run_ns: info.run_time().as_nanos() as u64,
                verified_insns: info.verified_instruction_count(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.program.cmp(&b.program));
    out
}
