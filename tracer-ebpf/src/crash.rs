//! signal_deliver: a fatal crash-class signal (SIGSEGV, SIGABRT, …, see
//! `CRASH_SIGNAL_MASK`) is about to kill a process of the run. The hook runs
//! in the dying thread's own context, before the kernel tears anything
//! down: its user registers, the kernel's walk of its user stack and a
//! copy of its stack memory go into `CRASHES`, a ring of their own (a
//! crash storm fills it, never the event ring), and user space is woken at
//! once so it can read the process's maps while the process still exists.
use core::mem::size_of;

use aya_ebpf::{
    bindings::{BPF_F_USER_BUILD_ID, BPF_F_USER_STACK, BPF_RB_FORCE_WAKEUP},
    helpers::generated::{
        bpf_get_current_task_btf, bpf_get_stack, bpf_probe_read_user, bpf_probe_read_user_str,
        bpf_task_pt_regs,
    },
    macros::map,
    maps::RingBuf,
    programs::BtfTracePointContext,
    EbpfContext,
};
use tracer_common::{
    CrashRecord, StackBuildId, CRASH_FRAMES, CRASH_HAS_REGS, CRASH_OBJECTS, CRASH_OBJECT_NAME,
    CRASH_PAGE, CRASH_PAGES, CRASH_REGS_FROM_STACK, CRASH_SIGNAL_MASK, KERNEL_THREAD_SIZE,
    OFFSET_NONE, REG_NONE,
};

use crate::{
    kill_calls::KILL_ABI,
    maps::{is_tracked, off},
    task::{comm, current, current_id, header, read, Probed, Ptr},
};

/// Crash records only (~19 KiB each): 16 fit. Crashes are rare; a storm of
/// them (a crashing test in a loop) fills this ring and counts
/// `crash_ring_full`, while forks, exits and signals keep their own ring.
#[map]
pub(crate) static CRASHES: RingBuf = RingBuf::with_byte_size(512 * 1024, 0);

/// `k_sigaction.sa.sa_handler`'s value for the default action.
const SIG_DFL: u64 = 0;

/// `kernel_siginfo`: `si_code` at 8, the `_sigfault` union (si_addr) at 16.
const SI_CODE_OFF: u32 = 8;
const SI_ADDR_OFF: u32 = 16;

