//! Ring-buffer bytes -> wire records -> event-log records.
//!
//! Never a transmute: check the length, copy with `read_unaligned`, convert
//! the kind tag with `TryFrom`.
use std::mem::size_of;

use tracer_common::{
    ExecEnvRecord, ExecRecord, ExistingRecord, ExitRecord, ForkRecord, KillCallRecord, KillSyscall,
    OomRecord, RecordHeader, RecordKind, SignalRecord, SignalSummaryRecord, StderrRecord,
    StderrTail, TaskId, EXEC_ENV_HEADER_LEN, EXEC_HEADER_LEN, EXIT_GROUP_DEAD, FORK_IS_THREAD,
    OOM_HAS_MEMCG, OOM_HAS_RSS, OOM_HAS_SCORE_ADJ, STDERR_HEADER_LEN, STDERR_TAIL_HEADER_LEN,
    TAIL_CAP,
};

use crate::eventlog::{
    errno_name, si_code_name, signal_name, CallRef, Exec, Exit, ExitStatus, Fork, KillCall, Memcg,
    NsPid, Oom, OomRss, Record, Signal, SignalSummary, Stamp, Task,
};
use crate::text::command::split_argv;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeError {
    #[error("record of {got} bytes is shorter than {what} ({need} bytes)")]
    TooShort {
        what: &'static str,
        need: usize,
        got: usize,
    },
    #[error("unknown record kind {0}")]
    UnknownKind(u32),
}

#[derive(Debug, Clone)]
pub enum Wire {
    Fork(ForkRecord),
    Exec(Box<ExecRecord>),
    Exit(ExitRecord),
    Signal(SignalRecord),
    SignalSummary(SignalSummaryRecord),
    KillCall(KillCallRecord),
    Oom(OomRecord),
    /// Bytes written to stderr (one write's, or a whole process's kernel
    /// tail in order): aggregated by the session, not logged as is.
    Stderr {
        ktime: u64,
        task: TaskId,
        count: u64,
        data: Vec<u8>,
        /// Written while fd 2 was /dev/null (`STDERR_TO_NULL`).
        to_null: bool,
    },
    /// A process that was running before the tracer (task iterator).
    Existing(ExistingRecord),
    /// One test runner's variable of an exec's environment (`NAME=value`),
    /// just before that exec's record, stamped as it is: the session's
    /// enrichment stage holds it for the exec, never logged as is.
    ExecEnv {
        ktime: u64,
        task: TaskId,
        text: Vec<u8>,
    },
    /// A test mark (a write to `MARK_FD`).
    TestMark {
        ktime: u64,
        task: TaskId,
        count: u64,
        data: Vec<u8>,
    },
}

