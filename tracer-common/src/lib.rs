//! Wire records shared by the eBPF programs and user space.
//!
//! Every record is `#[repr(C)]`, starts with a [`RecordHeader`], has no
//! implicit padding (padding is spelled out so the kernel side zeroes it), and
//! is at most 8-byte aligned, as the ring buffer requires. User space never
//! transmutes ring-buffer bytes: it checks the length, copies with
//! `read_unaligned`, and converts the `kind` tag with `TryFrom`.
#![no_std]

pub mod signals;

pub const COMM_LEN: usize = 16;
/// Bytes of argv captured per exec (NUL-separated, as in /proc/PID/cmdline).
pub const ARGV_LEN: usize = 4096;
pub const PATH_LEN: usize = 256;
pub const CGROUP_NAME_LEN: usize = 64;

/// The kernel side wakes the reader at most once per this many ns for
/// records of hot kinds (`BPF_RB_NO_WAKEUP` otherwise); user space drains
/// again `2 * WAKE_BATCH_NS` after a drain that found records, so no record
/// waits in the ring longer than that.
pub const WAKE_BATCH_NS: u64 = 2_000_000;

/// What a record is. Stored as `u32` on the wire.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordKind {
    Fork = 1,
    Exec = 2,
    Exit = 3,
    Signal = 4,
    KillCall = 5,
    OomVictim = 6,
    Stderr = 7,
    Existing = 8,
    StderrTail = 9,
    SignalSummary = 10,
    Crash = 11,
    /// A test mark: a write(2) to [`MARK_FD`] (a `StderrRecord` of this kind).
    TestMark = 12,
    /// One test runner's variable of an exec's environment ([`ExecEnvRecord`]).
    ExecEnv = 13,
}

impl TryFrom<u32> for RecordKind {
    type Error = u32;
    fn try_from(v: u32) -> Result<Self, u32> {
        Ok(match v {
            1 => Self::Fork,
            2 => Self::Exec,
            3 => Self::Exit,
            4 => Self::Signal,
            5 => Self::KillCall,
            6 => Self::OomVictim,
            7 => Self::Stderr,
            8 => Self::Existing,
            9 => Self::StderrTail,
            10 => Self::SignalSummary,
            11 => Self::Crash,
            12 => Self::TestMark,
            13 => Self::ExecEnv,
            other => return Err(other),
        })
    }
}

mod crash;
mod kill;
mod offsets;
mod runner_env;
pub use crash::{
    CrashRecord, LoadedObject, StackBuildId, BUILD_ID_IP, BUILD_ID_VALID, CRASH_FRAMES,
    CRASH_HAS_REGS, CRASH_OBJECTS, CRASH_OBJECT_NAME, CRASH_PAGE, CRASH_PAGES,
    CRASH_REGS_FROM_STACK, CRASH_SIGNAL_MASK, CRASH_STACK_BYTES, KERNEL_THREAD_SIZE,
};
pub use runner_env::{
    runner_first, runner_head, ExecEnvRecord, EXEC_ENV_HEADER_LEN, EXEC_ENV_SCANNED, RUNNER_HEAD,
    RUNNER_SCAN_VARS, RUNNER_VALUE_MAX, RUNNER_VARS, RUNNER_VAR_LEN,
};
mod kill_folds;
mod signal_counts;
pub use kill::{
    KillAbi, KillSyscall, StderrSyscall, SyscallArch, KILL_SYSCALLS, REG_NONE, STDERR_SYSCALLS,
};
pub use kill_folds::{KillFoldSlot, KillFolds, KILL_FOLD_SLOTS};
pub use offsets::{KernelOffsets, OFFSET_NONE};
pub use signal_counts::{
    SignalCounts, SignalSlot, SignalSummaryRecord, SIGNAL_FIRST_INDIVIDUAL, SIGNAL_SLOTS,
};

/// Why an event could not be emitted. Index into the per-CPU `DROPS` array.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// `bpf_ringbuf_reserve` failed: user space did not keep up.
    RingBufFull = 0,
    /// The tracked-process map was full: a new process went untracked.
    TrackedMapFull = 1,
    /// The in-flight kill-call map was full: a call lost its syscall context.
    InflightMapFull = 2,
}
pub const DROP_REASONS: u32 = 3;

