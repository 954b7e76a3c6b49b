//! The test runners' variables of a new image's environment, found at exec
//! by exact name (`tracer_common::RUNNER_VARS`) in the envp the kernel has
//! just laid out on the new stack, and sent one record each before the
//! exec's record. Nothing else of an environment is copied out of it: most
//! variables cost one 8-byte read of their first word. Read here, not from
//! /proc when the record is drained, because a helper (`sh -c 'kill …'`,
//! `/bin/true`) is gone by then: 82 % of them lost their variables that way
//! (docs/security.md, "Environment at exec").
use aya_ebpf::{
    cty::c_void,
    helpers::generated::{bpf_loop, bpf_probe_read_user, bpf_probe_read_user_str},
};
use tracer_common::{
    runner_first, runner_head, DropReason, RecordHeader, RecordKind, TaskId, EXEC_ENV_HEADER_LEN,
    RUNNER_HEAD, RUNNER_SCAN_VARS, RUNNER_VARS, RUNNER_VAR_LEN,
};

use crate::{
    maps::{
        batched_output, count_drop, env_mask, off, ExecEnvScratch, ENV_BUF, EVENTS,
        EXEC_ENV_SCRATCH,
    },
    probe,
    task::{read, Ptr},
};

/// envp pointers read at once.
const BATCH: usize = 8;

/// Sends the runner variables of `mm`'s new image (at most 8; user space
/// keeps the first of a name, as getenv does), stamped `ktime` as the exec
/// record is. True when every variable was looked at (the envp's NULL was
/// reached). A compat task's 4-byte pointers read as an argc past 2^24:
/// not looked at (user space reads /proc).
///
/// `LOOP`: the batches are walked by `bpf_loop` (5.17+), whose callback
/// the verifier checks once (the program: 21,457 instructions on 6.18);
/// unrolled, it checks all 64 (200,064, then the longest verification of
/// start-up). Both
/// programs are in the object; the loader takes the first that loads.
#[inline(always)]
pub(crate) fn send_runner_vars<const LOOP: bool>(mm: Ptr, task: TaskId, ktime: u64) -> bool {
    // mm->start_stack: argc, then argv[argc], NULL, envp[], NULL.
    let Some(sp) = read::<u64>(mm, off(|o| &o.mm_start_stack)).filter(|sp| *sp != 0) else {
        return false;
    };
    let Some(argc) = probe::user::<u64>(sp).filter(|n| *n < 1 << 24) else {
        return false;
    };
    let envp = sp + 8 * (argc + 2);
    let Some(scratch) = EXEC_ENV_SCRATCH.get_ptr_mut(0) else {
        return false;
    };
    // The matches are noted in the map value (their count too, not in a
    // register: a loaded value is unknown to the verifier, so the paths of
    // each iteration meet again) and sent after the walk: a send in the
    // loop put the ring output's branches in each of 512 iterations, and
    // 5.10's verifier refused the program as too large.
    // SAFETY: this CPU's non-null slot; no other program nests with this one.
    unsafe {
        (*scratch).found_n = 0;
        (*scratch).env_len = 0;
    }
    if LOOP {
        copy_env(scratch, mm);
    }
    let whole = match LOOP {
        true => walk_loop(envp),
        false => walk_unrolled(scratch, envp),
    };
    for i in 0..RUNNER_VARS.len() {
        // SAFETY: as above.
        let (n, s) = unsafe { ((*scratch).found_n, (*scratch).found[i]) };
        if i as u64 >= n {
            break;
        }
        send(scratch, s, task, ktime);
    }
    if LOOP {
        wipe_env(scratch);
    }
    whole
}

/// Batches of the walk.
const BATCHES: usize = RUNNER_SCAN_VARS / BATCH;

/// The environment's strings, `[mm->arg_end, mm->env_end)` (the kernel lays
/// them out right after argv's: `create_elf_tables` sets `env_start` to
/// `arg_end`), up to `ENV_BUF` bytes, into `scratch` with one read: each
/// variable's first word then is a load from it, not a helper call of its
/// own. Those calls were most of the exec program's time: 6.1 µs an exec
/// with a 35-variable environment, 2.8 µs with none (`--program-stats`).
/// Only for the `bpf_loop` walk, whose callback the verifier checks once;
/// the unrolled one (5.10) reads each word by itself, as before.
#[inline(always)]
fn copy_env(scratch: *mut ExecEnvScratch, mm: Ptr) {
    let start = read::<u64>(mm, off(|o| &o.mm_arg_end)).unwrap_or(0);
    let end = read::<u64>(mm, off(|o| &o.mm_env_end)).unwrap_or(0);
    if start == 0 || end <= start {
        return;
    }
    let len = match end - start {
        n if n > ENV_BUF as u64 => ENV_BUF as u32,
        n => n as u32,
    };
    // SAFETY: `scratch` is this CPU's non-null slot; the helper writes at
    // most `len` <= ENV_BUF bytes into `env` (ENV_BUF + 8 long) and checks
    // the user address itself (a fault is an error, nothing copied).
    unsafe {
        if bpf_probe_read_user(
            (*scratch).env.as_mut_ptr() as *mut c_void,
            len,
            start as *const c_void,
        ) == 0
        {
            (*scratch).env_from = start;
            (*scratch).env_len = len as u64;
        }
    }
}