fn copy<T: aya::Pod>(bytes: &[u8], what: &'static str) -> Result<T, DecodeError> {
    let need = size_of::<T>();
    if bytes.len() < need {
        return Err(DecodeError::TooShort {
            what,
            need,
            got: bytes.len(),
        });
    }
    // SAFETY: length checked above; T: aya::Pod is valid for any bytes.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

pub fn decode(bytes: &[u8]) -> Result<Wire, DecodeError> {
    let hdr: RecordHeader = copy(bytes, "a record header")?;
    Ok(
        match RecordKind::try_from(hdr.kind).map_err(DecodeError::UnknownKind)? {
            RecordKind::Fork => Wire::Fork(copy(bytes, "a fork record")?),
            RecordKind::Exec => decode_exec(bytes)?,
            RecordKind::ExecEnv => decode_exec_env(bytes)?,
            RecordKind::Exit => Wire::Exit(copy(bytes, "an exit record")?),
            RecordKind::Signal => Wire::Signal(copy(bytes, "a signal record")?),
            RecordKind::SignalSummary => {
                Wire::SignalSummary(copy(bytes, "a signal summary record")?)
            }
            RecordKind::KillCall => Wire::KillCall(copy(bytes, "a kill-call record")?),
            RecordKind::OomVictim => Wire::Oom(copy(bytes, "an OOM record")?),
            RecordKind::Stderr => decode_stderr(bytes)?,
            RecordKind::TestMark => match decode_stderr(bytes)? {
                Wire::Stderr {
                    ktime,
                    task,
                    count,
                    data,
                    ..
                } => Wire::TestMark {
                    ktime,
                    task,
                    count,
                    data,
                },
                other => other,
            },
            RecordKind::StderrTail => decode_tail(bytes)?,
            RecordKind::Existing => Wire::Existing(copy(bytes, "an existing-process record")?),
            // Only ever in the crash ring, read by `decode_crash`.
            RecordKind::Crash => return Err(DecodeError::UnknownKind(hdr.kind)),
        },
    )
}

/// A crash-ring record (`CRASHES`): boxed, ~19 KiB.
pub fn decode_crash(bytes: &[u8]) -> Result<Box<tracer_common::CrashRecord>, DecodeError> {
    let hdr: RecordHeader = copy(bytes, "a record header")?;
    if RecordKind::try_from(hdr.kind) != Ok(RecordKind::Crash) {
        return Err(DecodeError::UnknownKind(hdr.kind));
    }
    let need = size_of::<tracer_common::CrashRecord>();
    if bytes.len() < need {
        return Err(DecodeError::TooShort {
            what: "a crash record",
            need,
            got: bytes.len(),
        });
    }
    // SAFETY: CrashRecord: aya::Pod, valid for any bytes, zeros included;
    // exactly size_of::<CrashRecord>() bytes (checked above) are copied
    // into the box.
    unsafe {
        let mut rec = Box::<tracer_common::CrashRecord>::new_zeroed();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), rec.as_mut_ptr().cast::<u8>(), need);
        Ok(rec.assume_init())
    }
}

/// A record cut to its first `header` bytes and the `len_of(rec)` bytes of
/// its trailing array (of `cap` bytes) that follow: read into a zeroed whole
/// one, the declared length checked against what is there.
fn copy_cut<T: aya::Pod>(
    bytes: &[u8],
    header: usize,
    cap: usize,
    what: [&'static str; 2],
    len_of: fn(&T) -> usize,
) -> Result<(T, usize), DecodeError> {
    let too_short = |what, need| DecodeError::TooShort {
        what,
        need,
        got: bytes.len(),
    };
    if bytes.len() < header {
        return Err(too_short(what[0], header));
    }
    let n = bytes.len().min(size_of::<T>());
    // SAFETY: T: aya::Pod is valid for any bytes, zeros included; at most
    // size_of::<T>() bytes are copied into it.
    let rec: T = unsafe {
        let mut rec = std::mem::zeroed::<T>();
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&raw mut rec).cast::<u8>(), n);
        rec
    };
    let len = len_of(&rec);
    if len > cap || header + len > bytes.len() {
        return Err(too_short(what[1], header + len));
    }
    Ok((rec, len))
}

/// Exec records arrive cut to the argv captured.
fn decode_exec(bytes: &[u8]) -> Result<Wire, DecodeError> {
    let (rec, _) = copy_cut::<ExecRecord>(
        bytes,
        EXEC_HEADER_LEN,
        tracer_common::ARGV_LEN,
        ["an exec record", "its argv"],
        |r| r.argv_len as usize,
    )?;
    Ok(Wire::Exec(Box::new(rec)))
}

/// Exec-env records arrive cut to the variable's text.
fn decode_exec_env(bytes: &[u8]) -> Result<Wire, DecodeError> {
    let (rec, len) = copy_cut::<ExecEnvRecord>(
        bytes,
        EXEC_ENV_HEADER_LEN,
        tracer_common::RUNNER_VAR_LEN,
        ["an exec-env record", "its variable"],
        |r| r.len as usize,
    )?;
    Ok(Wire::ExecEnv {
        ktime: rec.hdr.ktime_ns,
        task: rec.task,
        text: rec.text[..len].to_vec(),
    })
}

