//! A cgroup of the run's own, where the kernel lets tracer make one: every
//! process the command forks stays in it whatever it does to its session or
//! process group (setsid, double fork), so the run can be ended whole even
//! when tracer is gone (see `watchdog`).
//!
//! cgroup v2 first (a child of tracer's own cgroup; it has `cgroup.kill`
//! from 5.14, `cgroup.freeze` from 5.2), else the v1 freezer hierarchy
//! (frozen, then signalled member by member), else none: the watchdog then
//! relies on the kernel's tracked-process map alone. Tracer sets no limit
//! on it (on v2 it gets the controllers its parent hands down, unlimited).
use std::{
    ffi::CString,
    fs,
    os::unix::ffi::OsStringExt,
    path::{Path, PathBuf},
};

pub struct RunCgroup {
    dir: PathBuf,
    /// `cgroup.procs` of the cgroup tracer was in: where leftovers go back.
    parent_procs: PathBuf,
    /// `DIR/cgroup.procs`, ready for the child between fork and exec.
    procs_c: CString,
}

impl RunCgroup {
    /// A fresh, uniquely named cgroup under tracer's own, or `None` (logged
    /// at debug level) where none can be made: read-only cgroupfs in a
    /// container, no cgroup mounted, not root.
    pub fn create() -> Option<RunCgroup> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
        let own = fs::read_to_string("/proc/self/cgroup").ok()?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let name = format!("tracer-run-{}-{nanos}", std::process::id());
        for parent in candidates(&mountinfo, &own) {
            sweep(&parent);
            let dir = parent.join(&name);
            match fs::create_dir(&dir) {
                Ok(()) => {
                    let procs_c =
                        CString::new(dir.join("cgroup.procs").into_os_string().into_vec()).ok()?;
                    log::debug!("the run's cgroup: {}", dir.display());
                    return Some(RunCgroup {
                        parent_procs: parent.join("cgroup.procs"),
                        dir,
                        procs_c,
                    });
                }
                Err(e) => log::debug!("no run cgroup under {}: {e}", parent.display()),
            }
        }
        None
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The path the child writes "0" to, joining before it execs.
    pub fn procs_c(&self) -> &std::ffi::CStr {
        &self.procs_c
    }

    /// Live members (pids in tracer's pid namespace).
    pub fn members(&self) -> Vec<u32> {
        fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// SIGKILL every member at once, forks in flight included (cgroup v2,
    /// Linux 5.14+). False where the kernel has no `cgroup.kill`.
    pub fn kill(&self) -> bool {
        fs::write(self.dir.join("cgroup.kill"), "1").is_ok()
    }

    /// Freeze (or thaw) every member, so none can fork while they are being
    /// killed one by one: `cgroup.freeze` (v2, 5.2+) or `freezer.state` (v1).
    pub fn freeze(&self, frozen: bool) -> bool {
        let (v2, v1) = if frozen {
            ("1", "FROZEN")
        } else {
            ("0", "THAWED")
        };
        fs::write(self.dir.join("cgroup.freeze"), v2).is_ok()
            || fs::write(self.dir.join("freezer.state"), v1).is_ok()
    }

    /// Give what is left (processes `--leaks report` leaves running) back to
    /// tracer's own cgroup and remove the run's. Best effort, bounded.
    pub fn remove(&self) {
        for _ in 0..50 {
            for pid in self.members() {
                let _ = fs::write(&self.parent_procs, pid.to_string());
            }
            // EBUSY while an exiting member is still being released.
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        log::warn!("cannot remove the run's cgroup {}", self.dir.display());
    }
}

/// Remove the empty run cgroups of tracers that are gone (a tracer and its
/// watchdog both killed leave theirs behind). rmdir refuses a populated
/// cgroup, and a live tracer's is left alone, so this removes nothing in use.
fn sweep(parent: &Path) {
    let Ok(dir) = fs::read_dir(parent) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("tracer-run-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None)
            == Err(nix::errno::Errno::ESRCH);
        if gone && fs::remove_dir(e.path()).is_ok() {
            log::debug!("removed a stale run cgroup {}", e.path().display());
        }
    }
}

/// In the child, between fork and exec: move itself into the run's cgroup.
/// Async-signal-safe (open, write, close). A failure is not fatal: the
/// kernel's tracked-process map still knows the run.
pub fn join(procs: &std::ffi::CStr) {
    // SAFETY: open of a C string the caller owns, a write of a static byte,
    // close of the fd open gave: all async-signal-safe.
    unsafe {
        let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, b"0".as_ptr().cast(), 1);
            libc::close(fd);
        }
    }
}

/// Where the run's cgroup may go, best first: tracer's own cgroup in the
/// cgroup2 hierarchy, then in the v1 freezer hierarchy.
fn candidates(mountinfo: &str, own: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    // /proc/self/cgroup: "0::/path" (v2), "6:freezer:/path" (v1).
    let own_path = |want: &dyn Fn(&str, &str) -> bool| {
        own.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (id, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            want(id, ctrl).then(|| path.to_string())
        })
    };
    let v2 = own_path(&|id, ctrl| id == "0" && ctrl.is_empty());
    let v1 = own_path(&|_, ctrl| ctrl.split(',').any(|c| c == "freezer"));
    for line in mountinfo.lines() {
        // "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS... - FSTYPE SOURCE SUPEROPTS"
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mnt), Some(fstype)) = (l.get(3), l.get(4), r.first()) else {
            continue;
        };
        let own = match *fstype {
            "cgroup2" => v2.as_deref(),
            "cgroup"
                if r.get(2)
                    .is_some_and(|o| o.split(',').any(|c| c == "freezer")) =>
            {
                v1.as_deref()
            }
            _ => None,
        };
        if let Some(p) = own.and_then(|p| under_mount(root, mnt, p)) {
            if *fstype == "cgroup2" {
                out.insert(0, p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The directory of cgroup `path` in a mount of `root` at `mnt` (mountinfo
/// escapes spaces as \040; such paths are skipped rather than guessed).
fn under_mount(root: &str, mnt: &str, path: &str) -> Option<PathBuf> {
    if mnt.contains('\\') || root.contains('\\') {
        return None;
    }
    let rel = if root == "/" {
        path
    } else {
        path.strip_prefix(root)?
    };
    let rel = rel.trim_start_matches('/');
    Some(Path::new(mnt).join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn v2_first_then_v1_freezer() {
        let own = "6:freezer:/ci\n4:memory:/m\n0::/job/step\n";
        assert_eq!(
            candidates(MOUNTINFO, own),
            [
                PathBuf::from("/sys/fs/cgroup/unified/job/step"),
                PathBuf::from("/sys/fs/cgroup/freezer/ci"),
            ]
        );
        // v2 only (GitHub's runners): the one hierarchy.
        let v2only = "50 1 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        assert_eq!(
            candidates(v2only, "0::/system.slice/runner.service\n"),
            [PathBuf::from("/sys/fs/cgroup/system.slice/runner.service")]
        );
        assert!(candidates("", "0::/\n").is_empty());
    }

    #[test]
    fn mount_roots_are_stripped() {
        assert_eq!(
            under_mount("/kubepods/pod1", "/sys/fs/cgroup", "/kubepods/pod1/c"),
            Some(PathBuf::from("/sys/fs/cgroup/c"))
        );
        assert_eq!(under_mount("/a", "/sys/fs/cgroup", "/b"), None);
        assert_eq!(under_mount("/", "/mnt/with\\040space", "/"), None);
    }
}
