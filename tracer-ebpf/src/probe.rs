//! The reads and helper calls every program repeats, made safe once here, each
//! with the reason it is sound: a probe-read helper never faults (an address
//! it cannot read is an error return, never a crash: the kernel copies with
//! its exception table), so only the *type* read can make a read unsound, and
//! [`Plain`] rules out every type for which some bytes are not a value.
use aya_ebpf::{
    helpers::{self, generated},
    programs::TracePointContext,
};

/// A type every bit pattern of its size is a valid value of, with no padding:
/// integers, raw pointers, arrays of them. What a probe read may fill.
///
/// # Safety
///
/// Implement it only for such types: a read fills the value with whatever
/// bytes kernel or user memory held.
pub(crate) unsafe trait Plain: Copy {}

// SAFETY: an integer or a raw pointer (so each impl below): every bit pattern
// of its size is one of its values and it has no padding.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for i16 {}
// SAFETY: as above.
unsafe impl Plain for u16 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}
// SAFETY: as above.
unsafe impl Plain for i64 {}
// SAFETY: as above.
unsafe impl Plain for u64 {}
// SAFETY: as above (a pointer read is only an address; it is never
// dereferenced except through another probe read).
unsafe impl Plain for *const u8 {}
// SAFETY: an array of `Plain` elements has no padding between them, and any
// bytes make each element a value.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

/// A `T` in kernel memory at `addr`; `None` when the read faults.
#[inline(always)]
pub(crate) fn kernel<T: Plain>(addr: *const T) -> Option<T> {
    // SAFETY: bpf_probe_read_kernel checks `addr` itself (a bad address is an
    // error, the destination zeroed); `T: Plain` makes any bytes it copies a
    // valid `T`.
    unsafe { helpers::bpf_probe_read_kernel(addr) }.ok()
}

/// A `T` in the current task's user memory at `addr`; `None` when the read
/// faults (an unmapped page, or one the kernel will not fault in here).
#[inline(always)]
pub(crate) fn user<T: Plain>(addr: u64) -> Option<T> {
    // SAFETY: as for `kernel`, with bpf_probe_read_user, which checks that
    // the address is a user one and copies with fault handling.
    unsafe { helpers::bpf_probe_read_user(addr as *const T) }.ok()
}

/// A classic tracepoint's field at byte `offset` of its record (the layout
/// in the tracepoint's `format` file).
#[inline(always)]
pub(crate) fn tp_field<T: Plain>(ctx: &TracePointContext, offset: usize) -> Option<T> {
    // SAFETY: `read_at` is bpf_probe_read_kernel at ctx + offset: an offset
    // past the record is a failed read, not a fault; `T: Plain`.
    unsafe { ctx.read_at(offset) }.ok()
}

/// `bpf_ktime_get_boot_ns`: CLOCK_BOOTTIME, the clock of every record.
#[inline(always)]
pub(crate) fn boot_ns() -> u64 {
    // SAFETY: a helper with no arguments and no memory access; the binding is
    // `unsafe` only because every generated binding is.
    unsafe { generated::bpf_ktime_get_boot_ns() }
}

/// `bpf_get_current_task`: the running task, as an address to read from
/// with [`kernel`] (never dereferenced directly).
#[inline(always)]
pub(crate) fn current_task() -> *const u8 {
    // SAFETY: as for `boot_ns`; the result is only an address.
    unsafe { generated::bpf_get_current_task() as *const u8 }
}

/// `bpf_get_current_task_btf` (5.11+): the running task as a BTF-typed
/// pointer, which the verifier lets a program load fields from directly.
#[inline(always)]
pub(crate) fn current_task_btf() -> *const u8 {
    // SAFETY: as for `boot_ns`; the result is only an address.
    unsafe { generated::bpf_get_current_task_btf() as *const u8 }
}

/// A `T` at `base + offset` by a plain load, where `base` is a BTF-typed
/// kernel pointer ([`current_task_btf`], or a struct pointer loaded from
/// one) and `offset` a constant the verifier knows (frozen .rodata).
#[inline(always)]
pub(crate) fn btf_field<T: Plain>(base: *const u8, offset: u32) -> Option<T> {
    // SAFETY: the verifier types `base` (PTR_TO_BTF_ID) and accepts this load
    // only at an offset and size inside the struct its BTF names, turning it
    // into a fault-safe probe load (a fault reads 0); through any other value
    // it refuses the program when it loads, so it never runs. `T: Plain`.
    Some(unsafe { core::ptr::read_volatile(base.wrapping_add(offset as usize) as *const T) })
}
