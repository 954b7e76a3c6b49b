//! Maps, load-time globals, and loss accounting.
use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, PerCpuArray, RingBuf},
};
use tracer_common::{DropReason, KernelOffsets, RuntimeConfig, StderrRecord, DROP_REASONS};

/// Offsets resolved by user space from the running kernel's BTF.
#[unsafe(no_mangle)]
pub static OFFSETS: KernelOffsets = KernelOffsets::NONE;

/// The tracer's own tgid: never traced.
#[unsafe(no_mangle)]
pub static TRACER_TGID: u32 = 0;

/// `STDERR_CHUNK - 1`, read volatilely: an AND the compiler cannot drop,
/// on a value the verifier knows (frozen .rodata). Older verifiers (5.10,
/// 6.1) need the bound on the very register passed as a size.
#[unsafe(no_mangle)]
pub static SIZE_MASK: u64 = tracer_common::STDERR_CHUNK as u64 - 1;

#[inline(always)]
pub fn size_mask() -> u64 {
    unsafe { core::ptr::read_volatile(&SIZE_MASK) }
}

/// Read one offset so the compiler cannot fold the default in.
#[inline(always)]
pub fn off(f: fn(&KernelOffsets) -> &u32) -> u32 {
    unsafe { core::ptr::read_volatile(f(&OFFSETS)) }
}

#[inline(always)]
pub fn tracer_tgid() -> u32 {
    unsafe { core::ptr::read_volatile(&TRACER_TGID) }
}

/// Byte size is overridden from user space (`--ring-buffer-size`).
#[map]
pub static EVENTS: RingBuf = RingBuf::with_byte_size(16 * 1024 * 1024, 0);

/// tgid -> group leader start_boottime of every process in scope. The start
/// time guards against pid reuse when an exit was missed.
#[map]
pub static TRACKED: HashMap<u32, u64> = HashMap::with_max_entries(65536, 0);

/// Kill-family calls in flight, by tid.
#[map]
pub static INFLIGHT: HashMap<u32, Inflight> = HashMap::with_max_entries(8192, 0);

/// Per-CPU staging area: a stderr record is too big for the BPF stack, and
/// only the captured bytes go into the ring buffer.
#[map]
pub static STDERR_SCRATCH: PerCpuArray<StderrRecord> = PerCpuArray::with_max_entries(1, 0);

#[map]
pub static CONFIG: Array<RuntimeConfig> = Array::with_max_entries(1, 0);

#[map]
pub static DROPS: PerCpuArray<u64> = PerCpuArray::with_max_entries(DROP_REASONS, 0);

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Inflight {
    pub call_id: u64,
    pub target_arg: i64,
    pub tid_arg: i64,
    pub syscall: u32,
    pub sig: i32,
    pub deliveries: u32,
    pub _pad: u32,
}

#[inline(always)]
pub fn count_drop(reason: DropReason) {
    if let Some(p) = DROPS.get_ptr_mut(reason as u32) {
        unsafe { *p += 1 };
    }
    if !matches!(reason, DropReason::RingBufFull) {
        crate::diag::map_full(reason);
    }
}

#[inline(always)]
pub fn config() -> RuntimeConfig {
    CONFIG.get(0).copied().unwrap_or_default()
}

/// The tracer's own pid namespace, `(level, inode)`: every pid is reported
/// as seen from it.
#[inline(always)]
pub fn view() -> (u32, u32) {
    let c = config();
    (c.view_level, c.view_ns_inum)
}

/// Is `(tgid, start_ns)` a process of the run?
#[inline(always)]
pub fn is_tracked(tgid: u32, start_ns: u64) -> bool {
    if config().scope_all != 0 {
        // 0: a process outside the tracer's pid namespace, never in scope.
        return tgid != 0 && tgid != tracer_tgid();
    }
    match unsafe { TRACKED.get(&tgid) } {
        Some(s) => *s == start_ns,
        None => false,
    }
}

#[inline(always)]
pub fn track(tgid: u32, start_ns: u64) {
    if TRACKED.insert(&tgid, &start_ns, 0).is_err() {
        count_drop(DropReason::TrackedMapFull);
    }
}

#[inline(always)]
pub fn untrack(tgid: u32) {
    let _ = TRACKED.remove(&tgid);
}
