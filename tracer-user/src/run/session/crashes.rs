//! Crash stacks, off the ring drain. A crash record's maps and files are
//! read at once (its process may be gone a moment later); its stack is
//! unwound and named by the parse child (`symbolize::sandbox`), which the
//! drain never waits for: the child's answer is read when its pipe or its
//! pidfd is readable (`Session::ready`), and the `crash_stack` records are
//! written then, after whatever the ring brought meanwhile. One child at a
//! time; crashes that come while it works wait for the next, at most
//! `MAX_WAITING`. The stop waits for them, bounded by the child's
//! deadline (`symbolize::sandbox::WALL_LIMIT`) per child.
use std::os::fd::{AsRawFd, RawFd};

use tokio::io::unix::AsyncFd;

use super::Session;
use crate::{
    capture::decode,
    error::TracerError,
    eventlog::{Record, Stamp, Task},
    symbolize::{
        sandbox::{self, Crash, Parse},
        Modules,
    },
};

/// Crashes waiting for the parse child at most; past it a crash's stack is
/// the kernel's walk, unnamed, and says why (a run that crashes hundreds
/// of processes at once does not hold their module copies in memory).
const MAX_WAITING: usize = 64;

/// A crash read from its ring, its modules found.
pub(super) struct Waiting {
    rec: Box<tracer_common::CrashRecord>,
    raw: Vec<u8>,
    modules: Modules,
    task: Task,
    /// Why the run's user may not see its stack (`withheld_from`).
    withheld: Option<String>,
}

/// The parse child at work on `crashes`.
pub(super) struct Symbolizing {
    /// Its stdout and pidfd with the event loop, when there is one (the
    /// stop waits without): declared first, so dropped before `parse`
    /// closes the fds they watch.
    watch: Option<(AsyncFd<Fd>, AsyncFd<Fd>)>,
    parse: Parse,
    crashes: Vec<Waiting>,
}

/// Until `fd` is readable (its readiness then cleared: the caller reads
/// or reaps until it would block).
async fn readable(fd: &AsyncFd<Fd>) {
    if let Ok(mut guard) = fd.readable().await {
        guard.clear_ready();
    }
}

/// A file descriptor another struct owns, for the reactor to watch.
pub(super) struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl Symbolizing {
    /// Until the child's answer or exit may be readable, or its deadline.
    pub(super) async fn ready(&self) {
        let due = async {
            match self.parse.child.deadline() {
                Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
                // Killed: only its exit (the pidfd) is awaited.
                None => std::future::pending().await,
            }
        };
        let Some((out, pid)) = &self.watch else {
            return due.await;
        };
        tokio::select! {
            () = readable(out) => {}
            () = readable(pid) => {}
            () = due => {}
        }
    }
}

impl Session {
    /// Each crash record, its process's maps and files read at once (it
    /// may not have exited yet); its modules found after the main ring's
    /// records (the exec that names its executable among them).
    pub(super) fn read_crashes(&mut self) {
        loop {
            let (decoded, raw) = match self.crashes.get_mut().next() {
                Some(item) => (decode::decode_crash(&item), item.to_vec()),
                None => break,
            };
            match decoded {
                Ok(rec) => {
                    let key = crate::eventlog::ProcKey {
                        pid: rec.task.tgid,
                        start: rec.task.start_ns,
                    };
                    let addrs = crate::symbolize::frame_candidates(&rec);
                    let mut modules = crate::run::crash_maps::snapshot(key, &addrs);
                    // The perf map outlives its process: read by pid once
                    // the process is gone, or was on its way out while its
                    // maps were read (its files no longer open: 1 Node
                    // abort in 15).
                    if modules.jit.is_none() {
                        let owner = self.viewer.map_or(0, |v| v.uid);
                        modules.jit =
                            crate::run::crash_maps::perf_map_after_exit(key, owner, &addrs);
                    }
                    // Who it ran as, while it may still live.
                    let creds = self.viewer.and_then(|_| live_creds(key));
                    self.pending_crashes.push((rec, raw, modules, creds));
                }
                Err(e) => {
                    log::warn!("undecodable crash record: {e}");
                    self.undecodable += 1;
                }
            }
        }
    }

    /// The crashes read: modules found, handed to the parse child (started
    /// if none is at work); a child that is done has its answers written.
    /// Never waits for the child. Returns the records written.
    pub(super) fn symbolize(&mut self) -> Result<u64, TracerError> {
        let mut n = self.find_modules()?;
        let done = self
            .symbolizing
            .as_mut()
            .is_some_and(|s| s.parse.child.pump());
        if done {
            if let Some(s) = self.symbolizing.take() {
                n += self.write_stacks(s.crashes, Ok(s.parse))?;
            }
        }
        if self.symbolizing.is_none() && !self.waiting.is_empty() {
            n += self.start_child()?;
        }
        Ok(n)
    }

    /// The stop: the child at work and then the crashes still waiting,
    /// each child waited for (bounded by its deadline).
    pub(super) fn finish_symbolizing(&mut self) -> Result<u64, TracerError> {
        let mut n = self.find_modules()?;
        loop {
            if let Some(mut s) = self.symbolizing.take() {
                s.watch = None;
                s.parse.child.wait();
                n += self.write_stacks(s.crashes, Ok(s.parse))?;
            }
            if self.waiting.is_empty() {
                return Ok(n);
            }
            n += self.start_child()?;
        }
    }

    /// Until the parse child may have something to read (never, without
    /// one).
    pub(super) async fn symbolizing_ready(&self) {
        match &self.symbolizing {
            Some(s) => s.ready().await,
            None => std::future::pending().await,
        }
    }

