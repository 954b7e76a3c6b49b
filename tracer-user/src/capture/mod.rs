//! The kernel half's user-space side: resolve offsets, load, attach, decode.
pub mod cgroups;
pub mod decode;
pub mod ebpf_log;
pub mod loader;
pub mod offsets;
pub mod pidns;
pub mod tracefs;

pub use loader::{load, Capture, LoadOptions};
