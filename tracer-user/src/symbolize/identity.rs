//! Who the parse child is: `PARSE_UID`:`PARSE_GID` for every id the kernel
//! checks a signal or a ptrace against (real, effective, saved), so no job
//! may stop, kill or trace it; the command's user for its filesystem ids
//! only, so what it opens by path (a debug file) is opened as the command
//! would. The kernel sets the filesystem ids with the effective ones, so
//! the child keeps CAP_SETUID/CAP_SETGID across its change of user
//! (`PR_SET_KEEPCAPS`) just long enough to set them, then drops every
//! capability.

/// The ids the child takes.
#[derive(Clone, Copy, Debug)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub fs_uid: u32,
    pub fs_gid: u32,
}

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAP_V3: u32 = 0x2008_0522;
/// linux/capability.h.
const CAP_SETGID: u32 = 6;
const CAP_SETUID: u32 = 7;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// capset(2) on this process: `bits` effective and permitted, nothing
/// inheritable.
fn capset(bits: u32) -> Result<(), String> {
    let mut header = CapHeader {
        version: CAP_V3,
        pid: 0,
    };
    let one = CapData {
        effective: bits,
        permitted: bits,
        inheritable: 0,
    };
    let data = [one, CapData::default()];
    // SAFETY: capset with a valid v3 header and the two data words it reads.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    if r < 0 {
        return Err(format!("capset: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Become `who` (from root), without supplementary groups or capabilities.
pub(super) fn become_(who: Identity) -> Result<(), String> {
    use nix::unistd::{setgroups, setresgid, setresuid, Gid, Uid};
    let keep = |on: libc::c_ulong| {
        // SAFETY: a plain prctl with integer arguments.
        match unsafe { libc::prctl(libc::PR_SET_KEEPCAPS, on, 0, 0, 0) } {
            0 => Ok(()),
            _ => Err(format!(
                "PR_SET_KEEPCAPS: {}",
                std::io::Error::last_os_error()
            )),
        }
    };
    setgroups(&[]).map_err(|e| format!("setgroups: {e}"))?;
    keep(1)?;
    let (g, u) = (Gid::from_raw(who.gid), Uid::from_raw(who.uid));
    setresgid(g, g, g).map_err(|e| format!("setresgid {}: {e}", who.gid))?;
    setresuid(u, u, u).map_err(|e| format!("setresuid {}: {e}", who.uid))?;
    let setid = (1 << CAP_SETUID) | (1 << CAP_SETGID);
    capset(setid)?;
    // setfs*id return the previous id whatever happens: check by reading
    // it back (a second call with an invalid id changes nothing).
    // SAFETY: plain syscalls with integer arguments.
    unsafe {
        libc::setfsgid(who.fs_gid);
        libc::setfsuid(who.fs_uid);
    }
    // SAFETY: as above; u32::MAX is never a valid id, so nothing changes.
    let (fsgid, fsuid) = unsafe { (libc::setfsgid(u32::MAX), libc::setfsuid(u32::MAX)) };
    if (fsuid as u32, fsgid as u32) != (who.fs_uid, who.fs_gid) {
        return Err(format!("setfsuid/setfsgid: {fsuid}:{fsgid}"));
    }
    capset(0)?;
    keep(0)
}