    fn find_modules(&mut self) -> Result<u64, TracerError> {
        let pending = std::mem::take(&mut self.pending_crashes);
        let user = self.viewer.map(|v| (v.uid, v.gid));
        let mut late = Vec::new();
        for (rec, raw, snapshot, creds) in pending {
            let task = decode::task(&rec.task, &rec.comm);
            let key = task.key();
            let exes: Vec<String> = self
                .exes
                .iter()
                .rev()
                .filter(|(k, _)| *k == key)
                .map(|(_, p)| p.clone())
                .collect();
            let withheld = withheld_from(self.viewer, creds.as_ref(), &rec, &exes);
            let modules =
                crate::symbolize::modules_for(&rec, snapshot, &exes, &mut self.libs, user);
            let w = Waiting {
                rec,
                raw,
                modules,
                task,
                withheld,
            };
            if self.waiting.len() < MAX_WAITING {
                self.waiting.push(w);
            } else {
                late.push(w);
            }
        }
        let why = format!("{MAX_WAITING} crashes were already waiting for the parse child");
        self.write_stacks(late, Err(why))
    }

    /// A parse child for every crash waiting; one that cannot start has
    /// their stacks written at once, unnamed.
    fn start_child(&mut self) -> Result<u64, TracerError> {
        let crashes = std::mem::take(&mut self.waiting);
        let user = self.viewer.map(|v| (v.uid, v.gid));
        let started = {
            let refs = as_crashes(&crashes, |_| Stamp::default());
            sandbox::start(&refs, &mut self.images, user, &self.debug_dirs)
        };
        match started {
            Ok(parse) => {
                let watch = watch(&parse);
                self.symbolizing = Some(Symbolizing {
                    watch,
                    parse,
                    crashes,
                });
                Ok(0)
            }
            Err(why) => self.write_stacks(crashes, Err(why)),
        }
    }

    /// A `crash_stack` record for each crash, from the child's answers
    /// (stamped as written: sequence numbers stay gap-free).
    fn write_stacks(
        &mut self,
        crashes: Vec<Waiting>,
        parse: Result<Parse, String>,
    ) -> Result<u64, TracerError> {
        if crashes.is_empty() {
            return Ok(0);
        }
        let stacks = {
            let writer = &mut self.writer;
            let refs = as_crashes(&crashes, |w| writer.stamp(w.rec.hdr.ktime_ns));
            sandbox::stacks(&refs, parse)
        };
        let mut n = 0;
        for (mut stack, w) in stacks.into_iter().zip(&crashes) {
            if let Some(why) = &w.withheld {
                withhold(&mut stack, why.clone());
            }
            log::debug!(
                "crash of {}: {} frames, {:?}",
                stack.task.pid,
                stack.frames.len(),
                stack.completeness,
            );
            self.write(&Record::CrashStack(stack))?;
            n += 1;
        }
        Ok(n)
    }
}

fn as_crashes(crashes: &[Waiting], mut at: impl FnMut(&Waiting) -> Stamp) -> Vec<Crash<'_>> {
    crashes
        .iter()
        .map(|w| Crash {
            raw: &w.raw,
            rec: &w.rec,
            modules: &w.modules,
            at: at(w),
            task: w.task.clone(),
        })
        .collect()
}

/// The child's stdout and pidfd registered with the event loop, when
/// tracer runs one (`None` otherwise: the stop waits for it blocking).
fn watch(parse: &Parse) -> Option<(AsyncFd<Fd>, AsyncFd<Fd>)> {
    tokio::runtime::Handle::try_current().ok()?;
    let out = crate::capture::readable::watch_readable(Fd(parse.child.stdout_fd())).ok()?;
    let pid = crate::capture::readable::watch_readable(Fd(parse.child.pidfd())).ok()?;
    Some((out, pid))
}

/// The credentials of `key` if it is still that process (read, then its
/// start time checked: a recycled pid is not it).
fn live_creds(key: crate::eventlog::ProcKey) -> Option<crate::snapshot::Creds> {
    let creds = crate::snapshot::creds_of(key.pid)?;
    crate::run::procs::alive(key).then_some(creds)
}

/// Why the run's user (`viewer`) may not see a crashed process's stack, as
/// /proc would refuse them its details (snapshots and leak records withhold
/// the same): its credentials while it lived (`creds`), else the program
/// it ran (a setuid or setgid file of someone else's: the process is
/// usually gone before its record is read). `None`: its stack is theirs.
fn withheld_from(
    viewer: Option<crate::snapshot::Viewer>,
    creds: Option<&crate::snapshot::Creds>,
    rec: &tracer_common::CrashRecord,
    exes: &[String],
) -> Option<String> {
    let v = viewer?;
    match creds {
        // Its ids and capabilities, not its dumpability: a process on its
        // way out through a fatal signal shows /proc/PID/fd as root's
        // whoever it is (measured: a plain program of `nobody`'s, crashed
        // on a NULL pointer, read as uid 0).
        Some(c) => crate::snapshot::foreign(
            Some(&crate::snapshot::Creds {
                dump_owner: v.uid,
                ..*c
            }),
            &v,
        ),
        None => crate::symbolize::exe_owner_mode(rec, exes)
            .and_then(|(uid, gid, mode)| crate::snapshot::foreign_program(uid, gid, mode, &v)),
    }
}

/// Empty what a withheld stack would give away: its frames (addresses,
/// modules, names) and the fault address; the signal and its code stay.
fn withhold(stack: &mut crate::eventlog::CrashStack, why: String) {
    stack.frames.clear();
    stack.frames_left_out = 0;
    stack.fault_addr = None;
    stack.completeness = crate::eventlog::StackCompleteness::NoStack;
    stack.detail = Some(format!("withheld from the run's user: it {why}"));
    stack.withheld = Some(why);
}
