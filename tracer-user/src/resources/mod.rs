//! The run's resources over time: memory, CPU and pressure of its cgroup,
//! and its largest processes' RSS (docs/report.md, "Resources").
//!
//! - `cgroup.rs`: the text of cgroup v1/v2 and pressure files, parsed;
//! - `sampler.rs`: one sample, read from the kernel's counters (the
//!   runtime's event loop calls it: `run/supervise.rs`, the daemon's loop);
//! - `curve.rs`: the samples of a log kept bounded (recent ones whole, the
//!   run downsampled, the largest processes' RSS);
//! - `story.rs`: what the curve says at a moment: how memory reached an OOM
//!   kill, whether a run was starved in its last minute, each test's growth.
pub mod cgroup;
pub mod curve;
pub mod sampler;
pub mod story;

pub use curve::{Curve, Point};
pub use sampler::{Follow, Sampler};

/// /proc's start time is in clock ticks since boot; the log's in ns.
pub fn same_start(ticks: u64, start_ns: u64) -> bool {
    let tps = procfs::ticks_per_second();
    let ns_per_tick = 1_000_000_000 / tps;
    (start_ns / ns_per_tick).abs_diff(ticks) <= 1
}
