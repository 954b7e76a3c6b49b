//! Maps, load-time globals, and loss accounting.
use aya_ebpf::{
    bindings::{BPF_RB_AVAIL_DATA, BPF_RB_FORCE_WAKEUP, BPF_RB_NO_WAKEUP, BPF_RB_RING_SIZE},
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    Global,
};
use tracer_common::{
    DropReason, ExecEnvRecord, ExecRecord, KernelOffsets, KillFolds, RuntimeConfig, SignalCounts,
    StderrRecord, StderrTail, TaskId, ARGV_LEN, COMM_LEN, DROP_REASONS, TAIL_CAP, WAKE_BATCH_NS,
};

use crate::probe::boot_ns;

// Load-time globals: `.rodata`, which user space overrides by name before the
// load (`capture/loader.rs`) and the kernel freezes, so the verifier knows
// each value. Scalars are `aya_ebpf::Global`s, whose `load` is a volatile
// read the compiler cannot fold the default into. The two struct globals
// (`OFFSETS`, `KILL_ABI`) are plain statics read one field at a time with
// [`global_field`]: `Global::load` copies the whole value, and
// `KernelOffsets` (44 offsets, 176 bytes) would take a third of a program's
// 512-byte stack on every read of one offset.

/// Offsets resolved by user space from the running kernel's BTF.
#[unsafe(no_mangle)]
pub(crate) static OFFSETS: KernelOffsets = KernelOffsets::NONE;

/// `*dst = *src` in 8-byte volatile words. A plain assignment of a record
/// this size became a call to compiler_builtins' `memmove`, which in BPF is
/// a loop of one-byte loads and stores: 112 turns for a `KillCallRecord`,
/// on every kill call the kernel folds (a self-signal storm's every one).
///
/// # Safety
///
/// `dst` and `src` valid, 8-byte aligned and not overlapping; `src` wholly
/// initialised (`T` without padding, as every record and map value is).
#[inline(always)]
pub(crate) unsafe fn copy_words<T: Copy>(dst: *mut T, src: *const T) {
    const { assert!(core::mem::size_of::<T>().is_multiple_of(8)) };
    for i in 0..core::mem::size_of::<T>() / 8 {
        // SAFETY: word `i` lies inside both values (the caller's contract,
        // and `i` is below their size in words); volatile keeps each a word
        // access LLVM cannot turn back into a `memmove` call.
        unsafe {
            let w = core::ptr::read_volatile((src as *const u64).add(i));
            core::ptr::write_volatile((dst as *mut u64).add(i), w);
        }
    }
}

/// One field of a struct global, read volatilely so the compiler cannot fold
/// the default (`NONE`) in.
#[inline(always)]
pub(crate) fn global_field<G, T: Copy>(global: &'static G, f: fn(&G) -> &T) -> T {
    // SAFETY: `f` returns a reference into a `'static` value, so the pointer
    // is valid, aligned and initialised for the read; volatile only stops the
    // compiler from assuming the value it was compiled with.
    unsafe { core::ptr::read_volatile(f(global)) }
}

/// The tracer's own tgid: never traced.
#[unsafe(no_mangle)]
pub(crate) static TRACER_TGID: Global<u32> = Global::new(0);

/// `STDERR_CHUNK - 1`, read volatilely: an AND the compiler cannot drop,
/// on a value the verifier knows (frozen .rodata). Older verifiers (5.10,
/// 6.1) need the bound on the very register passed as a size.
#[unsafe(no_mangle)]
pub(crate) static SIZE_MASK: Global<u64> = Global::new(tracer_common::STDERR_CHUNK as u64 - 1);

#[inline(always)]
pub(crate) fn size_mask() -> u64 {
    SIZE_MASK.load()
}

/// `TAIL_CAP - 1`: the same volatile-mask trick for offsets into, and
/// copy sizes of, the per-process stderr tails.
#[unsafe(no_mangle)]
pub(crate) static TAIL_MASK: Global<u64> = Global::new(TAIL_CAP as u64 - 1);

#[inline(always)]
pub(crate) fn tail_mask() -> u64 {
    TAIL_MASK.load()
}

/// Non-zero: one ring record per stderr write (the tail is kept in user
/// space), for `--last-words-bytes` beyond what a kernel tail holds.
#[unsafe(no_mangle)]
pub(crate) static STDERR_PER_WRITE: Global<u32> = Global::new(0);

#[inline(always)]
pub(crate) fn stderr_per_write() -> bool {
    STDERR_PER_WRITE.load() != 0
}

/// One offset of the running kernel's (`OFFSETS`).
#[inline(always)]
pub(crate) fn off(f: fn(&KernelOffsets) -> &u32) -> u32 {
    global_field(&OFFSETS, f)
}

