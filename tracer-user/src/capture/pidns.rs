//! The tracer's own pid namespace: every pid in the log is as seen from it,
//! so pids match the tracer's /proc, its kill(2) and what a job in the same
//! container prints (e.g. a sidecar in a pod's shared pid namespace).
use std::os::unix::fs::MetadataExt;

use crate::error::{LoadError, TracerError};

/// `PROC_PID_INIT_INO`: the inode number of the host's pid namespace.
pub const HOST_PID_NS_INUM: u32 = 0xEFFF_FFFC;
/// The inode number of the tracer's own pid namespace, after checking that
/// /proc shows that namespace. Its depth is found by the loader (the kernel
/// will not tell a process how deep its namespace is).
pub fn own_ns_inum() -> Result<u32, TracerError> {
    let meta = std::fs::metadata("/proc/self/ns/pid").map_err(LoadError::OwnPidNs)?;
    check_proc_mount()?;
    Ok(meta.ino() as u32)
}

/// Pids the kernel reports are the tracer's own namespace's: /proc must show
/// that namespace too, or every /proc read would name another process.
fn check_proc_mount() -> Result<(), TracerError> {
    let me = std::process::id();
    let seen = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|p| p.to_str().and_then(|s| s.parse::<u32>().ok()));
    match seen {
        Some(p) if p == me => Ok(()),
        _ => Err(LoadError::ForeignProc {
            seen: seen.map_or("nothing".into(), |p| p.to_string()),
            me,
        }
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_runner_names_its_own_namespace() {
        let inum = own_ns_inum().expect("own pid namespace");
        let link = std::fs::read_link("/proc/self/ns/pid").unwrap();
        assert_eq!(link.to_string_lossy(), format!("pid:[{inum}]"));
    }
}
