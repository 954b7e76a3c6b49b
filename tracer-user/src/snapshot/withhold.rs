//! Snapshots end up with the run's user (the files tracer writes are handed
//! to them). A process of the run that runs as someone else (`sudo`, a
//! setuid helper) must not give that user what /proc would refuse them:
//! its kernel stacks, wait channels, syscall registers, executable path and
//! open files are withheld, and the snapshot says so. Its pid, parents,
//! state, names and argv stay: any user can read those.
use super::{ProcSnapshot, SyscallState};

/// Who will read the snapshot: the run's user and group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Viewer {
    pub uid: u32,
    pub gid: u32,
}

/// What decides whether a user may read a process's /proc details (the
/// kernel's ptrace read check), from /proc/PID/status and /proc/PID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Creds {
    /// Real, effective, saved, filesystem.
    pub uids: [u32; 4],
    pub gids: [u32; 4],
    /// Permitted capabilities (a file-capability helper has some).
    pub cap_prm: u64,
    /// Who owns its user namespace: capabilities held in a namespace the
    /// viewer owns (`unshare -r`, a rootless container) are the viewer's.
    pub userns_owner: Option<u32>,
    /// Owner of /proc/PID/fd: root when the process is not dumpable (a
    /// setuid program after dropping privileges, an agent protecting its
    /// memory). Not /proc/PID itself: that one keeps the effective uid.
    pub dump_owner: u32,
}

/// Why `creds` (None: unreadable) are not the viewer's own, or None when
/// they are: every uid and gid must be the viewer's, it must hold no
/// capability and be dumpable, as the kernel's ptrace read check asks of an
/// unprivileged user. Unreadable credentials count as foreign.
pub fn foreign(creds: Option<&Creds>, v: &Viewer) -> Option<String> {
    let Some(c) = creds else {
        return Some("its credentials could not be read".into());
    };
    // The effective id says who it acts as; any other one that differs
    // (a setuid program keeps root as its saved uid) is enough.
    let odd = |ids: &[u32; 4], mine: u32| {
        (ids[1] != mine)
            .then_some(ids[1])
            .or_else(|| ids.iter().copied().find(|&i| i != mine))
    };
    if let Some(uid) = odd(&c.uids, v.uid) {
        return Some(format!(
            "runs as uid {uid}, not as the run's user (uid {})",
            v.uid
        ));
    }
    if let Some(gid) = odd(&c.gids, v.gid) {
        return Some(format!(
            "runs with gid {gid}, not the run's group (gid {})",
            v.gid
        ));
    }
    if c.cap_prm != 0 && c.userns_owner != Some(v.uid) {
        return Some(format!(
            "holds capabilities (CapPrm {:#x}) the run's user (uid {}) does not",
            c.cap_prm, v.uid
        ));
    }
    (c.dump_owner != v.uid).then(|| {
        format!(
            "is not dumpable (its /proc details belong to uid {}, not the run's user, uid {})",
            c.dump_owner, v.uid
        )
    })
}

/// Why a process that ran the program file of owner `uid`, group `gid`
/// and `mode` was not the viewer's own: a setuid program of another user
/// (or setgid of another group) ran with that user's rights, so the kernel
/// made it non-dumpable and /proc refuses the viewer its details. Used for
/// a crash read once its process is gone (its credentials with it).
pub fn foreign_program(uid: u32, gid: u32, mode: u32, v: &Viewer) -> Option<String> {
    if mode & 0o4000 != 0 && uid != v.uid {
        return Some(format!(
            "ran a setuid program of uid {uid}, not the run's user (uid {})",
            v.uid
        ));
    }
    (mode & 0o2000 != 0 && gid != v.gid).then(|| {
        format!(
            "ran a setgid program of gid {gid}, not the run's group (gid {})",
            v.gid
        )
    })
}

