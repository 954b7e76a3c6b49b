//! tracer's kernel half: tracepoints -> ring buffer, scoped in the kernel to
//! the processes of the traced run.
//!
//! Entry points stay thin (`fn hook(ctx) -> u32 { try_hook(&ctx) ... }`); the
//! logic lives in one module per subject.
#![no_std]
#![no_main]
// Two of clippy's rewrites are refused here: they would change code whose
// verifier acceptance the VM matrix proved on every kernel (a map key passed
// by value instead of by reference; a checked add turned into a write at
// u32::MAX), for no gain in the kernel.
#![allow(
    clippy::needless_borrows_for_generic_args,
    clippy::implicit_saturating_add,
    reason = "keep the verifier-proven code as the VM matrix ran it"
)]

mod crash;
mod diag;
mod exec_env;
mod existing;
mod fd2;
mod kill_calls;
mod kill_folds;
mod maps;
mod oom;
mod probe;
mod process;
mod signal;
mod signal_agg;
mod stderr;
mod task;

use aya_ebpf::{
    macros::{btf_tracepoint, fentry, fexit, tracepoint},
    programs::{BtfTracePointContext, FEntryContext, FExitContext, TracePointContext},
};
use task::{Probed, Typed};
use tracer_common::KillSyscall;

#[btf_tracepoint(function = "sched_process_fork")]
pub(crate) fn sched_process_fork(ctx: BtfTracePointContext) -> u32 {
    process::on_fork(&ctx).unwrap_or(0)
}

/// The envp walk by `bpf_loop` (5.17+): verified in a fraction of the
/// unrolled walk's instructions.
#[btf_tracepoint(function = "sched_process_exec")]
pub(crate) fn sched_process_exec(ctx: BtfTracePointContext) -> u32 {
    process::on_exec::<true, Typed>(&ctx).unwrap_or(0)
}

/// Before 5.17, or an object without BTF (`bpf_loop`'s callback needs its
/// func_info): the same program with the walk unrolled.
#[btf_tracepoint(function = "sched_process_exec")]
pub(crate) fn sched_process_exec_unrolled(ctx: BtfTracePointContext) -> u32 {
    process::on_exec::<false, Probed>(&ctx).unwrap_or(0)
}

#[btf_tracepoint(function = "sched_process_exit")]
pub(crate) fn sched_process_exit(ctx: BtfTracePointContext) -> u32 {
    process::on_exit(&ctx).unwrap_or(0)
}

/// Crash stacks, first choice: with the user registers and the stack's
/// memory (`bpf_task_pt_regs`, 5.15+).
#[btf_tracepoint(function = "signal_deliver")]
pub(crate) fn crash_deliver(ctx: BtfTracePointContext) -> u32 {
    crash::on_deliver::<true>(&ctx).unwrap_or(0)
}

/// Crash stacks where `bpf_task_pt_regs` is refused: the kernel's
/// frame-pointer walk only.
#[btf_tracepoint(function = "signal_deliver")]
pub(crate) fn crash_deliver_fp(ctx: BtfTracePointContext) -> u32 {
    crash::on_deliver::<false>(&ctx).unwrap_or(0)
}

#[btf_tracepoint(function = "signal_generate")]
pub(crate) fn signal_generate(ctx: BtfTracePointContext) -> u32 {
    signal::on_generate(&ctx).unwrap_or(0)
}

/// First choice for the kill family: fentry/fexit on each syscall's entry
/// symbol (`__x64_sys_kill`, named by user space from `tracer_common`'s kill
/// table). Unlike classic tracepoints, detaching them costs no RCU grace
/// period each. Program names: `kill_fentry_<syscall>` / `kill_fexit_<syscall>`.
macro_rules! kill_fentry_fexit {
    ($($entry:ident, $exit:ident, $syscall:expr;)*) => {$(
        #[fentry]
        pub(crate) fn $entry(ctx: FEntryContext) -> u32 {
            kill_calls::on_fentry(&ctx, $syscall).unwrap_or(0)
        }

        #[fexit]
        pub(crate) fn $exit(ctx: FExitContext) -> u32 {
            kill_calls::on_fexit(&ctx).unwrap_or(0)
        }
    )*};
}

kill_fentry_fexit! {
    kill_fentry_kill, kill_fexit_kill, KillSyscall::Kill;
    kill_fentry_tkill, kill_fexit_tkill, KillSyscall::Tkill;
    kill_fentry_tgkill, kill_fexit_tgkill, KillSyscall::Tgkill;
    kill_fentry_rt_sigqueueinfo, kill_fexit_rt_sigqueueinfo, KillSyscall::RtSigqueueinfo;
    kill_fentry_rt_tgsigqueueinfo, kill_fexit_rt_tgsigqueueinfo, KillSyscall::RtTgsigqueueinfo;
    kill_fentry_pidfd_send_signal, kill_fexit_pidfd_send_signal, KillSyscall::PidfdSendSignal;
}

/// Last choice for the kill family: attached to every
/// `syscalls:sys_enter_<kill-family>` tracepoint.
#[tracepoint]
pub(crate) fn kill_enter(ctx: TracePointContext) -> u32 {
    kill_calls::on_enter(&ctx).unwrap_or(0)
}

