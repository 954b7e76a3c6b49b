//! The exec program copies a new image's environment strings (up to 16
//! KiB: a job's secrets with them) into its per-CPU scratch map to find the
//! runners' variables. The attack: a root process finds the map by id
//! while tracer runs and reads it (`BPF_F_WRONLY` would bind only the fd
//! that created the map: the kernel drops it from the map itself). The
//! program wipes the copy before it returns: no secret is found
//! (docs/security.md, "Environment at exec").
use std::os::fd::{AsFd, AsRawFd};

use crate::common::*;

/// The scratch map's name as the kernel keeps it (15 bytes and a NUL).
const NAME: &str = "EXEC_ENV_SCRATC";
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;

/// `union bpf_attr` as BPF_MAP_LOOKUP_ELEM reads it.
#[repr(C)]
struct LookupAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[test]
fn the_environment_copied_at_exec_is_wiped_before_root_can_read_it() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = record_command(dir.path(), &[], &["sh", "-c", "echo ready; exec sleep 30"]);
    cmd.env("TRACER_TEST_SECRET", "hunter2-residue");
    let (tracer, _) = spawn_ready(cmd);
    // Ended however the test ends: SIGTERM ends the run (the child is this
    // test's own).
    struct Run(std::process::Child);
    impl Drop for Run {
        fn drop(&mut self) {
            // SAFETY: kill(2) on this test's own child.
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let _ = self.0.wait();
        }
    }
    let _run = Run(tracer);

    let cpus = aya::util::nr_cpus().expect("possible CPUs");
    let mut seen = Vec::new();
    for info in aya::maps::loaded_maps() {
        let Ok(info) = info else { continue };
        if info.name_as_str() != Some(NAME) {
            continue;
        }
        let Ok(fd) = info.fd() else { continue };
        // Room for every CPU's value, so a read that succeeded could not
        // write past it.
        let stride = (info.value_size() as usize).div_ceil(8) * 8;
        let mut value = vec![0u8; stride * cpus];
        let key = 0u32;
        let attr = LookupAttr {
            map_fd: fd.as_fd().as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: value.as_mut_ptr() as u64,
            flags: 0,
        };
        // SAFETY: BPF_MAP_LOOKUP_ELEM with a live fd, a 4-byte key and a
        // buffer of value_size (rounded to 8) for each possible CPU.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_ELEM,
                &attr as *const LookupAttr,
                std::mem::size_of::<LookupAttr>(),
            )
        };
        let errno = std::io::Error::last_os_error().raw_os_error();
        let leaked = value.windows(15).any(|w| w == b"hunter2-residue");
        seen.push((info.id(), rc, errno, leaked));
    }
    assert!(!seen.is_empty(), "no {NAME} map while tracer ran");
    for (id, rc, errno, leaked) in seen {
        // The read itself works (root), or the map went with its run.
        assert!(
            rc == 0 || errno == Some(libc::ENOENT),
            "map {id}: {errno:?}"
        );
        assert!(!leaked, "map {id}: the secret came back");
    }
}
