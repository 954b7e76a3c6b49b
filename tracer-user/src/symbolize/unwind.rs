//! Frames from a crash record: framehop's unwind from the registers over
//! the copied stack, DWARF CFI where a module has it and frame pointers
//! where it has none; where the walk leaves the copy, the kernel's own
//! frame-pointer walk (`ips`) carries on from the frame they share.
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use object::{Object, ObjectSegment};
use tracer_common::{CrashRecord, CRASH_PAGE, CRASH_STACK_BYTES};

use super::{
    image::{Bytes, Images},
    Modules, MAX_CRASH_FRAMES,
};

/// A frame's address to look up: the instruction pointer for the first,
/// the return address less one (inside the call) for the callers.
pub(super) struct Frame {
    pub lookup: u64,
}

pub(super) struct Walk {
    pub frames: Vec<Frame>,
    /// Some frames were found by frame pointers alone.
    pub frame_pointers: bool,
    pub note: Option<String>,
    /// The unwind itself failed (a parser panicked on the tables).
    pub failed: bool,
}

impl Walk {
    /// The kernel's frame-pointer walk alone.
    pub(super) fn kernel_only(rec: &CrashRecord, why: &str) -> Walk {
        Walk {
            frames: kernel_frames(rec, 0),
            frame_pointers: true,
            note: Some(why.to_string()),
            failed: false,
        }
    }
}

/// The kernel's walk from entry `from`: the first is the ip, the rest
/// return addresses.
fn kernel_frames(rec: &CrashRecord, from: usize) -> Vec<Frame> {
    let n = (rec.ips_len as usize).min(rec.ips.len());
    (from..n)
        .map(|i| Frame {
            lookup: if i == 0 {
                rec.ips[0]
            } else {
                rec.ips[i].wrapping_sub(1)
            },
        })
        .collect()
}

/// A u64 of the copied stack, if `addr` is in a page that was read.
fn read_stack(rec: &CrashRecord, addr: u64) -> Result<u64, ()> {
    let off = addr.checked_sub(rec.stack_base).ok_or(())? as usize;
    if !off.is_multiple_of(8) || off + 8 > CRASH_STACK_BYTES {
        return Err(());
    }
    if rec.pages_ok & (1 << (off / CRASH_PAGE)) == 0 {
        return Err(());
    }
    Ok(u64::from_le_bytes(
        rec.stack[off..off + 8].try_into().map_err(|_| ())?,
    ))
}

pub(super) fn walk(rec: &CrashRecord, modules: &Modules, images: &Images) -> Walk {
    let (mut frames, no_cfi, error) = arch_walk(rec, modules, images);
    let mut frame_pointers = no_cfi;
    let mut note = None;
    if let Some(e) = error {
        // Where the kernel's walk holds the frame the unwind stopped at,
        // its later frames carry on (frame pointers: said so).
        let n = (rec.ips_len as usize).min(rec.ips.len());
        let last = frames.last().map(|f| f.lookup);
        let at = (0..n).find(|&i| {
            Some(if i == 0 {
                rec.ips[0]
            } else {
                rec.ips[i].wrapping_sub(1)
            }) == last
        });
        match at {
            Some(i) if i + 1 < n => {
                frames.extend(kernel_frames(rec, i + 1));
                frame_pointers = true;
                note = Some(format!(
                    "the unwind stopped after {} frames ({e}); the rest are the kernel's frame-pointer walk",
                    i + 1
                ));
            }
            _ if frames.len() <= 1 && n > 1 => {
                frames = kernel_frames(rec, 0);
                frame_pointers = true;
                note = Some(format!(
                    "the unwind stopped at the first frame ({e}): the kernel's frame-pointer walk"
                ));
            }
            _ => {
                note = Some(format!(
                    "the unwind stopped after {} frames: {e}",
                    frames.len()
                ))
            }
        }
    }
    Walk {
        frames,
        frame_pointers,
        note,
        failed: false,
    }
}

