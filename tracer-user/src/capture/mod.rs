//! The kernel half's user-space side: resolve offsets, load, attach, decode.
pub mod cgroups;
pub mod decode;
pub mod ebpf_log;
pub mod hooks;
pub mod loader;
pub mod offset_cache;
pub mod offsets;
pub mod pidns;
pub mod program_stats;
pub mod readable;
pub mod teardown;
pub mod tracefs;

pub use loader::{load, Capture, LiveTail, LoadOptions, DEFAULT_RING_BYTES};
