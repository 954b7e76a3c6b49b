//! `take`: one bounded pass over all of /proc (parents, and who holds which
//! pipe/socket inode), a detailed read of the requested processes and their
//! descendants, sock_diag tables, then resolution of every pipe/socket fd to
//! the processes holding its other end.
use std::collections::{BTreeSet, HashMap};

use super::{
    analyze,
    procread::{fd_access, read_process, RawKind, RawProc},
    sockdiag::{self, InetInfo, UnixInfo},
    withhold::{foreign, withhold, Viewer},
    Access, FdEntry, FdKind, Holder, ProcSnapshot, Snapshot,
};

/// Upper bound on processes visited when looking for other ends. A CI
/// runner has hundreds; the bound only stops a pathological machine from
/// making the snapshot slow. Hitting it is recorded in `Snapshot::notes`.
const MAX_SCAN_PROCS: usize = 8192;

type Holders = HashMap<u64, BTreeSet<(u32, i32)>>;

#[derive(Default)]
struct Scan {
    ppid: HashMap<u32, u32>,
    comm: HashMap<u32, String>,
    // pipefs and sockfs are distinct filesystems: keep their inodes apart.
    pipes: Holders,
    sockets: Holders,
    truncated: bool,
}

/// Snapshot `pids` and all their descendants (a parent blocked in wait4 is
/// only explainable with its children in view). Best effort: a process that
/// exits mid-read is marked `vanished` or skipped with a note; never panics.
pub fn take(pids: &[u32]) -> Snapshot {
    take_for(pids, None)
}

/// `take`, for `viewer` to read: what /proc would not show them of a
/// process running as another user is withheld (see `withhold`).
pub fn take_for(pids: &[u32], viewer: Option<Viewer>) -> Snapshot {
    let mut notes = Vec::new();
    let mut scan = scan_proc();
    if scan.truncated {
        notes.push(format!(
            "/proc scan stopped at {MAX_SCAN_PROCS} processes: holders of other ends may be missing"
        ));
    }
    let mut raws = Vec::new();
    for pid in with_descendants(pids, &scan.ppid) {
        match read_process(pid) {
            Some(r) => raws.push(r),
            None if pids.contains(&pid) => {
                notes.push(format!("pid {pid} vanished before it was read"))
            }
            None => {}
        }
    }
    // The scan ran before the detailed reads: make sure every fd we show is
    // also in the holder index, or a just-opened fd would miss its peer.
    for r in &raws {
        scan.comm.insert(r.pid, r.comm.clone());
        for f in &r.fds {
            match f.what {
                RawKind::Pipe(i) => scan.pipes.entry(i).or_default().insert((r.pid, f.fd)),
                RawKind::Socket(i) => scan.sockets.entry(i).or_default().insert((r.pid, f.fd)),
                _ => false,
            };
        }
    }
    let unix = sockdiag::unix_sockets().unwrap_or_else(|e| {
        notes.push(format!(
            "sock_diag unix dump failed ({e}): unix socket peers unknown"
        ));
        HashMap::new()
    });
    let inet = sockdiag::inet_sockets().unwrap_or_else(|e| {
        notes.push(format!(
            "sock_diag inet dump failed ({e}): endpoints from /proc/net"
        ));
        sockdiag::inet_sockets_procfs()
    });
    let mut r = Resolver {
        scan: &scan,
        unix: &unix,
        inet_peer: sockdiag::inet_peers(&inet),
        inet: &inet,
        access: HashMap::new(),
    };
    for raw in &raws {
        for f in &raw.fds {
            r.access.insert((raw.pid, f.fd), f.access);
        }
    }
    let mounts = super::freezer::Mounts::read();
    let mut withheld = Vec::new();
    let processes: Vec<ProcSnapshot> = raws
        .into_iter()
        .map(|raw| {
            let frozen = mounts.frozen(raw.pid);
            let why = viewer.and_then(|v| foreign(raw.creds.as_ref(), &v));
            let mut p = ProcSnapshot {
                frozen,
                ..r.resolve(raw)
            };
            if let Some(why) = why {
                withheld.push(p.pid);
                withhold(&mut p, why);
            }
            p
        })
        .collect();
    if !withheld.is_empty() {
        notes.push(format!(
            "{} process(es) run as another user than the run's (pid {}): their kernel stacks, \
             wait channels, syscalls, executables and open files are withheld",
            withheld.len(),
            withheld
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let findings = analyze(&processes);
    Snapshot {
        processes,
        findings,
        notes,
    }
}

/// Requested pids plus every descendant, sorted (deterministic order).
fn with_descendants(pids: &[u32], ppid: &HashMap<u32, u32>) -> BTreeSet<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for (&pid, &parent) in ppid {
        children.entry(parent).or_default().push(pid);
    }
    let mut out = BTreeSet::new();
    let mut todo: Vec<u32> = pids.to_vec();
    while let Some(pid) = todo.pop() {
        if out.insert(pid) {
            todo.extend(children.get(&pid).into_iter().flatten().copied());
        }
    }
    out
}

fn scan_proc() -> Scan {
    let mut scan = Scan::default();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        scan.truncated = true;
        return scan;
    };
    let pids = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    for (n, pid) in pids.enumerate() {
        if n >= MAX_SCAN_PROCS {
            scan.truncated = true;
            break;
        }
        // Gone since readdir: nothing to hold, nothing to report.
        let Ok(stat) = procfs::process::Process::new(pid as i32).and_then(|p| p.stat()) else {
            continue;
        };
        scan.ppid.insert(pid, stat.ppid.max(0) as u32);
        scan.comm.insert(pid, stat.comm);
        // Plain readlink is one syscall per fd; we only need pipe/socket inodes.
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for e in fds.flatten().take(super::procread::MAX_FDS_PER_PROC) {
            let Some(fd) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(link) = std::fs::read_link(e.path()) else {
                continue;
            };
            let link = link.to_string_lossy();
            if let Some(i) = bracket_inode(&link, "pipe:[") {
                scan.pipes.entry(i).or_default().insert((pid, fd));
            } else if let Some(i) = bracket_inode(&link, "socket:[") {
                scan.sockets.entry(i).or_default().insert((pid, fd));
            }
        }
    }
    scan
}

fn bracket_inode(link: &str, prefix: &str) -> Option<u64> {
    link.strip_prefix(prefix)?.strip_suffix(']')?.parse().ok()
}

struct Resolver<'a> {
    scan: &'a Scan,
    unix: &'a HashMap<u64, UnixInfo>,
    inet: &'a HashMap<u64, InetInfo>,
    inet_peer: HashMap<u64, u64>,
    /// fdinfo access per (pid, fd), read lazily for processes outside the
    /// snapshot (only pipe holders need it).
    access: HashMap<(u32, i32), Option<Access>>,
}