/// framehop modules of the crash's files: one per file, spanning its
/// mappings. Returns whether a frame fell in a module without unwind
/// tables (then framehop used frame pointers).
fn add_modules<U>(
    add: &mut U,
    modules: &Modules,
    images: &Images,
) -> Vec<(std::ops::Range<u64>, bool)>
where
    U: FnMut(Module<Bytes>),
{
    let mut spans = Vec::new();
    for i in 0..images.len() {
        let Some(img) = images.get(i) else { continue };
        let maps: Vec<_> = modules
            .mappings
            .iter()
            .filter(|m| m.file == Some(i))
            .collect();
        let (Some(lo), Some(hi)) = (
            maps.iter().map(|m| m.start).min(),
            maps.iter().map(|m| m.end).max(),
        ) else {
            continue;
        };
        let Some(first) = maps.iter().min_by_key(|m| m.start) else {
            continue;
        };
        let Ok(obj) = object::File::parse(&img.map[..]) else {
            continue;
        };
        // The address file offset 0 / section address 0 is mapped at.
        let (seg_vaddr, seg_off) = obj
            .segments()
            .next()
            .map(|s| (s.address(), s.file_range().0))
            .unwrap_or((0, 0));
        let base_avma = first
            .start
            .wrapping_sub(first.offset)
            .wrapping_sub(seg_vaddr.wrapping_sub(seg_off));
        let eh = img.section(".eh_frame");
        let hdr = img.section(".eh_frame_hdr");
        let dbg = img.section(".debug_frame");
        let text = img.section(".text");
        let got = img.section(".got");
        let has_cfi = eh.is_some() || dbg.is_some();
        let info = ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: text.as_ref().map(|t| t.1.clone()),
            text: text.map(|t| t.0),
            got_svma: got.map(|g| g.1),
            eh_frame_svma: eh.as_ref().map(|e| e.1.clone()),
            eh_frame: eh.map(|e| e.0),
            eh_frame_hdr_svma: hdr.as_ref().map(|h| h.1.clone()),
            eh_frame_hdr: hdr.map(|h| h.0),
            debug_frame: dbg.map(|d| d.0),
            ..Default::default()
        };
        add(Module::new(first.path.clone(), lo..hi, base_avma, info));
        spans.push((lo..hi, has_cfi));
    }
    spans
}

type ArchWalk = (Vec<Frame>, bool, Option<String>);

fn collect(
    mut next: impl FnMut() -> Result<Option<FrameAddress>, framehop::Error>,
    spans: &[(std::ops::Range<u64>, bool)],
) -> ArchWalk {
    let mut frames = Vec::new();
    let mut no_cfi = false;
    // A bound of its own besides the record's: a looping stack ends here.
    while frames.len() < 4 * MAX_CRASH_FRAMES {
        match next() {
            Ok(Some(f)) => {
                let lookup = f.address_for_lookup();
                if !spans.iter().any(|(r, cfi)| *cfi && r.contains(&lookup)) {
                    no_cfi = true;
                }
                frames.push(Frame { lookup });
            }
            Ok(None) => return (frames, no_cfi, None),
            Err(e) => return (frames, no_cfi, Some(e.to_string())),
        }
    }
    (frames, no_cfi, None)
}

#[cfg(target_arch = "x86_64")]
fn arch_walk(rec: &CrashRecord, modules: &Modules, images: &Images) -> ArchWalk {
    use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
    let mut unwinder = UnwinderX86_64::<Bytes>::new();
    let spans = add_modules(&mut |m| unwinder.add_module(m), modules, images);
    let mut cache = CacheX86_64::<_>::new();
    let [ip, sp, bp, _] = rec.regs;
    let regs = UnwindRegsX86_64::new(ip, sp, bp);
    let mut read = |a| read_stack(rec, a);
    let mut it = unwinder.iter_frames(ip, regs, &mut cache, &mut read);
    collect(|| it.next(), &spans)
}

#[cfg(target_arch = "aarch64")]
fn arch_walk(rec: &CrashRecord, modules: &Modules, images: &Images) -> ArchWalk {
    use framehop::aarch64::{CacheAarch64, UnwindRegsAarch64, UnwinderAarch64};
    let mut unwinder = UnwinderAarch64::<Bytes>::new();
    let spans = add_modules(&mut |m| unwinder.add_module(m), modules, images);
    let mut cache = CacheAarch64::<_>::new();
    let [pc, sp, fp, lr] = rec.regs;
    let regs = UnwindRegsAarch64::new(lr, sp, fp);
    let mut read = |a| read_stack(rec, a);
    let mut it = unwinder.iter_frames(pc, regs, &mut cache, &mut read);
    collect(|| it.next(), &spans)
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn arch_walk(rec: &CrashRecord, _: &Modules, _: &Images) -> ArchWalk {
    (kernel_frames(rec, 0), true, None)
}