#[inline(always)]
pub(crate) fn tracer_tgid() -> u32 {
    TRACER_TGID.load()
}

/// Byte size is overridden from user space (`--ring-buffer-size`).
#[map]
pub(crate) static EVENTS: RingBuf = RingBuf::with_byte_size(16 * 1024 * 1024, 0);

/// When the reader was last woken on purpose (`bpf_ktime_get_boot_ns`).
/// Shared by every CPU without a lock: a lost update only moves one
/// wake-up, never loses a record.
#[map]
pub(crate) static LAST_WAKE: Array<u64> = Array::with_max_entries(1, 0);

/// Unread bytes that wake the reader whatever the time: small, so a slow
/// reader (a loaded or emulated machine) starts draining a burst early —
/// with a quarter of the ring, 5.10 under TCG lost records of a fork burst
/// into a 256 KiB ring (vm-test). At 16 KiB a 200k-signal storm still
/// switches to the reader ~600 times instead of 200k.
const WAKE_BYTES: u64 = 16 * 1024;

/// Ring flags for a record of a hot kind (kill calls, forks, execs, exits,
/// stderr) of `size` bytes that `reserve` already put in the ring (so the
/// unread data counts it): see [`batched_output`].
#[inline(always)]
pub(crate) fn batched_submit(size: usize) -> u64 {
    let after = EVENTS.query(BPF_RB_AVAIL_DATA as u64);
    batched(after.saturating_sub(size as u64), after)
}

/// Ring flags for `output` of a hot record of `size` bytes. The reader is
/// woken at most once per `WAKE_BATCH_NS`, and at once when this record
/// takes the unread data across `WAKE_BYTES` (at most 1/64 of the ring).
/// Only the crossing wakes: waking again for every record above the mark,
/// before the reader has drained, woke it ~4 times per ms in a fork storm
/// of 4 KiB exec records (bpftrace on sched_wakeup: ~3000 irq_work
/// wake-ups in 0.75 s), each a loop turn of tracer's on a busy CPU.
/// Waking per record cost a context switch per record: tracer's CPU in a
/// 200k-signal storm 0.78–1.03 s, batched 0.28–0.38 s (that storm's wall
/// time on a 2-vCPU guest got worse: BENCHMARKS.md). User space drains
/// again `2 * WAKE_BATCH_NS` after each drain that found records, so a
/// record never waits longer, and a crossing lost to a race between CPUs
/// only waits for the next period.
#[inline(always)]
pub(crate) fn batched_output(size: usize) -> u64 {
    let before = EVENTS.query(BPF_RB_AVAIL_DATA as u64);
    batched(before, before + size as u64)
}

#[inline(always)]
fn batched(before: u64, after: u64) -> u64 {
    let now = boot_ns();
    let Some(last) = LAST_WAKE.get_ptr_mut(0) else {
        return BPF_RB_FORCE_WAKEUP as u64;
    };
    let ring = EVENTS.query(BPF_RB_RING_SIZE as u64);
    let limit = if ring / 64 < WAKE_BYTES {
        ring / 64
    } else {
        WAKE_BYTES
    };
    let crossed = before < limit && after >= limit;
    // SAFETY: `last` is a non-null pointer to the array's only u64 (the
    // verifier checks the lookup's null test and the access size). Another
    // CPU may write it at once: a torn or lost update moves one wake-up.
    unsafe {
        if crossed || now.wrapping_sub(*last) >= WAKE_BATCH_NS {
            *last = now;
            return BPF_RB_FORCE_WAKEUP as u64;
        }
    }
    BPF_RB_NO_WAKEUP as u64
}

/// Per-CPU staging area of exec records (cut to their argv when output),
/// with `ARGV_LEN` bytes of slack so `argv_mask` bounds the size for every
/// verifier.
#[repr(C)]
pub(crate) struct ExecScratch {
    pub rec: ExecRecord,
    pub slack: [u8; ARGV_LEN],
}

#[map]
pub(crate) static EXEC_SCRATCH: PerCpuArray<ExecScratch> = PerCpuArray::with_max_entries(1, 0);

/// `2 * ARGV_LEN - 1`: the volatile-mask trick of `size_mask` for an exec
/// record's argv length (at most `ARGV_LEN`, so the mask never cuts it).
#[unsafe(no_mangle)]
pub(crate) static ARGV_MASK: Global<u64> = Global::new(2 * ARGV_LEN as u64 - 1);

#[inline(always)]
pub(crate) fn argv_mask() -> u64 {
    ARGV_MASK.load()
}