/// The fd a test mark is written to: above the kernel's `nr_open` ceiling
/// (at most 2147483584 on 64-bit: `sysctl fs.nr_open` can never reach
/// it), so no file can ever be open there, the write fails with EBADF in
/// the test, and the write hook sees its buffer, its tid and the time.
pub const MARK_FD: u64 = 0x7FFF_FFF0;
/// Bytes of a mark kept (the first): a test's file and name fit.
pub const MARK_LEN: usize = 512;
/// Marks a thread may send per window; past it they are counted, not sent
/// (a hostile test cannot fill the ring with them).
pub const MARK_RATE: u64 = 256;
pub const MARK_WINDOW_NS: u64 = 100_000_000;

impl DropReason {
    pub const ALL: [DropReason; DROP_REASONS as usize] = [
        Self::RingBufFull,
        Self::TrackedMapFull,
        Self::InflightMapFull,
    ];
    /// Its field in the log's `lost` object and its metric label (user
    /// space lists it with its own reasons: `eventlog::LossReason`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::RingBufFull => "ringbuf_full",
            Self::TrackedMapFull => "tracked_map_full",
            Self::InflightMapFull => "inflight_map_full",
        }
    }
    /// How the reports say it.
    pub const fn phrase(self) -> &'static str {
        match self {
            Self::RingBufFull => "ring buffer full",
            Self::TrackedMapFull => "tracked-process map full",
            Self::InflightMapFull => "in-flight kill map full",
        }
    }
}

/// A capture step that failed in a way that would otherwise lose data
/// silently. Index into the per-CPU `FAILS` array, kept apart from `DROPS` so
/// the trailer's per-CPU drop counters keep their shape.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailReason {
    /// `bpf_probe_read_user` failed: a stderr buffer or an argv was unreadable.
    UserRead = 0,
    /// A task in a lifecycle hook read as a fault or an impossible value (a
    /// wrong kernel offset): its event was lost.
    TaskRead = 1,
    /// The crash ring was full: a fatal signal's stack was not captured
    /// (the death is still logged; its certificate says the stack is missing).
    CrashRingFull = 2,
    /// A test mark past its thread's rate ([`MARK_RATE`] per
    /// [`MARK_WINDOW_NS`]): not sent. Counted here, not in `DROPS`: it costs
    /// a label, never an event, and the log's per-CPU drop columns keep
    /// their shape.
    MarkRate = 3,
}
pub const FAIL_REASONS: u32 = 4;

impl FailReason {
    pub const ALL: [FailReason; FAIL_REASONS as usize] = [
        Self::UserRead,
        Self::TaskRead,
        Self::CrashRingFull,
        Self::MarkRate,
    ];
    /// Its field in the log's `lost` object and its metric label.
    pub const fn name(self) -> &'static str {
        match self {
            Self::UserRead => "user_read_failed",
            Self::TaskRead => "task_read_failed",
            Self::CrashRingFull => "crash_ring_full",
            Self::MarkRate => "marks_dropped",
        }
    }
    /// How the reports say it.
    pub const fn phrase(self) -> &'static str {
        match self {
            Self::UserRead => "unreadable process memory",
            Self::TaskRead => "unreadable task (kernel offsets?)",
            Self::CrashRingFull => "crash stacks not captured (crash ring full)",
            Self::MarkRate => "test marks past their thread's rate",
        }
    }
}

/// A task as the kernel saw it. `start_ns` is the thread-group leader's
/// `start_boottime` (CLOCK_BOOTTIME ns), so `(tgid, start_ns)` names a process.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TaskId {
    pub tid: u32,
    pub tgid: u32,
    pub start_ns: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RecordHeader {
    pub kind: u32,
    /// Zero: keeps `ktime_ns` 8-aligned. It held the CPU the program ran
    /// on, which nothing read.
    pub _pad: u32,
    /// CLOCK_BOOTTIME ns when the event happened.
    pub ktime_ns: u64,
}

pub const FORK_IS_THREAD: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ForkRecord {
    pub hdr: RecordHeader,
    pub parent: TaskId,
    pub child: TaskId,
    pub comm: [u8; COMM_LEN],
    pub flags: u32,
    pub _pad: u32,
    /// The child's pid in its own pid namespace, when that is below the view.
    pub child_ns: NsPid,
}