/// `WITH_REGS`: read the user registers with `bpf_task_pt_regs` (5.15+);
/// without, the program loads on older kernels and keeps only the
/// kernel's frame-pointer walk.
#[inline(always)]
pub(crate) fn on_deliver<const WITH_REGS: bool>(ctx: &BtfTracePointContext) -> Result<u32, ()> {
    let sig: i32 = ctx.arg(0);
    // The common path (SIGURG floods of Go programs, SIGCHLD, SIGALRM…):
    // one shift, one AND, one branch.
    if (CRASH_SIGNAL_MASK >> (sig as u32 & 63)) & 1 == 0 {
        return Ok(0);
    }
    let info: Ptr = ctx.arg(1);
    let ka: Ptr = ctx.arg(2);
    // Fatal: the default action (a handler that returns would let the
    // process live, or it is a runtime's own — Go, the JVM — that reports).
    if read::<u64>(ka, off(|o| &o.ksigaction_handler)) != Some(SIG_DFL) {
        return Ok(0);
    }
    let me = current_id::<Probed>().ok_or(())?;
    if !is_tracked(me.tgid, me.start_ns) {
        return Ok(0);
    }
    let Some(mut entry) = CRASHES.reserve::<CrashRecord>(0) else {
        crate::diag::crash_ring_full();
        return Ok(0);
    };
    let rec = entry.as_mut_ptr();
    // SAFETY: `rec` is the reserved ring entry, a whole `CrashRecord`
    // (the verifier checks every field access against the reservation's
    // size); each page copy is CRASH_PAGE bytes at `i * CRASH_PAGE` for
    // i < CRASH_PAGES, inside `stack`; bpf_get_stack is given the byte size
    // of `ips`/`build_ids`; the probe reads never fault (an unreadable source
    // is an error return); `bpf_task_pt_regs` of the current task is its
    // user registers, read only through probe reads.
    unsafe {
        (*rec).hdr = header(tracer_common::RecordKind::Crash as u32);
        (*rec).task = me;
        (*rec).comm = comm::<Probed>(current());
        (*rec).sig = sig;
        (*rec).code = read::<i32>(info, SI_CODE_OFF).unwrap_or(0);
        (*rec).addr = read::<u64>(info, SI_ADDR_OFF).unwrap_or(0);
        (*rec).regs = [0; 4];
        (*rec).flags = 0;
        (*rec)._pad = 0;
        let mm = read::<Ptr>(current(), off(|o| &o.task_mm)).unwrap_or(core::ptr::null());
        (*rec).exe_start_code = read::<u64>(mm, off(|o| &o.mm_start_code)).unwrap_or(0);
        let exe = read::<Ptr>(mm, off(|o| &o.mm_exe_file)).unwrap_or(core::ptr::null());
        let inode = read::<Ptr>(exe, off(|o| &o.file_inode)).unwrap_or(core::ptr::null());
        (*rec).exe_ino = read::<u64>(inode, off(|o| &o.inode_i_ino)).unwrap_or(0);
        let sb = read::<Ptr>(inode, off(|o| &o.inode_i_sb)).unwrap_or(core::ptr::null());
        (*rec).exe_dev = read::<u32>(sb, off(|o| &o.sb_s_dev)).unwrap_or(0);
        (*rec)._pad2 = 0;
        (*rec).objects_len = loaded_objects(mm, rec);
        // Without the helper (5.10), the user registers are where the
        // kernel keeps them, at the top of the task's kernel stack
        // (`task_pt_regs`: stack + THREAD_SIZE - sizeof(pt_regs)); checked
        // below against the kernel's own first frame, which it takes from
        // the same registers.
        let regs = if WITH_REGS {
            bpf_task_pt_regs(bpf_get_current_task_btf()) as Ptr
        } else {
            regs_below_kernel_stack()
        };
        if !regs.is_null() {
            let offs = core::ptr::read_volatile(&KILL_ABI.regs_user);
            let reg = |o: u32| match o {
                REG_NONE => 0,
                o => read::<u64>(regs, o).unwrap_or(0),
            };
            (*rec).regs = [reg(offs[0]), reg(offs[1]), reg(offs[2]), reg(offs[3])];
            (*rec).flags = match WITH_REGS {
                true => CRASH_HAS_REGS,
                false => CRASH_HAS_REGS | CRASH_REGS_FROM_STACK,
            };
        }
        // From the stack pointer's page up (no registers: from address 0,
        // which fails). A failed read zeroes its page: the ring's memory
        // never carries an earlier record's bytes out.
        let base = (*rec).regs[1] & !(CRASH_PAGE as u64 - 1);
        (*rec).stack_base = base;
        let stack = (*rec).stack.as_mut_ptr();
        let mut ok = 0u32;
        // Unrolled: constant-size reads, each page on its own.
        for i in 0..CRASH_PAGES {
            let dst = stack.add(i * CRASH_PAGE);
            let src = if base == 0 {
                0
            } else {
                base + (i * CRASH_PAGE) as u64
            };
            if bpf_probe_read_user(dst as *mut _, CRASH_PAGE as u32, src as *const _) == 0 {
                ok |= 1 << i;
            }
        }
        (*rec).pages_ok = ok;
        let ips = (*rec).ips.as_mut_ptr();
        let n = bpf_get_stack(
            ctx.as_ptr(),
            ips as *mut _,
            (CRASH_FRAMES * 8) as u32,
            BPF_F_USER_STACK as u64,
        );
        (*rec).ips_len = if n > 0 { (n as u32) / 8 } else { 0 };
        // Registers found on the kernel stack are trusted only if their ip
        // is the kernel walk's first frame; else the walk alone stays (a
        // KASAN kernel's larger stack, a layout not foreseen).
        if (*rec).flags & CRASH_REGS_FROM_STACK != 0
            && ((*rec).ips_len == 0 || (*rec).ips[0] != (*rec).regs[0])
        {
            (*rec).regs = [0; 4];
            (*rec).flags = 0;
            (*rec).pages_ok = 0;
        }
        let ids = (*rec).build_ids.as_mut_ptr();
        let n = bpf_get_stack(
            ctx.as_ptr(),
            ids as *mut _,
            (CRASH_FRAMES * size_of::<StackBuildId>()) as u32,
            (BPF_F_USER_STACK | BPF_F_USER_BUILD_ID) as u64,
        );
        (*rec).build_ids_len = if n > 0 {
            (n as u32) / size_of::<StackBuildId>() as u32
        } else {
            0
        };
    }
    // At once: the maps are read while the process still exists.
    entry.submit(BPF_RB_FORCE_WAKEUP as u64);
    Ok(0)
}

