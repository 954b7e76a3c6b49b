//! Crash stacks: a crash record (the dying thread's registers, the kernel's
//! walk of its stack, a copy of its stack memory) and the files its process
//! had mapped -> a `crash_stack` record: frames unwound by `framehop` (DWARF
//! CFI from .eh_frame/.debug_frame, frame pointers where a module has none)
//! and named by `blazesym` (ELF symtab, DWARF file:line with inlined
//! functions, demangled).
//!
//! Everything parsed here was written by the wrapped command: each module is
//! first copied, bounded (`image::MAX_MODULE_BYTES`), into a sealed memfd
//! (no one can change or truncate what is parsed, so a mapping of it never
//! faults), then parsed in a child process of its own (`sandbox.rs`: the
//! command's user, no_new_privs, address-space and CPU limits, a wall-clock
//! kill), never in tracer; a module that does not parse, or a child that
//! fails, yields frames without names ("symbolisation failed"), never an
//! error out of here.
mod child;
mod found;
mod identity;
mod image;
mod jit;
mod names;
pub mod sandbox;
mod unwind;

#[cfg(test)]
mod tests;

pub use child::Running;
pub use found::{exe_owner_mode, LibIndex};
pub use identity::Identity;
pub use image::ImageCache;

use std::fs::File;

use tracer_common::{CrashRecord, BUILD_ID_VALID, CRASH_HAS_REGS};

use crate::eventlog::{
    si_code_name, signal_name, CrashFrame, CrashStack, StackCompleteness, Stamp, Task,
};

pub use image::MAX_MODULE_BYTES;
pub use jit::{JitMap, MAX_PERF_MAP_BYTES};

/// Frames a record keeps (innermost first); the rest are counted.
pub const MAX_CRASH_FRAMES: usize = 64;
/// Frames a record keeps with the inlined ones (a hostile binary's DWARF
/// may claim any depth of inlining at one address).
const MAX_NAMED_FRAMES: usize = 4 * MAX_CRASH_FRAMES;

/// One mapping of the crashed process, as /proc/PID/maps had it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    /// The file offset the mapping starts at.
    pub offset: u64,
    pub executable: bool,
    /// The path /proc/PID/maps printed, without " (deleted)".
    pub path: String,
    pub deleted: bool,
    /// Index into `Modules::files` (mappings of one file share it).
    pub file: Option<usize>,
}

/// What user space could read of the crashed process while it lived.
#[derive(Debug, Default)]
pub struct Modules {
    pub mappings: Vec<Mapping>,
    /// The mapped files, held open (read through these, never by path).
    pub files: Vec<File>,
    /// Why there are no mappings (the process exited before its maps were
    /// read), or why some files could not be opened.
    pub missing: Option<String>,
    /// The entries of the process's perf map (JIT code) the crash's
    /// frames may fall in (maybe none), when it wrote one that was read.
    pub jit: Option<JitMap>,
}

impl Modules {
    fn mapping(&self, addr: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.start <= addr);
        let m = self.mappings.get(i.checked_sub(1)?)?;
        (addr < m.end).then_some(m)
    }

    /// A frame in no mapped file, named by the perf map.
    fn jit_frame(&self, addr: u64) -> Option<CrashFrame> {
        let map = self.jit.as_ref()?;
        let sym = map.lookup(addr)?;
        Some(CrashFrame {
            address: addr,
            module: Some(map.path.clone()),
            symbol: Some(sym.name.clone()),
            jit: true,
            ..Default::default()
        })
    }
}