/// A process's pid as it sees it, in its own pid namespace. Filled only when
/// that namespace is below the one the tracer reports pids in (the view);
/// `level == 0` means "same as the reported pid".
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NsPid {
    pub pid: u32,
    /// Depth of the namespace (the host's is 0).
    pub level: u32,
    /// Inode number of the namespace (`/proc/PID/ns/pid`).
    pub ns_inum: u32,
    pub _pad: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecRecord {
    pub hdr: RecordHeader,
    pub task: TaskId,
    /// The tid that called execve (differs from `task.tid` when a thread execs).
    pub old_tid: u32,
    /// Bytes of `argv` that are valid.
    pub argv_len: u32,
    /// Size of the whole argument area (`arg_end - arg_start`); larger than
    /// `argv_len` when argv was truncated.
    pub args_size: u32,
    /// [`EXEC_ENV_SCANNED`].
    pub flags: u32,
    pub comm: [u8; COMM_LEN],
    pub filename: [u8; PATH_LEN],
    pub argv: [u8; ARGV_LEN],
}

/// An exec record arrives cut to `EXEC_HEADER_LEN + argv_len` bytes: most
/// argvs are a few dozen bytes of the 4 KiB area, and a fork storm's ring
/// traffic was mostly zeros.
pub const EXEC_HEADER_LEN: usize = core::mem::offset_of!(ExecRecord, argv);

pub const EXIT_GROUP_DEAD: u32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExitRecord {
    pub hdr: RecordHeader,
    pub task: TaskId,
    pub comm: [u8; COMM_LEN],
    /// `task->exit_code`: the wait status the parent will see.
    pub exit_code: i32,
    pub flags: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SignalRecord {
    pub hdr: RecordHeader,
    /// The task that was running when the signal was generated.
    pub sender: TaskId,
    pub target: TaskId,
    pub sender_comm: [u8; COMM_LEN],
    pub target_comm: [u8; COMM_LEN],
    pub sig: i32,
    pub errno: i32,
    pub code: i32,
    pub group: i32,
    pub result: i32,
    /// [`KillSyscall`] the sender was inside, or 0.
    pub syscall: u32,
    /// Identifies the enclosing kill-family call (its entry time), or 0.
    pub call_id: u64,
    /// The call's first argument as given (pid, -pgid, tgid or pidfd).
    pub target_arg: i64,
    /// SIGSYS with SYS_SECCOMP: `si_syscall`, the syscall the filter
    /// forbade (valid when `seccomp_seen` is 1).
    pub seccomp_nr: i32,
    pub seccomp_seen: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KillCallRecord {
    pub hdr: RecordHeader,
    pub sender: TaskId,
    pub comm: [u8; COMM_LEN],
    pub syscall: u32,
    pub sig: i32,
    /// First argument as given: pid (negative = process group), tgid, or pidfd.
    pub target_arg: i64,
    /// tid argument of tgkill / rt_tgsigqueueinfo, else 0.
    pub tid_arg: i64,
    pub ret: i64,
    pub call_id: u64,
    /// signal_generate events the call produced that were emitted.
    pub deliveries: u32,
    /// 1: this call opened a fold (`kill_folds.rs`): the kernel counts its
    /// process's later calls of its kind, and user space takes them at that
    /// process's exit. 0 otherwise.
    pub opened_fold: u32,
    /// Identical calls this record stands for (`kill_folds.rs`):
    /// 1 for a call logged as it returned; N for N calls counted in the
    /// kernel, this record the last of them (its time, call_id, thread).
    pub count: u64,
    /// CLOCK_BOOTTIME ns of the first call `count` covers.
    pub first_ns: u64,
}

pub const OOM_HAS_RSS: u32 = 1;
pub const OOM_HAS_SCORE_ADJ: u32 = 2;
pub const OOM_HAS_MEMCG: u32 = 4;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct OomRecord {
    pub hdr: RecordHeader,
    /// The task whose allocation invoked the OOM killer (never the culprit).
    pub trigger: TaskId,
    pub trigger_comm: [u8; COMM_LEN],
    /// Victim task id (a tid) as the tracepoint gives it.
    pub victim_tid: u32,
    pub oom_score_adj: i32,
    pub total_vm_kb: u64,
    pub anon_rss_kb: u64,
    pub file_rss_kb: u64,
    pub shmem_rss_kb: u64,
    pub pgtables_kb: u64,
    /// kernfs id (inode number) of the trigger's memory cgroup.
    pub memcg_id: u64,
    pub memcg_name: [u8; CGROUP_NAME_LEN],
    pub flags: u32,
    pub _pad: u32,
}

/// A process that existed before the tracer started (from the task
/// iterator): its exact identity, so daemon mode can scope and name it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExistingRecord {
    pub hdr: RecordHeader,
    pub task: TaskId,
    /// The tgid of its parent (`real_parent`).
    pub ppid: u32,
    pub _pad: u32,
    pub comm: [u8; COMM_LEN],
    pub ns: NsPid,
}

/// Most bytes of one stderr write captured (its tail).
pub const STDERR_CHUNK: usize = 4096;

/// Bytes a traced process wrote to fd 2. Emitted with only `len` bytes of
/// `data` (the record is cut short on the wire): decoders accept any length
/// from `STDERR_HEADER_LEN` up.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StderrRecord {
    pub hdr: RecordHeader,
    pub task: TaskId,
    /// Bytes the write asked to write (the capture keeps the last `len`).
    pub count: u64,
    pub len: u32,
    /// `STDERR_TO_NULL` when fd 2 was /dev/null.
    pub flags: u32,
    pub data: [u8; STDERR_CHUNK],
}

/// The bytes were written to fd 2 while it was /dev/null: no one saw them.
pub const STDERR_TO_NULL: u32 = 1;

pub const STDERR_HEADER_LEN: usize = core::mem::size_of::<StderrRecord>() - STDERR_CHUNK;

/// Bytes of fd 2 kept per process in the kernel (a ring of bytes; a power
/// of two so positions wrap with a mask). Emitted once, at the process's
/// exit: O(processes) ring-buffer traffic instead of O(writes).
pub const TAIL_CAP: usize = 8192;
/// `data` is twice the ring for the verifier: a write lands in two copies
/// (up to the ring's end, then from its start), each proven in bounds only
/// as "offset < TAIL_CAP plus size < TAIL_CAP". Bytes past `TAIL_CAP` are
/// never written in fact, nor sent.
pub const TAIL_SLACK: usize = TAIL_CAP;

/// A process's stderr tail: the map value while it lives (keyed by tgid,
/// `task.start_ns` checked), and the wire record at its exit, cut to
/// `STDERR_TAIL_HEADER_LEN + len` bytes. `data` is a ring: once `written`
/// exceeds `TAIL_CAP`, the oldest byte is at `written % TAIL_CAP`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StderrTail {
    pub hdr: RecordHeader,
    pub task: TaskId,
    /// Bytes the writes asked to write, summed.
    pub total: u64,
    /// Bytes put into the ring, summed (the tail of each write).
    pub written: u64,
    /// Bytes of `data` on the wire: `min(written, TAIL_CAP)`.
    pub len: u32,
    /// `STDERR_TO_NULL` when the last write went to /dev/null.
    pub flags: u32,
    pub data: [u8; TAIL_CAP + TAIL_SLACK],
    /// What the process's fd 2 was at its last write, kept by the kernel
    /// beside its bytes (one map lookup a write, not two); after `data`, so
    /// never on the wire.
    pub fd2: Fd2Seen,
}

