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
    helpers::generated::{bpf_loop, bpf_probe_read_user_str},
};
use tracer_common::{
    runner_first, runner_head, DropReason, RecordHeader, RecordKind, TaskId, EXEC_ENV_HEADER_LEN,
    RUNNER_HEAD, RUNNER_SCAN_VARS, RUNNER_VARS, RUNNER_VAR_LEN,
};

use crate::{
    maps::{batched_output, count_drop, env_mask, off, ExecEnvScratch, EVENTS, EXEC_ENV_SCRATCH},
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
    unsafe { (*scratch).found_n = 0 };
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
    whole
}

/// Batches of the walk.
const BATCHES: usize = RUNNER_SCAN_VARS / BATCH;

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
            note_if_runner_var(scratch, s);
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
        note_if_runner_var(scratch, s);
    }
    None
}

/// Notes `s` in `scratch` when it is a runner variable.
#[inline(always)]
fn note_if_runner_var(scratch: *mut ExecEnvScratch, s: u64) {
    if is_runner_var(s) {
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
fn is_runner_var(s: u64) -> bool {
    let Some(first) = probe::user::<u64>(s) else {
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
            cpu: probe::cpu(),
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