/// Stderr records arrive cut to the bytes captured.
fn decode_stderr(bytes: &[u8]) -> Result<Wire, DecodeError> {
    let (rec, len) = copy_cut::<StderrRecord>(
        bytes,
        STDERR_HEADER_LEN,
        tracer_common::STDERR_CHUNK,
        ["a stderr record", "its stderr bytes"],
        |r| r.len as usize,
    )?;
    Ok(Wire::Stderr {
        ktime: rec.hdr.ktime_ns,
        task: rec.task,
        count: rec.count,
        data: rec.data[..len].to_vec(),
        to_null: rec.flags & tracer_common::STDERR_TO_NULL != 0,
    })
}

/// A process's kernel tail, cut to the bytes it holds; a ring once more than
/// `TAIL_CAP` bytes went in, put back in order here.
fn decode_tail(bytes: &[u8]) -> Result<Wire, DecodeError> {
    let too_short = |what, need| DecodeError::TooShort {
        what,
        need,
        got: bytes.len(),
    };
    if bytes.len() < STDERR_TAIL_HEADER_LEN {
        return Err(too_short("a stderr tail record", STDERR_TAIL_HEADER_LEN));
    }
    let mut full = vec![0u8; size_of::<StderrTail>()];
    let n = bytes.len().min(full.len());
    full[..n].copy_from_slice(&bytes[..n]);
    let rec: Box<StderrTail> = Box::new(copy(&full, "a stderr tail record")?);
    let len = rec.len as usize;
    let mut data = match tail_in_order(&rec) {
        d if d.len() == len && STDERR_TAIL_HEADER_LEN + len <= bytes.len() => d,
        _ => return Err(too_short("its stderr tail", STDERR_TAIL_HEADER_LEN + len)),
    };
    // A write whose buffer the kernel could not read zeroed the ring's
    // oldest bytes it was to overwrite (tracer-ebpf/src/stderr.rs, `append`;
    // counted as an unreadable read): they are no words.
    let zeroed = data.iter().take_while(|&&b| b == 0).count();
    data.drain(..zeroed);
    Ok(Wire::Stderr {
        ktime: rec.hdr.ktime_ns,
        task: rec.task,
        // Threads racing on the counters may lose an increment: never
        // claim fewer bytes asked than held.
        count: rec.total.max(rec.written),
        data,
        to_null: rec.flags & tracer_common::STDERR_TO_NULL != 0,
    })
}

/// The bytes of a kernel tail, oldest first. A ring that wrapped is full:
/// its oldest byte is where the next would go.
pub fn tail_in_order(rec: &StderrTail) -> Vec<u8> {
    let held = rec.written.min(TAIL_CAP as u64) as usize;
    let oldest = match rec.written > TAIL_CAP as u64 {
        true => (rec.written % TAIL_CAP as u64) as usize,
        false => 0,
    };
    let mut data = Vec::with_capacity(held);
    data.extend_from_slice(&rec.data[oldest..held]);
    data.extend_from_slice(&rec.data[..oldest]);
    data
}

/// Text up to the first NUL, lossily decoded.
pub fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The process `id` is a thread of.
fn proc_key(id: &TaskId) -> crate::eventlog::ProcKey {
    crate::eventlog::ProcKey {
        pid: id.tgid,
        start: id.start_ns,
    }
}

pub fn task(id: &TaskId, comm: &[u8]) -> Task {
    Task {
        pid: id.tgid,
        tid: id.tid,
        start: id.start_ns,
        comm: Some(cstr(comm)),
    }
}

pub fn syscall_name(nr: u32) -> &'static str {
    KillSyscall::try_from(nr).map_or("unknown", KillSyscall::name)
}

