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

/// A process's credentials from /proc/PID/status: real, effective, saved,
/// filesystem.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Creds {
    pub uids: [u32; 4],
    pub gids: [u32; 4],
}

/// Why `creds` (None: unreadable) are not the viewer's own, or None when
/// they are: every uid and gid must be the viewer's, as ptrace's read check
/// asks. Unreadable credentials count as foreign.
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
    odd(&c.gids, v.gid)
        .map(|gid| format!("runs with gid {gid}, not the run's group (gid {})", v.gid))
}

/// The credentials of `pid` now, from /proc/PID/status.
pub fn creds_of(pid: u32) -> Option<Creds> {
    let s = procfs::process::Process::new(pid as i32)
        .and_then(|p| p.status())
        .ok()?;
    Some(Creds {
        uids: [s.ruid, s.euid, s.suid, s.fuid],
        gids: [s.rgid, s.egid, s.sgid, s.fgid],
    })
}

/// A leaked process of another user: its executable and open files go the
/// way of a snapshot's (see `withhold`).
pub fn withhold_leak(leak: &mut crate::eventlog::Leak, why: String) {
    leak.exe = None;
    leak.fds.clear();
    leak.withheld = Some(format!("{why}: its executable and open files are withheld"));
}

/// Empty what the viewer may not see of `p`, and say why.
pub fn withhold(p: &mut ProcSnapshot, why: String) {
    p.exe = None;
    p.fds.clear();
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
        Creds { uids, gids }
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
        // Dropped back to the user, root kept as the saved uid: still foreign.
        let why = foreign(Some(&creds([1000, 1000, 0, 1000], [1000; 4])), &ALICE).unwrap();
        assert!(why.starts_with("runs as uid 0,"), "{why}");
        // A setgid helper.
        let why = foreign(Some(&creds([1000; 4], [1000, 42, 42, 42])), &ALICE).unwrap();
        assert_eq!(why, "runs with gid 42, not the run's group (gid 1000)");
        assert!(foreign(None, &ALICE).is_some(), "unreadable: withheld");
    }
}