/// The kernel's answer to "where does fd 2 lead", kept per process with
/// what it was read from (tracer-ebpf's `fd2`): kernel addresses, compared
/// only, never sent to user space.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Fd2Seen {
    /// The process's start time: a reused pid's answer is stale.
    pub start_ns: u64,
    /// The `files_struct` it was read in, fd 2's `struct file *` then, and
    /// that file's inode.
    pub files: u64,
    pub file: u64,
    pub inode: u64,
    /// tracer-ebpf's `FD2_NULL`, `FD2_CHR`.
    pub kind: u32,
    pub _pad: u32,
}

/// The wire record is the header up to `data`, then `len` bytes of it.
pub const STDERR_TAIL_HEADER_LEN: usize = core::mem::offset_of!(StderrTail, data);

/// Runtime switches user space flips while programs run (`CONFIG` array, index 0).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RuntimeConfig {
    /// Non-zero: a new process forked by the tracer itself becomes tracked.
    /// Set only around spawning the wrapped command, so it is tracked before
    /// it runs a single instruction of its own.
    pub adopt_children: u32,
    /// Non-zero: every process on the machine is in scope (daemon `--all`).
    pub scope_all: u32,
    /// The pid namespace pids are reported in: the tracer's own. Level 0 (the
    /// host's) reads `task->pid`; deeper views read `task->thread_pid`.
    pub view_level: u32,
    pub view_ns_inum: u32,
}