/// signal_generate's `result` (enum trace_signal_result).
fn result_name(r: i32) -> String {
    match r {
        0 => "delivered",
        1 => "ignored",
        2 => "already_pending",
        3 => "overflow_fail",
        4 => "lose_info",
        _ => return format!("result_{r}"),
    }
    .to_string()
}

/// The wire's "below the view" pid, if there is one.
pub fn ns_pid(n: &tracer_common::NsPid) -> Option<NsPid> {
    (n.level > 0).then_some(NsPid {
        pid: n.pid,
        level: n.level,
        inum: n.ns_inum,
    })
}

impl Wire {
    pub fn ktime(&self) -> u64 {
        match self {
            Wire::Fork(r) => r.hdr.ktime_ns,
            Wire::Exec(r) => r.hdr.ktime_ns,
            Wire::Exit(r) => r.hdr.ktime_ns,
            Wire::Signal(r) => r.hdr.ktime_ns,
            Wire::SignalSummary(r) => r.last_ns,
            Wire::KillCall(r) => r.hdr.ktime_ns,
            Wire::Oom(r) => r.hdr.ktime_ns,
            Wire::Stderr { ktime, .. }
            | Wire::TestMark { ktime, .. }
            | Wire::ExecEnv { ktime, .. } => *ktime,
            Wire::Existing(r) => r.hdr.ktime_ns,
        }
    }

    /// The process whose last thread this exit record ends, if it is one.
    pub fn group_exit(&self) -> Option<crate::eventlog::ProcKey> {
        match self {
            Wire::Exit(r) if r.flags & EXIT_GROUP_DEAD != 0 => Some(proc_key(&r.task)),
            _ => None,
        }
    }

    /// The sending process of a kill call that opened a fold in the kernel
    /// (kill_folds.rs in tracer-ebpf): its later calls of the kind are
    /// counted there, to be taken at its exit.
    pub fn opened_fold(&self) -> Option<crate::eventlog::ProcKey> {
        match self {
            Wire::KillCall(r) if r.opened_fold != 0 => Some(proc_key(&r.sender)),
            _ => None,
        }
    }

    /// The log record for this wire record (`None` for stderr bytes, which
    /// the session aggregates into `last_words`).
    pub fn into_record(self, at: Stamp) -> Option<Record> {
        Some(match self {
            Wire::Stderr { .. } | Wire::Existing(_) | Wire::ExecEnv { .. } => return None,
            Wire::TestMark {
                task: t,
                count,
                data,
                ..
            } => Record::TestMark(crate::eventlog::TestMark {
                at,
                // No comm: the mark record carries none, and an empty one
                // would read as a rename of the thread.
                task: Task {
                    comm: None,
                    ..task(&t, &[])
                },
                text: String::from_utf8_lossy(&data[..data.len().min(tracer_common::MARK_LEN)])
                    .into_owned(),
                bytes: count,
            }),
            Wire::Fork(r) => Record::Fork(Fork {
                at,
                parent: task(&r.parent, &r.comm),
                child: Task {
                    pid: r.child.tgid,
                    tid: r.child.tid,
                    start: r.child.start_ns,
                    comm: Some(cstr(&r.comm)),
                },
                thread: r.flags & FORK_IS_THREAD != 0,
                child_ns: ns_pid(&r.child_ns),
            }),
            Wire::Exec(r) => {
                let len = (r.argv_len as usize).min(r.argv.len());
                Record::Exec(Exec {
                    at,
                    task: task(&r.task, &r.comm),
                    old_tid: (r.old_tid != r.task.tid).then_some(r.old_tid),
                    filename: cstr(&r.filename),
                    argv: split_argv(&r.argv[..len]),
                    argv_truncated: r.args_size > r.argv_len,
                    test_env: Default::default(),
                })
            }
            Wire::Exit(r) => Record::Exit(Exit {
                at,
                task: task(&r.task, &r.comm),
                exit_code: r.exit_code,
                status: ExitStatus::from_wait_status(r.exit_code),
                group_dead: r.flags & EXIT_GROUP_DEAD != 0,
            }),
            Wire::Signal(r) => signal(&r, at),
            Wire::SignalSummary(r) => Record::SignalSummary(SignalSummary {
                at,
                sender: task(&r.sender, &r.sender_comm),
                target: task(&r.target, &r.target_comm),
                sig: r.sig,
                sig_name: signal_name(r.sig),
                count: u64::from(r.count),
                first_t: r.first_ns,
                last_t: r.last_ns,
            }),
            Wire::KillCall(r) => kill_call(&r, at),
            Wire::Oom(r) => oom(&r, at),
        })
    }
}