/// Per-CPU staging area of exec-env records (cut to their text when
/// output), with slack so `env_mask` bounds the size for every verifier.
#[repr(C)]
pub(crate) struct ExecEnvScratch {
    pub rec: ExecEnvRecord,
    pub slack: [u8; 1024],
    /// The runner variables of this exec found so far (their strings'
    /// addresses), and how many.
    pub found: [u64; 8],
    pub found_n: u64,
    /// The new image's environment strings, read in one piece where
    /// `bpf_loop` walks them (`exec_env::copy_env`): from user address
    /// `env_from`, `env_len` bytes of `env` (0: none; the slack lets a
    /// word be loaded at any offset below `ENV_BUF`).
    pub env_from: u64,
    pub env_len: u64,
    pub env: [u8; ENV_BUF + 8],
}

/// Bytes of a new image's environment read in one piece: a CI job's is a
/// few KiB (GitHub Actions: ~10 KiB). A variable past them is read by
/// itself. A power of two (offsets into `env` are masked with it); the
/// scratch stays below the kernel's 32 KiB per-CPU value limit.
pub(crate) const ENV_BUF: usize = 16 << 10;

/// The job's environment is copied into `env` (a job's secrets with it) and
/// wiped before the program returns (`exec_env::wipe_env`): root can read
/// any map by id (`BPF_F_WRONLY` binds only the fd that created it), so
/// nothing may stay in it (`tests/kernel/security/env_residue.rs`).
#[map]
pub(crate) static EXEC_ENV_SCRATCH: PerCpuArray<ExecEnvScratch> =
    PerCpuArray::with_max_entries(1, 0);

/// `2047`: the volatile-mask trick of `size_mask` for an exec-env record's
/// text length (at most `RUNNER_VAR_LEN`, so the mask never cuts it; the
/// record and its slack hold 2047 bytes past the header).
#[unsafe(no_mangle)]
pub(crate) static ENV_MASK: Global<u64> = Global::new(2047);

#[inline(always)]
pub(crate) fn env_mask() -> u64 {
    ENV_MASK.load()
}

/// Ring flags for a record user space must see at once: a signal from
/// outside the run (its sender's argv is read while it lives), an OOM kill.
#[inline(always)]
pub(crate) fn wake_now() -> u64 {
    if let Some(last) = LAST_WAKE.get_ptr_mut(0) {
        // SAFETY: as in `batched`: a non-null pointer to the array's u64.
        unsafe { *last = boot_ns() };
    }
    BPF_RB_FORCE_WAKEUP as u64
}

/// tgid -> group leader start_boottime of every process in scope. The start
/// time guards against pid reuse when an exit was missed.
#[map]
pub(crate) static TRACKED: HashMap<u32, u64> = HashMap::with_max_entries(65536, 0);

/// Kill-family calls, by tid: the call in flight (`call_id` not 0) or the
/// thread's last one, done (`call_id` 0). A thread's entry is written in
/// place by its next call and removed at its exit (`process::on_exit`, for
/// every thread of the machine): an insert and a delete per call were most
/// of what the kill family's raw_syscalls programs cost (issue 37).
#[map]
pub(crate) static INFLIGHT: HashMap<u32, Inflight> = HashMap::with_max_entries(8192, 0);

/// Per-CPU staging area: a stderr record is too big for the BPF stack, and
/// only the captured bytes go into the ring buffer.
///
/// This and the other stderr staging maps have one slot per stderr program
/// (`StderrSyscall as u32`: write, writev). fentry programs run with only
/// migration disabled, so on a fully preemptible kernel a write program
/// preempted mid-copy could see another task's writev program reuse a
/// shared slot on the same CPU and mix its bytes in. A program never nests
/// with itself (the kernel skips the second run), so a slot each is enough.
#[map]
pub(crate) static STDERR_SCRATCH: PerCpuArray<StderrRecord> =
    PerCpuArray::with_max_entries(STDERR_SLOTS, 0);

const STDERR_SLOTS: u32 = tracer_common::STDERR_SYSCALLS.len() as u32;

/// tgid -> the end of what the process wrote to fd 2 (`task.start_ns`
/// checked), emitted at its exit. Preallocated (run-time allocation is
/// unsafe in tracing programs); when full, a process's writes fall back to
/// one ring record each, so nothing is lost.
#[map]
pub(crate) static STDERR_TAILS: HashMap<u32, StderrTail> = HashMap::with_max_entries(1024, 0);

/// A zeroed tail to insert from (too big for the BPF stack). Only its
/// header fields are ever written. A slot per stderr program (above).
#[map]
pub(crate) static TAIL_INIT: PerCpuArray<StderrTail> =
    PerCpuArray::with_max_entries(STDERR_SLOTS, 0);

/// Non-zero (`--all-signals`): every signal delivery is logged, none counted.
#[unsafe(no_mangle)]
pub(crate) static ALL_SIGNALS: Global<u32> = Global::new(0);

