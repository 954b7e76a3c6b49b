//! Masking a snapshot: its processes, their threads and fds, and the
//! findings derived from them.
use std::borrow::Cow;

use super::Redactor;
use crate::snapshot::{FdEntry, FdKind, Holder, ProcSnapshot, Snapshot, ThreadSnapshot};

impl Redactor {
    /// Mask a snapshot's processes; its findings quote their command lines
    /// and fd targets (possibly cut short, where a regex could no longer
    /// match), so they are derived again from the masked processes, exactly
    /// as the capture derives them (`snapshot::analyze` is pure).
    pub fn snapshot(&self, s: &mut Snapshot) -> bool {
        let changed = s
            .processes
            .iter_mut()
            .fold(false, |c, p| self.process(p) | c);
        if changed {
            s.findings = crate::snapshot::analyze(&s.processes);
        }
        changed
    }

    /// A copy of `s`, masked.
    pub fn snapshot_copy(&self, s: &Snapshot) -> Snapshot {
        let mut copy = s.clone();
        self.snapshot(&mut copy);
        copy
    }

    fn process(&self, p: &mut ProcSnapshot) -> bool {
        let ProcSnapshot {
            pid: _,
            start_ns: _,
            ppid: _,
            pgid: _,
            sid: _,
            comm,
            argv,
            argv_truncated,
            exe,
            state: _,
            threads,
            // Counts.
            threads_left_out: _,
            fds,
            fds_left_out: _,
            vanished: _,
            withheld: _,
            frozen,
        } = p;
        let mut changed = self.string(comm)
            | self.cut_argv(argv, *argv_truncated)
            | self.opt(exe)
            | self.opt(frozen);
        for t in threads {
            // The rest is the kernel's: states, wait channels, stack frames.
            let ThreadSnapshot {
                tid: _,
                comm,
                state: _,
                wchan: _,
                stack: _,
                syscall: _,
            } = t;
            changed |= self.string(comm);
        }
        for f in fds {
            changed |= self.fd(f);
        }
        changed
    }

    fn fd(&self, f: &mut FdEntry) -> bool {
        let FdEntry {
            fd: _,
            target,
            access: _,
            kind,
        } = f;
        self.string(target)
            | match kind {
                FdKind::File { path } => self.string(path),
                FdKind::Pipe { inode: _, holders } => self.holders(holders),
                FdKind::Unix {
                    inode: _,
                    sock_type: _,
                    name,
                    peer: _,
                    peer_holders,
                } => self.opt(name) | self.holders(peer_holders),
                // Addresses and ports are the network's, not secrets of argv.
                FdKind::Inet {
                    inode: _,
                    proto: _,
                    local: _,
                    remote: _,
                    state: _,
                    peer: _,
                    peer_holders,
                } => self.holders(peer_holders),
                FdKind::Anon { name } => self.string(name),
                FdKind::Socket { inode: _ } | FdKind::Other => false,
            }
    }

    fn holders(&self, hs: &mut [Holder]) -> bool {
        hs.iter_mut().fold(false, |c, h| {
            let Holder {
                pid: _,
                comm,
                fd: _,
                access: _,
            } = h;
            self.string(comm) | c
        })
    }

    /// A leak's `"N: target"`: the fd number stays.
    pub(super) fn fd_line(&self, line: &mut String) -> bool {
        match line.split_once(": ") {
            Some((n, target)) => match self.text(target) {
                Cow::Owned(t) => {
                    *line = format!("{n}: {t}");
                    true
                }
                Cow::Borrowed(_) => false,
            },
            None => self.string(line),
        }
    }
}