/// The current task's user registers on its kernel stack, or null when
/// BTF does not say where (`task->stack`, `sizeof(struct pt_regs)`).
#[inline(always)]
fn regs_below_kernel_stack() -> Ptr {
    let size = off(|o| &o.pt_regs_size);
    if off(|o| &o.task_stack) == OFFSET_NONE || size == OFFSET_NONE {
        return core::ptr::null();
    }
    match read::<u64>(current(), off(|o| &o.task_stack)) {
        Some(stack) if stack != 0 && (size as u64) < KERNEL_THREAD_SIZE => {
            (stack + KERNEL_THREAD_SIZE - size as u64) as Ptr
        }
        _ => core::ptr::null(),
    }
}

/// A u64 of the process's memory, 0 when unreadable.
#[inline(always)]
fn user_u64(addr: u64) -> u64 {
    crate::probe::user::<u64>(addr).unwrap_or(0)
}

/// The dynamic linker's list of loaded objects, read while the process
/// lives: auxv's AT_PHDR -> the executable's PT_PHDR and PT_DYNAMIC ->
/// DT_DEBUG -> `r_debug.r_map` -> each `link_map`'s `l_addr` and `l_name`.
/// Every step bounded; any unreadable step ends the walk (a static binary
/// has no list: 0 objects). Returns the objects recorded.
#[inline(always)]
fn loaded_objects(mm: Ptr, rec: *mut CrashRecord) -> u32 {
    const AT_PHDR: u64 = 3;
    const AT_PHNUM: u64 = 5;
    const PT_DYNAMIC: u32 = 2;
    const PT_PHDR: u32 = 6;
    const DT_DEBUG: u64 = 21;
    let auxv = off(|o| &o.mm_saved_auxv);
    if mm.is_null() || auxv == tracer_common::OFFSET_NONE {
        return 0;
    }
    let (mut phdr, mut phnum) = (0u64, 0u64);
    for i in 0..24u32 {
        let key = read::<u64>(mm, auxv + i * 16).unwrap_or(0);
        let val = read::<u64>(mm, auxv + i * 16 + 8).unwrap_or(0);
        if key == AT_PHDR {
            phdr = val;
        } else if key == AT_PHNUM {
            phnum = val;
        } else if key == 0 {
            break;
        }
    }
    if phdr == 0 {
        return 0;
    }
    // Program headers (56 bytes each): p_type at 0, p_vaddr at 16.
    let (mut phdr_vaddr, mut dyn_vaddr, mut have_phdr) = (0u64, 0u64, false);
    for i in 0..16u64 {
        if i >= phnum {
            break;
        }
        let at = phdr + i * 56;
        let ty = user_u64(at) as u32;
        if ty == PT_PHDR {
            phdr_vaddr = user_u64(at + 16);
            have_phdr = true;
        } else if ty == PT_DYNAMIC {
            dyn_vaddr = user_u64(at + 16);
        }
    }
    if !have_phdr || dyn_vaddr == 0 {
        return 0;
    }
    let dynamic = phdr.wrapping_sub(phdr_vaddr).wrapping_add(dyn_vaddr);
    let mut r_debug = 0u64;
    for i in 0..64u64 {
        let tag = user_u64(dynamic + i * 16);
        if tag == DT_DEBUG {
            r_debug = user_u64(dynamic + i * 16 + 8);
            break;
        }
        if tag == 0 {
            break;
        }
    }
    if r_debug == 0 {
        return 0;
    }
    // struct r_debug { int r_version; struct link_map *r_map; ... }
    // struct link_map { l_addr, l_name, l_ld, l_next, ... }
    let mut lm = user_u64(r_debug + 8);
    let mut n = 0u32;
    for i in 0..CRASH_OBJECTS {
        if lm == 0 {
            break;
        }
        let name = user_u64(lm + 8);
        // SAFETY: `rec` is the reserved ring record; `i` < CRASH_OBJECTS.
        unsafe {
            let obj = &raw mut (*rec).objects[i];
            (*obj).bias = user_u64(lm);
            (*obj).name[0] = 0;
            if name != 0 {
                bpf_probe_read_user_str(
                    (*obj).name.as_mut_ptr() as *mut _,
                    CRASH_OBJECT_NAME as u32,
                    name as *const _,
                );
            }
        }
        n += 1;
        lm = user_u64(lm + 24);
    }
    n
}
