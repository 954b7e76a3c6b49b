//! Hung and cancelled runs: what every process is blocked on (`snapshots`),
//! and hangs that explain themselves (`explained`: a leaked pipe holder, a
//! socket read, a stopped process, a frozen cgroup).
mod explained;
mod snapshots;