/// Every address a walk of `rec` can look up (the perf map's entries worth
/// keeping): the registers, the kernel's frames and each word of the
/// copied stack (any return address an unwind finds is one of them).
pub fn frame_candidates(rec: &CrashRecord) -> Vec<u64> {
    use tracer_common::{CRASH_PAGE, CRASH_STACK_BYTES};
    let ips = &rec.ips[..(rec.ips_len as usize).min(rec.ips.len())];
    let words = rec.stack[..CRASH_STACK_BYTES]
        .chunks_exact(8)
        .enumerate()
        .filter(|(i, _)| rec.pages_ok & (1 << (i * 8 / CRASH_PAGE)) != 0)
        .map(|(_, w)| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
    rec.regs.iter().chain(ips).copied().chain(words).collect()
}

/// Said of a frame in no module when the maps were lost.
pub const EXITED: &str = "module unknown: the process exited before its maps were read";

/// The modules to unwind and name `rec` with: the maps `snapshot` read
/// while the process lived, or, when it was gone first (its maps empty or
/// unreadable), the modules found from what the kernel recorded
/// (`found.rs`): `exes` are the paths its process may have been exec'd by;
/// they are opened as `user` (uid, gid: the run's user, when not root).
pub fn modules_for(
    rec: &CrashRecord,
    snapshot: Modules,
    exes: &[String],
    libs: &mut LibIndex,
    user: Option<(u32, u32)>,
) -> Modules {
    if !snapshot.mappings.is_empty() {
        return snapshot;
    }
    let mut m = found::as_user(user, || found::rebuild(rec, exes, libs));
    m.missing = Some(EXITED.to_string());
    m.jit = snapshot.jit;
    m
}

/// The first fields of `rec`'s `crash_stack` record: what the kernel said,
/// nothing parsed.
fn head(rec: &CrashRecord, at: Stamp, task: Task) -> CrashStack {
    let sig = rec.sig;
    CrashStack {
        at,
        task,
        sig,
        signal: signal_name(sig),
        code: Some(si_code_name(sig, rec.code)),
        fault_addr: carries_addr(sig, rec.code).then_some(rec.addr),
        completeness: StackCompleteness::Complete,
        detail: None,
        frames: Vec::new(),
        frames_left_out: 0,
        withheld: None,
    }
}

/// `rec`'s record when its modules could not be parsed (`why`): the
/// kernel's frame-pointer walk (or the instruction pointer alone), each
/// frame placed in its module by arithmetic only, no name.
fn unparsed(rec: &CrashRecord, modules: &Modules, at: Stamp, task: Task, why: &str) -> CrashStack {
    let mut stack = head(rec, at, task);
    let mut walk = unwind::Walk::kernel_only(rec, why);
    if walk.frames.is_empty() && rec.regs[0] != 0 {
        walk.frames.push(unwind::Frame {
            lookup: rec.regs[0],
        });
    }
    let mut addrs = walk.frames;
    if addrs.len() > MAX_CRASH_FRAMES {
        stack.frames_left_out = (addrs.len() - MAX_CRASH_FRAMES) as u32;
        addrs.truncate(MAX_CRASH_FRAMES);
    }
    stack.frames = addrs
        .iter()
        .map(|f| {
            let m = modules.mapping(f.lookup);
            if let Some(j) = m.is_none().then(|| modules.jit_frame(f.lookup)).flatten() {
                return j;
            }
            CrashFrame {
                address: f.lookup,
                module: m.map(|m| m.path.clone()),
                build_id: kernel_build_id(rec, f.lookup),
                offset: m.map(|m| f.lookup - m.start + m.offset),
                ..Default::default()
            }
        })
        .collect();
    stack.completeness = if stack.frames.is_empty() {
        StackCompleteness::NoStack
    } else {
        StackCompleteness::SymbolisationFailed
    };
    stack.detail = Some(format!("symbolisation failed: {why}"));
    stack
}

/// The `crash_stack` record of `rec`, in this process: its modules' copies
/// mapped and parsed here. For tests; tracer parses only in the parse
/// child (`sandbox::crash_stacks`).
#[cfg(test)]
pub(crate) fn crash_stack_here(
    rec: &CrashRecord,
    modules: &Modules,
    cache: &mut ImageCache,
    at: Stamp,
    task: Task,
) -> CrashStack {
    let slots = modules
        .files
        .iter()
        .map(|f| {
            let frozen = cache.get(f)?;
            let memfd = frozen.memfd.try_clone().map_err(|e| e.to_string())?;
            image::Image::map(memfd, None, &[]).map(std::rc::Rc::new)
        })
        .collect();
    crash_stack(rec, modules, &image::Images::new(slots), at, task)
}

/// The `crash_stack` record of `rec`, with the modules of its process
/// (`modules_for`), their copies mapped and parsed (`images`).
fn crash_stack(
    rec: &CrashRecord,
    modules: &Modules,
    images: &image::Images,
    at: Stamp,
    task: Task,
) -> CrashStack {
    let mut stack = head(rec, at, task);
    let walk = walk(rec, modules, images);
    let mut addrs = walk.frames;
    if addrs.len() > MAX_CRASH_FRAMES {
        stack.frames_left_out = (addrs.len() - MAX_CRASH_FRAMES) as u32;
        addrs.truncate(MAX_CRASH_FRAMES);
    }
    let mut notes: Vec<String> = walk.note.into_iter().collect();
    if rec.flags & tracer_common::CRASH_REGS_FROM_STACK != 0 {
        notes.push(
            "registers read from the task's kernel stack (no bpf_task_pt_regs before 5.15), \
             matched against the kernel's own first frame"
                .into(),
        );
    }
    let Named {
        mut frames,
        unknown,
        failed,
    } = name_frames(
        rec,
        modules,
        images,
        &addrs,
        walk.frame_pointers,
        &mut notes,
    );
    if frames.len() > MAX_NAMED_FRAMES {
        stack.frames_left_out += (frames.len() - MAX_NAMED_FRAMES) as u32;
        frames.truncate(MAX_NAMED_FRAMES);
    }
    stack.frames = frames;
    if addrs.is_empty() {
        stack.completeness = StackCompleteness::NoStack;
        notes.push("no frame was captured".into());
    } else if unknown > 0 {
        stack.completeness = StackCompleteness::ModuleUnknown;
        notes.insert(
            0,
            match &modules.missing {
                Some(why) => why.clone(),
                None => format!("{unknown} frame(s) in no mapped file"),
            },
        );
    } else if walk.failed {
        stack.completeness = StackCompleteness::SymbolisationFailed;
    } else if let Some(e) = failed {
        stack.completeness = StackCompleteness::SymbolisationFailed;
        notes.insert(0, format!("symbolisation failed: {e}"));
    } else if walk.frame_pointers {
        stack.completeness = StackCompleteness::FramePointersOnly;
    }
    if !notes.is_empty() {
        stack.detail = Some(notes.join("; "));
    }
    stack
}

/// The crashed thread's stack walked: unwound from its registers when the
/// record has them (a parser that panics costs the unwind, never tracer),
/// else the kernel's frame-pointer walk alone.
fn walk(rec: &CrashRecord, modules: &Modules, images: &image::Images) -> unwind::Walk {
    if rec.flags & CRASH_HAS_REGS != 0 {
        // The unwind tables are the wrapped command's: a parser that
        // panics on them (gimli 0.33 overflows on a fuzzed .eh_frame_hdr,
        // tests.rs) costs this crash its unwind, never tracer its run.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            unwind::walk(rec, modules, images)
        }))
        .unwrap_or_else(|_| {
            let mut w = unwind::Walk::kernel_only(
                rec,
                "symbolisation failed: the unwinder panicked on the modules' unwind tables",
            );
            w.failed = true;
            if w.frames.is_empty() && rec.regs[0] != 0 {
                w.frames.push(unwind::Frame {
                    lookup: rec.regs[0],
                });
            }
            w
        })
    } else {
        unwind::Walk::kernel_only(
            rec,
            "no user registers (bpf_task_pt_regs needs 5.15; none found on the task's kernel stack): \
             the kernel's frame-pointer walk only",
        )
    }
}