/// `aya::Pod`: the records and map values user space reads as bytes. Each is
/// `#[repr(C)]` of integers and byte arrays only (no bool, enum, pointer or
/// reference: every bit pattern is a valid value), with explicit `_pad`
/// fields so there is no implicit padding (`no_padding` below checks it).
#[cfg(feature = "user")]
mod pod {
    use super::*;
    macro_rules! pod {
        ($($t:ty),* $(,)?) => {$(
            // SAFETY: see the module's doc: integers and byte arrays only,
            // repr(C), no implicit padding (tested).
            unsafe impl aya::Pod for $t {}
        )*};
    }
    pod!(
        KernelOffsets,
        RuntimeConfig,
        TaskId,
        StderrTail,
        SignalCounts,
        KillFolds,
        KillAbi,
        RecordHeader,
        NsPid,
        ForkRecord,
        ExecRecord,
        ExecEnvRecord,
        ExitRecord,
        SignalRecord,
        KillCallRecord,
        OomRecord,
        ExistingRecord,
        StderrRecord,
        SignalSummaryRecord,
        StackBuildId,
        LoadedObject,
        CrashRecord,
    );
}

#[cfg(test)]
mod no_padding {
    use core::mem::{size_of, size_of_val};

    use super::*;

    /// A record's size is the sum of its fields' (every field named: the
    /// destructuring does not compile if one is missing), so no byte of it
    /// is implicit padding.
    macro_rules! no_padding {
        ($($t:ident { $($f:ident),* $(,)? })*) => {$(
            // SAFETY: integers and byte arrays only: all-zero is valid.
            let v: $t = unsafe { core::mem::zeroed() };
            let $t { $($f),* } = v;
            assert_eq!(size_of::<$t>(), 0 $(+ size_of_val(&$f))*, stringify!($t));
        )*};
    }

    #[test]
    fn the_wire_records_have_no_implicit_padding() {
        no_padding! {
            TaskId { tid, tgid, start_ns }
            RecordHeader { kind, _pad, ktime_ns }
            ForkRecord { hdr, parent, child, comm, flags, _pad, child_ns }
            NsPid { pid, level, ns_inum, _pad }
            ExecRecord { hdr, task, old_tid, argv_len, args_size, flags, comm, filename, argv }
            ExecEnvRecord { hdr, task, len, _pad, text }
            ExitRecord { hdr, task, comm, exit_code, flags }
            SignalRecord { hdr, sender, target, sender_comm, target_comm, sig, errno, code, group,
                result, syscall, call_id, target_arg, seccomp_nr, seccomp_seen }
            KillCallRecord { hdr, sender, comm, syscall, sig, target_arg, tid_arg, ret, call_id,
                deliveries, opened_fold, count, first_ns }
            KillFoldSlot { used, _pad, rec }
            KillFolds { start_ns, slots }
            OomRecord { hdr, trigger, trigger_comm, victim_tid, oom_score_adj, total_vm_kb,
                anon_rss_kb, file_rss_kb, shmem_rss_kb, pgtables_kb, memcg_id, memcg_name, flags,
                _pad }
            ExistingRecord { hdr, task, ppid, _pad, comm, ns }
            StderrRecord { hdr, task, count, len, flags, data }
            StderrTail { hdr, task, total, written, len, flags, data, fd2 }
            Fd2Seen { start_ns, files, file, inode, kind, _pad }
            SignalSummaryRecord { hdr, sender, target, sender_comm, target_comm, sig, count,
                first_ns, last_ns }
            StackBuildId { status, build_id, offset_or_ip }
            CrashRecord { hdr, task, comm, sig, code, addr, regs, flags, pages_ok, stack_base,
                exe_start_code, exe_ino, exe_dev, _pad, ips_len, build_ids_len, objects_len, _pad2,
                objects, ips, build_ids, stack }
            LoadedObject { bias, name }
        }
    }
}