/// Not a user address on any architecture (above every `TASK_SIZE`): a read
/// from it fails.
const NOT_USER: u64 = u64::MAX - 2 * ENV_BUF as u64;

/// Zeroes the environment `copy_env` copied: the job's secrets must not
/// stay in a map root can read by id. A user read that fails zeroes its
/// destination (the helper's contract since 5.5; `stderr::append` relies on
/// it too), so one call from `NOT_USER` is the kernel's memset of those
/// bytes, not thousands of stores.
#[inline(always)]
fn wipe_env(scratch: *mut ExecEnvScratch) {
    // SAFETY: this CPU's non-null slot; `len` <= ENV_BUF (as `copy_env`
    // stored it, bounded again for the verifier) inside `env`.
    unsafe {
        let len = (*scratch).env_len;
        if len == 0 || len > ENV_BUF as u64 {
            return;
        }
        let _ = bpf_probe_read_user(
            (*scratch).env.as_mut_ptr() as *mut c_void,
            len as u32,
            NOT_USER as *const c_void,
        );
        (*scratch).env_len = 0;
    }
}

/// The first 8 bytes of the string at `s`: from the environment read in one
/// piece when they are all in it, else by a read of their own.
#[inline(always)]
fn first_word(scratch: *mut ExecEnvScratch, s: u64) -> Option<u64> {
    // SAFETY: this CPU's non-null slot; no other program nests with this one.
    let (from, len) = unsafe { ((*scratch).env_from, (*scratch).env_len) };
    let at = s.wrapping_sub(from);
    if at < len && len - at >= 8 {
        let i = (at & (ENV_BUF as u64 - 1)) as usize;
        // SAFETY: `i` < ENV_BUF, so the 8 bytes from `i` are inside `env`
        // (ENV_BUF + 8 long), which the verifier checks from the mask.
        let w = unsafe { core::ptr::read_unaligned((*scratch).env.as_ptr().add(i) as *const u64) };
        return Some(w);
    }
    probe::user::<u64>(s)
}

/// The original walk's shape, kept: the same steps written as `scan_batch`
/// calls cost 6.18's verifier 295,104 instructions instead of 200,064.
#[inline(always)]
fn walk_unrolled(scratch: *mut ExecEnvScratch, envp: u64) -> bool {
    let mut whole = false;
    'walk: for b in 0..BATCHES {
        let Some(ptrs) = probe::user::<[u64; BATCH]>(envp + (b * BATCH * 8) as u64) else {
            break;
        };
        for s in ptrs {
            if s == 0 {
                whole = true;
                break 'walk;
            }
            note_if_runner_var::<false>(scratch, s);
        }
    }
    whole
}

/// `bpf_loop`'s context: on this program's stack, the only place the helper
/// takes one.
#[repr(C)]
struct Walk {
    envp: u64,
    whole: u64,
}

#[inline(always)]
fn walk_loop(envp: u64) -> bool {
    let mut walk = Walk { envp, whole: 0 };
    // SAFETY: `walk_batch` is a static function of this object with
    // bpf_loop's callback signature; `walk` outlives the call, which runs
    // the callback on this CPU before it returns.
    let ran = unsafe {
        bpf_loop(
            BATCHES as u32,
            walk_batch as *const () as *mut c_void,
            &raw mut walk as *mut c_void,
            0,
        )
    };
    // SAFETY: the callback wrote it through the pointer; read it again.
    ran >= 0 && unsafe { core::ptr::read_volatile(&raw const walk.whole) } != 0
}

