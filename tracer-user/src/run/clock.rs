//! The kernel's clock and the wall clock.
use nix::time::{clock_gettime, ClockId};

/// CLOCK_BOOTTIME now, in ns: the clock of every kernel timestamp.
pub fn boot_ns() -> u64 {
    clock_gettime(ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// wall-clock ns = boot ns + this offset.
pub fn boot_to_wall_ns() -> i64 {
    let real = clock_gettime(ClockId::CLOCK_REALTIME)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(0);
    real - boot_ns() as i64
}