impl Resolver<'_> {
    fn resolve(&mut self, raw: RawProc) -> ProcSnapshot {
        let pid = raw.pid;
        let fds = raw
            .fds
            .into_iter()
            .map(|f| {
                let kind = match f.what {
                    RawKind::File(path) => FdKind::File { path },
                    RawKind::Pipe(inode) => FdKind::Pipe {
                        inode,
                        holders: self.holders(true, inode, Some((pid, f.fd))),
                    },
                    RawKind::Socket(inode) => self.socket(inode),
                    RawKind::Anon(name) => FdKind::Anon { name },
                    RawKind::Other => FdKind::Other,
                };
                FdEntry {
                    fd: f.fd,
                    target: f.target,
                    access: f.access,
                    kind,
                }
            })
            .collect();
        ProcSnapshot {
            pid,
            start_ns: raw.start_ns,
            ppid: raw.ppid,
            pgid: raw.pgid,
            sid: raw.sid,
            comm: raw.comm,
            argv: raw.argv,
            argv_truncated: raw.argv_truncated,
            exe: raw.exe,
            state: raw.state,
            threads: raw.threads,
            threads_left_out: raw.threads_left_out,
            fds,
            fds_left_out: raw.fds_left_out,
            vanished: raw.vanished,
            withheld: None,
            frozen: None,
        }
    }

    fn socket(&mut self, inode: u64) -> FdKind {
        if let Some(u) = self.unix.get(&inode) {
            FdKind::Unix {
                inode,
                sock_type: u.sock_type.clone(),
                name: u.name.clone(),
                peer: u.peer,
                peer_holders: u
                    .peer
                    .map(|p| self.holders(false, p, None))
                    .unwrap_or_default(),
            }
        } else if let Some(i) = self.inet.get(&inode) {
            let peer = self.inet_peer.get(&inode).copied();
            FdKind::Inet {
                inode,
                proto: i.proto.to_string(),
                local: i.local.to_string(),
                remote: i.remote.to_string(),
                state: i.state.clone(),
                peer,
                peer_holders: peer
                    .map(|p| self.holders(false, p, None))
                    .unwrap_or_default(),
            }
        } else {
            FdKind::Socket { inode }
        }
    }

    /// Every (pid, fd) holding `inode`, except `skip` (the fd being resolved).
    fn holders(&mut self, pipe: bool, inode: u64, skip: Option<(u32, i32)>) -> Vec<Holder> {
        let index = if pipe {
            &self.scan.pipes
        } else {
            &self.scan.sockets
        };
        let Some(set) = index.get(&inode) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for &(pid, fd) in set {
            if Some((pid, fd)) == skip {
                continue;
            }
            let access = if pipe {
                *self
                    .access
                    .entry((pid, fd))
                    .or_insert_with(|| fd_access(pid, fd))
            } else {
                None
            };
            let comm = self.scan.comm.get(&pid).cloned().unwrap_or_default();
            out.push(Holder {
                pid,
                comm,
                fd,
                access,
            });
        }
        out // BTreeSet order: (pid, fd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descendants_are_included_once_and_sorted() {
        let ppid: HashMap<u32, u32> = [(10, 1), (11, 10), (12, 11), (13, 10), (20, 1)].into();
        let got: Vec<u32> = with_descendants(&[10, 11], &ppid).into_iter().collect();
        assert_eq!(got, vec![10, 11, 12, 13]);
    }

    #[test]
    fn bracket_inodes_parse() {
        assert_eq!(bracket_inode("pipe:[21926]", "pipe:["), Some(21926));
        assert_eq!(bracket_inode("socket:[7]", "pipe:["), None);
        assert_eq!(bracket_inode("/tmp/pipe:[1]", "pipe:["), None);
    }
}