/// The credentials of `pid` now, from /proc/PID/status.
pub fn creds_of(pid: u32) -> Option<Creds> {
    use std::os::unix::fs::MetadataExt;
    let s = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.status())
        .ok()?;
    let dump_owner = std::fs::metadata(format!("/proc/{pid}/fd")).ok()?.uid();
    Some(Creds {
        uids: [s.ruid, s.euid, s.suid, s.fuid],
        gids: [s.rgid, s.egid, s.sgid, s.fgid],
        cap_prm: s.capprm,
        userns_owner: userns_owner(pid),
        dump_owner,
    })
}

/// The owner of `pid`'s user namespace (NS_GET_OWNER_UID, Linux 4.11).
fn userns_owner(pid: u32) -> Option<u32> {
    use std::os::fd::AsRawFd;
    // _IO(0xb7, 0x4); the request type differs between glibc and musl.
    const NS_GET_OWNER_UID: libc::Ioctl = 0xb704;
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/user")).ok()?;
    let mut uid: libc::uid_t = 0;
    // SAFETY: the ioctl writes one uid_t into `uid`.
    let r = unsafe { libc::ioctl(ns.as_raw_fd(), NS_GET_OWNER_UID, &mut uid) };
    (r == 0).then_some(uid)
}

/// Empty what the viewer may not see of `p`, and say why.
pub(super) fn withhold(p: &mut ProcSnapshot, why: String) {
    p.exe = None;
    p.fds.clear();
    p.fds_left_out = 0;
    for t in &mut p.threads {
        t.wchan = None;
        t.stack.clear();
        t.syscall = SyscallState::Unknown;
    }
    p.withheld = Some(format!(
        "{why}: its kernel stacks, wait channels, syscall registers, executable and open files are withheld"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: Viewer = Viewer {
        uid: 1000,
        gid: 1000,
    };

    fn creds(uids: [u32; 4], gids: [u32; 4]) -> Creds {
        Creds {
            uids,
            gids,
            cap_prm: 0,
            userns_owner: Some(0),
            dump_owner: uids[1],
        }
    }

    #[test]
    fn only_all_ids_of_the_viewer_are_its_own() {
        let own = creds([1000; 4], [1000; 4]);
        assert_eq!(foreign(Some(&own), &ALICE), None);
        // sudo: root all along.
        let why = foreign(Some(&creds([0; 4], [0; 4])), &ALICE).unwrap();
        assert_eq!(why, "runs as uid 0, not as the run's user (uid 1000)");
        // A setuid-root program: real uid the user's, effective root.
        let why = foreign(Some(&creds([1000, 0, 0, 0], [1000; 4])), &ALICE).unwrap();
        assert!(why.starts_with("runs as uid 0,"), "{why}");
        // Back to the user for now, root kept as the saved uid: still foreign.
        let why = foreign(Some(&creds([1000, 1000, 0, 1000], [1000; 4])), &ALICE).unwrap();
        assert!(why.starts_with("runs as uid 0,"), "{why}");
        // A setgid helper.
        let why = foreign(Some(&creds([1000; 4], [1000, 42, 42, 42])), &ALICE).unwrap();
        assert_eq!(why, "runs with gid 42, not the run's group (gid 1000)");
        assert!(foreign(None, &ALICE).is_some(), "unreadable: withheld");
        // A file-capability helper (ping's cap_net_raw).
        let caps = Creds {
            cap_prm: 1 << 13,
            ..own
        };
        assert!(foreign(Some(&caps), &ALICE)
            .unwrap()
            .contains("CapPrm 0x2000"));
        // Capabilities in a user namespace the user owns (unshare -r) are
        // the user's own.
        let rootless = Creds {
            cap_prm: u64::MAX >> 23,
            userns_owner: Some(1000),
            ..own
        };
        assert_eq!(foreign(Some(&rootless), &ALICE), None);
        // The user's own, but not dumpable (ssh-agent, a setuid program
        // that dropped back to the user).
        let undumpable = Creds {
            dump_owner: 0,
            ..own
        };
        assert!(foreign(Some(&undumpable), &ALICE)
            .unwrap()
            .starts_with("is not dumpable"));
    }
}
