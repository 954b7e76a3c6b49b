//! The ring pump: records out of the kernel's ring buffer, decoded,
//! enriched (an outside sender's argv, an OOM's memory cgroup) and written.
use super::Session;
use crate::{
    capture::{cgroups, decode},
    error::TracerError,
    eventlog::{Record, Task},
    run::procs,
};

/// Twice the kernel side's wake-up batching period: a record committed
/// without a wake-up after the last forced one is found by then.
const CATCH_UP: std::time::Duration =
    std::time::Duration::from_nanos(2 * tracer_common::WAKE_BATCH_NS);

impl Session {
    /// Wait until the ring buffer has records (or may have: the readiness
    /// is cleared first, so a record committed later wakes the loop again),
    /// or until the catch-up time after a drain that found records: the
    /// kernel side commits most records without waking the reader (see
    /// `WAKE_BATCH_NS`). Call `drain` after it.
    pub async fn ready(&self) -> Result<(), TracerError> {
        let events = async {
            let mut guard = self.ring.readable().await.map_err(TracerError::PollRing)?;
            guard.clear_ready();
            Ok(())
        };
        let crashes = async {
            let mut guard = self
                .crashes
                .readable()
                .await
                .map_err(TracerError::PollRing)?;
            guard.clear_ready();
            Ok(())
        };
        let readable = async {
            tokio::select! {
                r = events => r,
                r = crashes => r,
            }
        };
        match self.catch_up {
            Some(at) => tokio::select! {
                r = readable => r,
                () = tokio::time::sleep_until(at) => Ok(()),
            },
            None => readable.await,
        }
    }

    /// Write every event already in the ring buffer.
    pub fn drain(&mut self) -> Result<u64, TracerError> {
        // Crashes first: their processes may still be there to be read.
        self.read_crashes();
        let mut n = 0;
        let mut seen = 0u64;
        loop {
            // Copy the record out so the ring's borrow ends here.
            let decoded = match self.ring.get_mut().next() {
                Some(item) => decode::decode(&item),
                None => break,
            };
            seen += 1;
            let wire = match decoded {
                Ok(w) => w,
                Err(e) => {
                    log::warn!("undecodable record: {e}");
                    self.undecodable += 1;
                    continue;
                }
            };
            if let decode::Wire::Stderr {
                task,
                count,
                data,
                to_null,
                ..
            } = &wire
            {
                let key = crate::eventlog::ProcKey {
                    pid: task.tgid,
                    start: task.start_ns,
                };
                log::debug!("stderr: {} bytes of {count} from {}", data.len(), task.tgid);
                self.last_words.push(key, data, *count, *to_null);
                continue;
            }
            if let decode::Wire::Existing(e) = &wire {
                self.existing.push(*e);
                continue;
            }
            let t = wire.ktime();
            let at = self.writer.stamp(t);
            let Some(mut rec) = wire.into_record(at) else {
                continue;
            };
            if let Record::Exec(e) = &rec {
                self.remember_exe(e.task.key(), &e.filename);
            }
            self.name_outside_sender(&mut rec);
            resolve_memcg(&mut rec);
            if let Record::Exec(e) = &mut rec {
                e.test_env = procs::test_env_of(e.task.key());
            }
            self.write(&rec)?;
            n += 1;
            // A process's last words follow its death in the log.
            if let Record::Exit(x) = &rec {
                if x.group_dead {
                    self.write_last_words(&x.task, t)?;
                }
            }
        }
        n += self.write_crashes()?;
        self.writer.flush();
        // Records came: more may follow without a wake-up. An idle ring
        // arms no timer, so an idle tracer stays asleep.
        self.catch_up = (seen > 0).then(|| tokio::time::Instant::now() + CATCH_UP);
        Ok(n)
    }