/// Attached to every `syscalls:sys_exit_<kill-family>` tracepoint.
#[tracepoint]
pub(crate) fn kill_exit(ctx: TracePointContext) -> u32 {
    kill_calls::on_exit(&ctx).unwrap_or(0)
}

/// Second choice for the kill family (where fentry is refused): raw_syscalls
/// via tp_btf, filtered to the kill family in the kernel by syscall number.
/// write/writev go on to last words' program by a tail call, when user space
/// filled its slot (last words on this rung): one program run per syscall
/// instead of a classic tracepoint more on every write, and each program
/// stays as small for the verifier as on its own.
#[btf_tracepoint(function = "sys_enter")]
pub(crate) fn raw_sys_enter(ctx: BtfTracePointContext) -> u32 {
    if let kill_calls::RawEnter::Stderr(slot) = kill_calls::on_raw_enter(&ctx) {
        // In the entry frame, not a subprogram: older verifiers limit the
        // stack of frames below a tail call. An empty slot falls through.
        // SAFETY: the slot is one of `STDERR_RAW`'s two; the target programs
        // are of this program's type and attach point (sys_enter tp_btf), as
        // the kernel checks when user space fills the slot; on success this
        // program does not return, on failure it goes on.
        unsafe { stderr::STDERR_RAW.tail_call(&ctx, slot as u32) };
    }
    0
}

#[btf_tracepoint(function = "sys_exit")]
pub(crate) fn raw_sys_exit(ctx: BtfTracePointContext) -> u32 {
    kill_calls::on_raw_exit(&ctx).unwrap_or(0)
}

/// Last words, first choice: fentry on the write and writev syscalls' entry
/// symbols (`__x64_sys_write(const struct pt_regs *)`), fd 2 of traced
/// processes. No RCU grace period at teardown, no perf record per call.
/// The task's fields by plain loads from its BTF-typed pointer (5.11+);
/// each program has a `_probed` twin reading them with the probe-read
/// helper, for 5.10 (user space loads the first of the two that loads).
#[fentry]
pub(crate) fn stderr_fentry_write(ctx: FEntryContext) -> u32 {
    stderr::on_write_regs::<false, Typed>(ctx.arg(0)).unwrap_or(0)
}

#[fentry]
pub(crate) fn stderr_fentry_writev(ctx: FEntryContext) -> u32 {
    stderr::on_writev_regs::<Typed>(ctx.arg(0)).unwrap_or(0)
}

#[fentry]
pub(crate) fn stderr_fentry_write_probed(ctx: FEntryContext) -> u32 {
    stderr::on_write_regs::<false, Probed>(ctx.arg(0)).unwrap_or(0)
}

#[fentry]
pub(crate) fn stderr_fentry_writev_probed(ctx: FEntryContext) -> u32 {
    stderr::on_writev_regs::<Probed>(ctx.arg(0)).unwrap_or(0)
}

/// Last words, second choice (the kill family on raw_syscalls): loaded for
/// raw_syscalls' sys_enter but never attached; `raw_sys_enter` tail-calls
/// them for write and writev (`stderr::STDERR_RAW`). Twins as above.
#[btf_tracepoint(function = "sys_enter")]
pub(crate) fn stderr_raw_write(ctx: BtfTracePointContext) -> u32 {
    stderr::on_write_regs::<true, Typed>(ctx.arg(0)).unwrap_or(0)
}

#[btf_tracepoint(function = "sys_enter")]
pub(crate) fn stderr_raw_writev(ctx: BtfTracePointContext) -> u32 {
    stderr::on_writev_regs::<Typed>(ctx.arg(0)).unwrap_or(0)
}

#[btf_tracepoint(function = "sys_enter")]
pub(crate) fn stderr_raw_write_probed(ctx: BtfTracePointContext) -> u32 {
    stderr::on_write_regs::<true, Probed>(ctx.arg(0)).unwrap_or(0)
}

#[btf_tracepoint(function = "sys_enter")]
pub(crate) fn stderr_raw_writev_probed(ctx: BtfTracePointContext) -> u32 {
    stderr::on_writev_regs::<Probed>(ctx.arg(0)).unwrap_or(0)
}

/// Last words, last choice: `syscalls:sys_enter_write`, fd 2 of traced processes.
#[tracepoint]
pub(crate) fn stderr_write(ctx: TracePointContext) -> u32 {
    stderr::on_write(&ctx).unwrap_or(0)
}

/// `syscalls:sys_enter_writev`: fd 2 of traced processes.
#[tracepoint]
pub(crate) fn stderr_writev(ctx: TracePointContext) -> u32 {
    stderr::on_writev(&ctx).unwrap_or(0)
}

#[tracepoint]
pub(crate) fn oom_mark_victim(ctx: TracePointContext) -> u32 {
    oom::on_mark_victim(&ctx).unwrap_or(0)
}

/// Task iterator: the processes that were running before the tracer.
/// (aya-ebpf has no macro for iterators; the section name is the contract.)
#[unsafe(no_mangle)]
#[unsafe(link_section = "iter/task")]
pub(crate) fn existing_tasks(ctx: *mut aya_ebpf::cty::c_void) -> i32 {
    existing::on_task(ctx).unwrap_or(0)
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