/// The frames of a walk named.
struct Named {
    frames: Vec<CrashFrame>,
    /// Frames in no mapped file.
    unknown: usize,
    /// The first module that could not be named, and why.
    failed: Option<String>,
}

/// Each address of the walk named from the module it falls in, a JIT
/// frame from its process's perf map, any other by address alone; a
/// frame-pointer walk that leaves the process's files ends there, said in
/// `notes`.
fn name_frames(
    rec: &CrashRecord,
    modules: &Modules,
    images: &image::Images,
    addrs: &[unwind::Frame],
    frame_pointers: bool,
    notes: &mut Vec<String>,
) -> Named {
    let mut unknown = 0usize;
    let mut failed: Option<String> = None;
    let mut frames = Vec::new();
    for (i, f) in addrs.iter().enumerate() {
        let Some(m) = modules.mapping(f.lookup) else {
            if let Some(j) = modules.jit_frame(f.lookup) {
                frames.push(j);
                continue;
            }
            // A frame-pointer walk through code built without frame
            // pointers follows whatever the register held: on 5.10 (no
            // registers, the kernel's walk only) a -O2 C crash's walk went
            // from its one real frame to the same unmapped address ten
            // times over. Past a frame in a known module, an address in
            // none is the walk gone astray: it ends there, said.
            if frame_pointers && frames.iter().any(|x: &CrashFrame| x.module.is_some()) {
                notes.push(format!(
                    "the frame-pointer walk left the process's files after {i} frame(s) \
                     (code without frame pointers): the {} address(es) it went on to are not shown",
                    addrs.len() - i
                ));
                break;
            }
            unknown += 1;
            frames.push(CrashFrame {
                address: f.lookup,
                build_id: kernel_build_id(rec, f.lookup),
                ..Default::default()
            });
            continue;
        };
        let offset = f.lookup - m.start + m.offset;
        let img = m.file.and_then(|i| images.get(i));
        let mut base = CrashFrame {
            address: f.lookup,
            module: Some(m.path.clone()),
            build_id: img.and_then(|i| i.build_id.clone()),
            offset: Some(offset),
            ..Default::default()
        };
        match img {
            Some(img) => {
                let named = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    names::name(img, offset)
                }))
                .unwrap_or_else(|_| Err("the symboliser panicked on it".into()));
                match named {
                    Ok(named) => frames.extend(named.into_frames(base)),
                    Err(e) => {
                        failed.get_or_insert(format!("{}: {e}", m.path));
                        frames.push(base);
                    }
                }
            }
            None => {
                if let Some(e) = m.file.and_then(|i| images.error(i)) {
                    failed.get_or_insert(format!("{}: {e}", m.path));
                }
                base.build_id = base.build_id.or_else(|| kernel_build_id(rec, f.lookup));
                frames.push(base);
            }
        }
    }
    Named {
        frames,
        unknown,
        failed,
    }
}

/// The kernel's build id for the frame at `addr`, when its walk had one
/// (the module may be gone by the time user space reads the maps).
fn kernel_build_id(rec: &CrashRecord, addr: u64) -> Option<String> {
    let n = (rec.ips_len as usize)
        .min(rec.ips.len())
        .min(rec.build_ids_len as usize);
    (0..n)
        .find(|&i| rec.ips[i] == addr || rec.ips[i].wrapping_sub(1) == addr)
        .map(|i| &rec.build_ids[i])
        .filter(|b| b.status == BUILD_ID_VALID)
        .map(|b| hex(&b.build_id))
}

/// Text up to the first NUL.
pub(crate) fn cstr(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The signals whose `si_addr` is the faulting address, when the kernel
/// raised them (si_code > 0).
fn carries_addr(sig: i32, code: i32) -> bool {
    use tracer_common::signals::{SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP};
    code > 0 && [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP].contains(&sig)
}