#[inline(always)]
pub(crate) fn all_signals() -> bool {
    ALL_SIGNALS.load() != 0
}

/// Receiving tgid -> deliveries being counted instead of logged (see
/// signal_agg.rs). When full, deliveries are logged one by one: no loss.
#[map]
pub(crate) static SIGNAL_COUNTS: HashMap<u32, SignalCounts> = HashMap::with_max_entries(4096, 0);

/// Zeroed value to insert from (too big for the BPF stack).
#[map]
pub(crate) static SIGNAL_COUNTS_INIT: PerCpuArray<SignalCounts> =
    PerCpuArray::with_max_entries(1, 0);

#[map]
pub(crate) static CONFIG: Array<RuntimeConfig> = Array::with_max_entries(1, 0);

#[map]
pub(crate) static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_REASONS, 0);

/// Each marking thread's window: (start ns, marks in it). LRU: a thread
/// that marked once and left costs nothing for long.
#[map]
pub(crate) static MARK_RATES: aya_ebpf::maps::LruHashMap<u32, [u64; 2]> =
    aya_ebpf::maps::LruHashMap::with_max_entries(8192, 0);

#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Inflight {
    /// The call's entry time (boot ns); 0: no call in flight.
    pub call_id: u64,
    pub target_arg: i64,
    pub tid_arg: i64,
    pub syscall: u32,
    pub sig: i32,
    pub deliveries: u32,
    /// Of `deliveries`, those logged one by one (not counted by
    /// signal_agg.rs): a call none of whose deliveries was logged is folded
    /// (kill_folds.rs).
    pub logged: u32,
    /// The calling thread and its name as the call's first delivery read
    /// them (`sender_known` 1): the call's exit takes them from here, not
    /// by three more probe reads (a self-signal storm's every call).
    pub sender_known: u32,
    pub sender: TaskId,
    pub sender_comm: [u8; COMM_LEN],
}

#[inline(always)]
pub(crate) fn count_drop(reason: DropReason) {
    count_drop_unlogged(reason);
    if !matches!(reason, DropReason::RingBufFull) {
        crate::diag::map_full(reason);
    }
}

/// Counted, never logged: for a program that tail-calls, where aya-log's
/// call (a bpf-to-bpf call) must not be (see `raw_sys_enter`).
#[inline(always)]
pub(crate) fn count_drop_unlogged(reason: DropReason) {
    if let Some(p) = DROPS.get_ptr_mut(reason as u32) {
        // SAFETY: a non-null pointer to this CPU's u64 (the map checked the
        // index, the verifier the null test and the size). Not atomic: a
        // program preempted between load and store may lose one count.
        unsafe { *p += 1 };
    }
}

#[inline(always)]
pub(crate) fn config() -> RuntimeConfig {
    CONFIG.get(0).copied().unwrap_or_default()
}

/// The tracer's own pid namespace, `(level, inode)`: every pid is reported
/// as seen from it.
#[inline(always)]
pub(crate) fn view() -> (u32, u32) {
    let c = config();
    (c.view_level, c.view_ns_inum)
}

/// Is `(tgid, start_ns)` a process of the run?
#[inline(always)]
pub(crate) fn is_tracked(tgid: u32, start_ns: u64) -> bool {
    if config().scope_all != 0 {
        // 0: a process outside the tracer's pid namespace, never in scope.
        return tgid != 0 && tgid != tracer_tgid();
    }
    // SAFETY: `get` hands out a reference into the map's value, which another
    // CPU may update or delete meanwhile: the u64 is read at once, and the
    // element's memory stays valid while the program runs (preallocated,
    // freed after an RCU grace period); a reused element holds another
    // process's start time, which the compare rejects.
    match unsafe { TRACKED.get(&tgid) } {
        Some(s) => *s == start_ns,
        None => false,
    }
}

#[inline(always)]
pub(crate) fn track(tgid: u32, start_ns: u64) {
    if TRACKED.insert(&tgid, &start_ns, 0).is_err() {
        count_drop(DropReason::TrackedMapFull);
    }
}

#[inline(always)]
pub(crate) fn untrack(tgid: u32) {
    let _ = TRACKED.remove(&tgid);
}

/// Calling tgid -> identical kill-family calls being counted instead of
/// logged: failed ones that delivered nothing, and those whose every
/// delivery was counted (see kill_folds.rs). When full, calls are logged one
/// by one: no loss.
#[map]
pub(crate) static KILL_FOLDS: HashMap<u32, KillFolds> = HashMap::with_max_entries(4096, 0);

/// Zeroed value to insert from (too big for the BPF stack).
#[map]
pub(crate) static KILL_FOLDS_INIT: PerCpuArray<KillFolds> = PerCpuArray::with_max_entries(1, 0);