/// One batch of the walk, as `bpf_loop` calls it: 0 to go on, 1 to stop.
/// Never inlined: the helper takes its address, and the verifier checks
/// it as a function of its own.
#[inline(never)]
extern "C" fn walk_batch(b: u64, ctx: *mut c_void) -> i64 {
    let walk = ctx as *mut Walk;
    let Some(scratch) = EXEC_ENV_SCRATCH.get_ptr_mut(0) else {
        return 1;
    };
    // SAFETY: `ctx` is `walk_loop`'s `Walk`, alive across the helper call.
    let envp = unsafe { (*walk).envp };
    match scan_batch(scratch, envp, b) {
        None => 0,
        Some(whole) => {
            // SAFETY: as above.
            unsafe { (*walk).whole = whole as u64 };
            1
        }
    }
}

/// Batch `b` of envp: `Some(whole)` when the walk ends here (the NULL was
/// reached, or the pointers are unreadable), `None` to go on.
#[inline(always)]
fn scan_batch(scratch: *mut ExecEnvScratch, envp: u64, b: u64) -> Option<bool> {
    let Some(ptrs) = probe::user::<[u64; BATCH]>(envp + b * (BATCH as u64 * 8)) else {
        return Some(false);
    };
    for s in ptrs {
        if s == 0 {
            return Some(true);
        }
        note_if_runner_var::<true>(scratch, s);
    }
    None
}

/// Notes `s` in `scratch` when it is a runner variable (`COPIED`: its
/// first word may be in the environment read in one piece).
#[inline(always)]
fn note_if_runner_var<const COPIED: bool>(scratch: *mut ExecEnvScratch, s: u64) {
    if is_runner_var::<COPIED>(scratch, s) {
        // SAFETY: this CPU's non-null slot; the index is masked into `found`.
        unsafe {
            let n = (*scratch).found_n;
            if n < RUNNER_VARS.len() as u64 {
                (*scratch).found[(n & 7) as usize] = s;
                (*scratch).found_n = n + 1;
            }
        }
    }
}

/// Whether the string at `s` starts with one of the runner variables'
/// `NAME=`: one 8-byte read for most, 24 bytes for the few whose first
/// word is a runner name's; a table lookup each (`tracer_common`'s
/// perfect hashes), as unrolled comparisons were branches the verifier
/// walked for every variable (the program was refused as too large).
#[inline(always)]
fn is_runner_var<const COPIED: bool>(scratch: *mut ExecEnvScratch, s: u64) -> bool {
    let first = match COPIED {
        true => first_word(scratch, s),
        false => probe::user::<u64>(s),
    };
    let Some(first) = first else {
        return false;
    };
    if !runner_first(first) {
        return false;
    }
    // Zero past the NUL (the helper stops there). Three stores: a
    // `[0; 3]` became a byte-at-a-time memset call.
    let mut head = [0u64; 3];
    // SAFETY: `head` is RUNNER_HEAD bytes of this stack; the helper writes
    // at most that many and checks `s` itself.
    let n = unsafe {
        core::ptr::write_volatile(&mut head[0], 0);
        core::ptr::write_volatile(&mut head[1], 0);
        core::ptr::write_volatile(&mut head[2], 0);
        bpf_probe_read_user_str(
            head.as_mut_ptr() as *mut _,
            RUNNER_HEAD as u32,
            s as *const _,
        )
    };
    n > 0 && runner_head(&head)
}

/// One `NAME=value` string at `s`, cut to `RUNNER_VAR_LEN` bytes.
#[inline(always)]
fn send(scratch: *mut ExecEnvScratch, s: u64, task: TaskId, ktime: u64) {
    // SAFETY: `scratch` is this CPU's non-null slot, a whole
    // `ExecEnvScratch` (a program does not nest with itself on a CPU). The
    // string read is at most `RUNNER_VAR_LEN` bytes, the size of `text`;
    // the output slice is the header plus a length masked below 2048,
    // inside the record and its slack.
    unsafe {
        let rec = &raw mut (*scratch).rec;
        (*rec).hdr = RecordHeader {
            kind: RecordKind::ExecEnv as u32,
            _pad: 0,
            ktime_ns: ktime,
        };
        (*rec).task = task;
        (*rec)._pad = 0;
        let n = bpf_probe_read_user_str(
            (*rec).text.as_mut_ptr() as *mut _,
            RUNNER_VAR_LEN as u32,
            s as *const _,
        );
        // The count includes the NUL; a string gone since it was matched
        // is not sent.
        if n <= 1 {
            return;
        }
        let len = (n - 1) as u32;
        (*rec).len = len;
        let total = EXEC_ENV_HEADER_LEN + (len as u64 & env_mask()) as usize;
        let bytes = core::slice::from_raw_parts(scratch as *const u8, total);
        if EVENTS.output::<[u8]>(bytes, batched_output(total)).is_err() {
            count_drop(DropReason::RingBufFull);
        }
    }
}
