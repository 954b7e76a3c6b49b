//! A module's ELF and unwind tables are the wrapped command's: fuzzed
//! `.eh_frame`/`.eh_frame_hdr`, garbage files and garbage stacks must yield
//! a record (frames without names, "symbolisation failed"), never a panic,
//! in bounded time.
use std::{io::Write, time::Instant};

use object::{Object, ObjectSection};
use tracer_common::{CrashRecord, CRASH_HAS_REGS, CRASH_STACK_BYTES};

use super::{crash_stack_here as crash_stack, ImageCache, Mapping, Modules};
use crate::eventlog::{StackCompleteness, Stamp, Task};

const BASE: u64 = 0x5555_0000_0000;
const STACK: u64 = 0x7ffc_0000_0000;

fn record(ip: u64, rng: &mut fastrand::Rng) -> Box<CrashRecord> {
    // SAFETY: CrashRecord is integers and byte arrays only: zeros are valid.
    let mut rec: Box<CrashRecord> = unsafe { Box::new_zeroed().assume_init() };
    rec.sig = 11;
    rec.code = 1;
    rec.flags = CRASH_HAS_REGS;
    rec.regs = [ip, STACK + 64, STACK + 512, 0];
    rec.stack_base = STACK;
    rec.pages_ok = 0xf;
    for b in rec.stack.iter_mut() {
        *b = rng.u8(..);
    }
    // Some words that point back into the module: an unwinder follows them.
    for i in 0..64 {
        let at = rng.usize(..CRASH_STACK_BYTES / 8) * 8;
        let v = BASE + rng.u64(..0x4000);
        rec.stack[at..at + 8].copy_from_slice(&v.to_le_bytes());
        let _ = i;
    }
    rec
}

fn modules_of(bytes: &[u8]) -> (tempfile::NamedTempFile, Modules) {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(bytes).unwrap();
    let file = std::fs::File::open(f.path()).unwrap();
    let m = Modules {
        mappings: vec![Mapping {
            start: BASE,
            end: BASE + bytes.len().next_multiple_of(4096) as u64,
            offset: 0,
            executable: true,
            path: "/fuzzed".into(),
            deleted: false,
            file: Some(0),
        }],
        files: vec![file],
        missing: None,
        jit: None,
    };
    (f, m)
}

fn task() -> Task {
    Task {
        pid: 1,
        tid: 1,
        start: 1,
        comm: None,
    }
}

fn stamp() -> Stamp {
    Stamp {
        seq: 1,
        t: 1,
        time: String::new(),
    }
}

/// A real ELF whose `.eh_frame` and `.eh_frame_hdr` are overwritten with
/// random bytes, 300 seeds: every crash gives a record, none panics, the
/// whole run stays within a few seconds.
#[test]
fn a_fuzzed_eh_frame_never_crashes_tracer() {
    let original = std::fs::read("/bin/true").expect("/bin/true");
    let obj = object::File::parse(&original[..]).unwrap();
    let ranges: Vec<(usize, usize)> = [".eh_frame", ".eh_frame_hdr"]
        .iter()
        .filter_map(|n| obj.section_by_name(n)?.file_range())
        .map(|(o, s)| (o as usize, s as usize))
        .collect();
    assert!(!ranges.is_empty(), "/bin/true has unwind tables to fuzz");
    let text = obj
        .section_by_name(".text")
        .and_then(|s| s.file_range())
        .unwrap();
    let started = Instant::now();
    for seed in 0..300u64 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut bytes = original.clone();
        for &(off, size) in &ranges {
            // Some seeds overwrite all of it, some a few bytes.
            let n = if seed % 3 == 0 {
                size
            } else {
                rng.usize(1..=16)
            };
            for _ in 0..n {
                bytes[off + rng.usize(..size)] = rng.u8(..);
            }
        }
        let (_keep, modules) = modules_of(&bytes);
        let ip = BASE + text.0 + rng.u64(..text.1);
        let rec = record(ip, &mut rng);
        let mut cache = ImageCache::default();
        let stack = crash_stack(&rec, &modules, &mut cache, stamp(), task());
        // The first frame is the instruction pointer, whatever the tables.
        assert_eq!(
            stack.frames.first().map(|f| f.address),
            Some(ip),
            "seed {seed}"
        );
        assert!(stack.frames.len() <= super::MAX_CRASH_FRAMES);
    }
    let took = started.elapsed();
    assert!(took.as_secs() < 60, "300 fuzzed modules took {took:?}");
}

/// Not an ELF at all, and an ELF cut short: the frame keeps its address
/// and module, the record says why it has no name.
#[test]
fn garbage_and_truncated_modules_yield_symbolisation_failed_or_no_name() {
    let mut rng = fastrand::Rng::with_seed(7);
    let garbage: Vec<u8> = (0..65536).map(|_| rng.u8(..)).collect();
    let elf = std::fs::read("/bin/true").unwrap();
    for bytes in [&garbage[..], &elf[..elf.len() / 3], &elf[..64]] {
        let (_keep, modules) = modules_of(bytes);
        let rec = record(BASE + 0x10, &mut rng);
        let stack = crash_stack(&rec, &modules, &mut ImageCache::default(), stamp(), task());
        let top = &stack.frames[0];
        assert_eq!(top.module.as_deref(), Some("/fuzzed"));
        assert!(top.symbol.is_none() || stack.completeness != StackCompleteness::Complete);
    }
}

/// The kernel's frame-pointer walk alone (no registers: 5.10) through code
/// without frame pointers: one real frame, then an address in no file,
/// again and again (measured on 5.10). The stack ends at the real frame,
/// says why, and is not called "module unknown".
#[test]
fn a_frame_pointer_walk_that_leaves_the_files_ends_there_and_says_so() {
    let mut rng = fastrand::Rng::with_seed(3);
    let elf = std::fs::read("/bin/true").unwrap();
    let (_keep, modules) = modules_of(&elf);
    let mut rec = record(BASE + 0x10, &mut rng);
    rec.flags = 0;
    let astray = 0x7f00_dead_0000;
    rec.ips[0] = BASE + 0x10;
    for ip in &mut rec.ips[1..6] {
        *ip = astray;
    }
    rec.ips_len = 6;
    let stack = crash_stack(&rec, &modules, &mut ImageCache::default(), stamp(), task());
    assert_eq!(stack.frames.len(), 1, "{stack:#?}");
    assert_eq!(stack.frames[0].module.as_deref(), Some("/fuzzed"));
    assert_eq!(stack.completeness, StackCompleteness::FramePointersOnly);
    let detail = stack.detail.unwrap();
    assert!(
        detail.contains(
            "the frame-pointer walk left the process's files after 1 frame(s) \
             (code without frame pointers): the 5 address(es) it went on to are not shown"
        ),
        "{detail}"
    );
}