/// A signal's record: the two tasks, the signal and its code, and the
/// kill-family call that sent it, when one did.
fn signal(r: &SignalRecord, at: Stamp) -> Record {
    Record::Signal(Signal {
        at,
        sender: task(&r.sender, &r.sender_comm),
        target: task(&r.target, &r.target_comm),
        sig: r.sig,
        sig_name: signal_name(r.sig),
        code: r.code,
        code_name: si_code_name(r.sig, r.code),
        errno: r.errno,
        group: r.group != 0,
        result: result_name(r.result),
        sender_argv: None,
        sender_argv_truncated: false,
        seccomp_syscall: (r.seccomp_seen != 0).then_some(i64::from(r.seccomp_nr)),
        call: (r.syscall != 0).then(|| CallRef {
            id: r.call_id,
            syscall: syscall_name(r.syscall).into(),
            target_arg: r.target_arg,
        }),
    })
}

/// A kill-family call's record (one call, or calls the kernel counted).
fn kill_call(r: &KillCallRecord, at: Stamp) -> Record {
    let has_tid = matches!(
        KillSyscall::try_from(r.syscall),
        Ok(KillSyscall::Tgkill | KillSyscall::RtTgsigqueueinfo)
    );
    Record::KillCall(KillCall {
        at,
        sender: task(&r.sender, &r.comm),
        syscall: syscall_name(r.syscall).into(),
        sig: r.sig,
        sig_name: if r.sig == 0 {
            "0 (probe)".into()
        } else {
            signal_name(r.sig)
        },
        target_arg: r.target_arg,
        tid_arg: has_tid.then_some(r.tid_arg),
        ret: r.ret,
        // checked: a hostile or corrupt record may carry i64::MIN (found by fuzzing).
        errno: (r.ret < 0)
            .then(|| r.ret.checked_neg().map(errno_name))
            .flatten(),
        call_id: r.call_id,
        deliveries: r.deliveries,
        // A record of calls counted in the kernel: how many,
        // and when the first was.
        count: r.count.max(1),
        first_t: (r.count > 1).then_some(r.first_ns),
    })
}

/// An OOM kill's record: what the kernel said of the victim's memory and
/// its memory cgroup, each part when present.
fn oom(r: &OomRecord, at: Stamp) -> Record {
    Record::Oom(Oom {
        at,
        trigger: task(&r.trigger, &r.trigger_comm),
        victim_tid: r.victim_tid,
        rss: (r.flags & OOM_HAS_RSS != 0).then_some(OomRss {
            total_vm_kb: r.total_vm_kb,
            anon_rss_kb: r.anon_rss_kb,
            file_rss_kb: r.file_rss_kb,
            shmem_rss_kb: r.shmem_rss_kb,
            pgtables_kb: r.pgtables_kb,
        }),
        oom_score_adj: (r.flags & OOM_HAS_SCORE_ADJ != 0).then_some(r.oom_score_adj),
        memcg: (r.flags & OOM_HAS_MEMCG != 0).then(|| Memcg {
            id: r.memcg_id,
            name: cstr(&r.memcg_name),
            path: None,
            limit_bytes: None,
            oom_group: None,
        }),
    })
}

#[cfg(test)]
mod tests;