    /// Each crash record, its process's maps and files read at once (it
    /// may not have exited yet); unwound after the main ring's records
    /// (the exec that names its executable among them).
    fn read_crashes(&mut self) {
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

    /// A `crash_stack` for each crash read: unwound and symbolised, in
    /// one parse child for the drain's crashes (`symbolize::sandbox`).
    fn write_crashes(&mut self) -> Result<u64, TracerError> {
        let pending = std::mem::take(&mut self.pending_crashes);
        if pending.is_empty() {
            return Ok(0);
        }
        let user = self.viewer.map(|v| (v.uid, v.gid));
        let mut found = Vec::with_capacity(pending.len());
        let mut withheld = Vec::with_capacity(pending.len());
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
            withheld.push(withheld_from(self.viewer, creds.as_ref(), &rec, &exes));
            let maps_read = !snapshot.mappings.is_empty();
            let modules =
                crate::symbolize::modules_for(&rec, snapshot, &exes, &mut self.libs, user);
            let at = self.writer.stamp(rec.hdr.ktime_ns);
            found.push((rec, raw, modules, at, task, maps_read));
        }
        let crashes: Vec<_> = found
            .iter()
            .map(
                |(rec, raw, modules, at, task, _)| crate::symbolize::sandbox::Crash {
                    raw,
                    rec,
                    modules,
                    at: at.clone(),
                    task: task.clone(),
                },
            )
            .collect();
        let stacks = crate::symbolize::sandbox::crash_stacks(
            &crashes,
            &mut self.images,
            user,
            &self.debug_dirs,
        );
        drop(crashes);
        let mut n = 0;
        for ((mut stack, (.., maps_read)), why) in stacks.into_iter().zip(&found).zip(withheld) {
            if let Some(why) = why {
                withhold(&mut stack, why);
            }
            log::debug!(
                "crash of {}: {} frames, {:?}, maps {}",
                stack.task.pid,
                stack.frames.len(),
                stack.completeness,
                if *maps_read { "read" } else { "lost" }
            );
            self.write(&Record::CrashStack(stack))?;
            n += 1;
        }
        Ok(n)
    }

    /// Exec filenames of the latest processes, at most `MAX_EXES`.
    fn remember_exe(&mut self, key: crate::eventlog::ProcKey, filename: &str) {
        const MAX_EXES: usize = 1024;
        if self.exes.len() >= MAX_EXES {
            self.exes.pop_front();
        }
        self.exes.push_back((key, filename.to_string()));
    }

    /// A signal from a process the log cannot name (it was never exec'd in
    /// the run): read its argv now, while it is alive, checked against its
    /// start time. Once per process.
    fn name_outside_sender(&mut self, rec: &mut Record) {
        /// Processes remembered as named at most (16 B each, ~1 MiB).
        const MAX_NAMED: usize = 1 << 16;
        if self.named.len() >= MAX_NAMED {
            self.named.clear();
        }
        match rec {
            Record::Fork(f) if f.thread => {}
            Record::Fork(f) => {
                self.named.insert(f.child.key());
            }
            Record::Exit(x) if x.group_dead => {
                self.named.remove(&x.task.key());
            }
            Record::Existing(x) => {
                self.named.insert(x.task.key());
            }
            Record::Signal(s)
                if s.sender.pid != self.me && !self.named.contains(&s.sender.key()) =>
            {
                self.named.insert(s.sender.key());
                if let Some((argv, cut)) = procs::argv_of(s.sender.key()) {
                    s.sender_argv = Some(argv);
                    s.sender_argv_truncated = cut;
                }
            }
            _ => {}
        }
    }

    pub(super) fn write_last_words(&mut self, task: &Task, t: u64) -> Result<(), TracerError> {
        // Stamp only what is written: sequence numbers have no gaps.
        if !self.last_words.has(&task.key()) {
            return Ok(());
        }
        let at = self.writer.stamp(t);
        let redactor = &self.redactor;
        match self
            .last_words
            .take_redacted(task, at, |text| redactor.text(text).into_owned())
        {
            Some(lw) => self.write(&Record::LastWords(lw)),
            None => Ok(()),
        }
    }
}

/// An OOM kill names its memory cgroup by id: add its path, limit and
/// `memory.oom.group` while the cgroup still exists.
fn resolve_memcg(rec: &mut Record) {
    if let Record::Oom(oom) = rec {
        if let Some(m) = oom.memcg.as_mut() {
            if let Some(info) = cgroups::resolve(m.id) {
                m.path = Some(info.path);
                m.limit_bytes = info.limit_bytes;
                m.oom_group = info.oom_group;
            }
        }
    }
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
