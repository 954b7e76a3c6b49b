//! The modules of a process that was gone before its maps could be read
//! (the common case: a crashed process without a core dump exits within
//! microseconds of the signal's delivery, before tracer wakes). Found from
//! what the kernel side recorded while it lived, each file checked to be the
//! one that was mapped:
//! - the executable: the path it was exec'd by, checked against the inode
//!   and device of `mm->exe_file`, placed at `mm->start_code`;
//! - every module the kernel's stack walk named by build id: looked up by
//!   that build id in the system's library directories, placed by the
//!   frame's address and its file offset.
//!
//! A file whose identity does not match is never used: a frame without a
//! module is said so, never named from the wrong file.
use std::{
    collections::HashMap,
    fs::File,
    os::unix::fs::{FileExt, MetadataExt},
    path::{Path, PathBuf},
};

use tracer_common::{CrashRecord, BUILD_ID_VALID};

use super::{hex, Mapping, Modules};

/// Library directories searched for a build id (not recursively), per
/// architecture: where the dynamic linker finds libc, libstdc++, libgcc_s.
#[cfg(target_arch = "aarch64")]
const LIB_DIRS: &[&str] = &[
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
];
#[cfg(not(target_arch = "aarch64"))]
const LIB_DIRS: &[&str] = &[
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
    "/usr/local/lib",
];
/// Files whose build id is read for the index, at most (a distribution's
/// library directories hold a few thousand; reading one's notes is one
/// small pread).
const MAX_INDEXED: usize = 8192;

/// Build id -> library path, read once (on the first crash that needs it)
/// and kept for tracer's life.
#[derive(Default)]
pub struct LibIndex {
    by_id: Option<HashMap<String, PathBuf>>,
}

impl LibIndex {
    fn find(&mut self, build_id: &str) -> Option<&Path> {
        let index = self.by_id.get_or_insert_with(build_index);
        index.get(build_id).map(PathBuf::as_path)
    }
}

fn build_index() -> HashMap<String, PathBuf> {
    let mut index = HashMap::new();
    let mut n = 0;
    for dir in LIB_DIRS {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            if n >= MAX_INDEXED {
                return index;
            }
            let name = e.file_name();
            if !name.to_string_lossy().contains(".so") {
                continue;
            }
            n += 1;
            let path = e.path();
            let Some(f) = open_regular(&path) else {
                continue;
            };
            if let Some(id) = note_build_id(&f) {
                index.entry(id).or_insert(path);
            }
        }
    }
    index
}

/// Open `path` for reading only if it is a regular file: O_PATH first (a
/// FIFO's or device's open never runs), checked, then reopened through
/// tracer's own fd.
pub(crate) fn open_regular(path: &Path) -> Option<File> {
    use std::os::{fd::AsRawFd, unix::fs::OpenOptionsExt};
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if !handle.metadata().ok()?.file_type().is_file() {
        return None;
    }
    File::open(format!("/proc/self/fd/{}", handle.as_raw_fd())).ok()
}

/// The GNU build id from a file's PT_NOTE segments, read with a few
/// bounded preads (never the whole file).
pub(crate) fn note_build_id(f: &File) -> Option<String> {
    let mut eh = [0u8; 64];
    f.read_exact_at(&mut eh, 0).ok()?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None; // ELF64 little-endian only (x86-64, aarch64)
    }
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes([b[o], b[o + 1]]) as usize;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    let (phoff, phentsize, phnum) = (u64_at(&eh, 0x20), u16_at(&eh, 0x36), u16_at(&eh, 0x38));
    if phentsize < 56 || phnum > 64 {
        return None;
    }
    let mut ph = vec![0u8; phentsize * phnum];
    f.read_exact_at(&mut ph, phoff).ok()?;
    for p in ph.chunks(phentsize) {
        if u32_at(p, 0) != 4 {
            continue; // PT_NOTE
        }
        let (off, size) = (u64_at(p, 0x08), u64_at(p, 0x20).min(4096) as usize);
        let mut notes = vec![0u8; size];
        if f.read_exact_at(&mut notes, off).is_err() {
            continue;
        }
        let mut at = 0;
        while at + 12 <= notes.len() {
            let (namesz, descsz, ty) = (
                u32_at(&notes, at) as usize,
                u32_at(&notes, at + 4) as usize,
                u32_at(&notes, at + 8),
            );
            let name_at = at + 12;
            let desc_at = name_at + namesz.div_ceil(4) * 4;
            let end = desc_at.checked_add(descsz.div_ceil(4) * 4)?;
            if end > notes.len() + 3 || desc_at + descsz > notes.len() {
                break;
            }
            if ty == 3 && namesz == 4 && &notes[name_at..name_at + 4] == b"GNU\0" {
                return Some(hex(&notes[desc_at..desc_at + descsz]));
            }
            at = end;
        }
    }
    None
}

/// `PT_LOAD` segments of an ELF file: (vaddr, memsz, file offset, executable).
fn loads(f: &File) -> Option<Vec<(u64, u64, u64, bool)>> {
    let mut eh = [0u8; 64];
    f.read_exact_at(&mut eh, 0).ok()?;
    if &eh[..4] != b"\x7fELF" || eh[4] != 2 || eh[5] != 1 {
        return None;
    }
    let phoff = u64::from_le_bytes(eh[0x20..0x28].try_into().ok()?);
    let phentsize = u16::from_le_bytes([eh[0x36], eh[0x37]]) as usize;
    let phnum = u16::from_le_bytes([eh[0x38], eh[0x39]]) as usize;
    if phentsize < 56 || phnum > 64 {
        return None;
    }
    let mut ph = vec![0u8; phentsize * phnum];
    f.read_exact_at(&mut ph, phoff).ok()?;
    let u64_at = |p: &[u8], o: usize| u64::from_le_bytes(p[o..o + 8].try_into().unwrap_or([0; 8]));
    Some(
        ph.chunks(phentsize)
            .filter(|p| u32::from_le_bytes(p[0..4].try_into().unwrap_or([0; 4])) == 1)
            .map(|p| {
                let flags = u32::from_le_bytes(p[4..8].try_into().unwrap_or([0; 4]));
                (
                    u64_at(p, 0x10),
                    u64_at(p, 0x28),
                    u64_at(p, 0x08),
                    flags & 1 != 0,
                )
            })
            .collect(),
    )
}

/// Add `file`'s segments at load bias `bias` as mappings of `modules`.
fn place(modules: &mut Modules, file: File, path: String, bias: u64) -> Option<()> {
    let segs = loads(&file)?;
    let i = modules.files.len();
    for (vaddr, memsz, offset, executable) in segs {
        let page = vaddr & 0xfff;
        modules.mappings.push(Mapping {
            start: bias.wrapping_add(vaddr - page),
            end: bias.wrapping_add(vaddr + memsz),
            offset: offset.saturating_sub(page),
            executable,
            path: path.clone(),
            deleted: false,
            file: Some(i),
        });
    }
    modules.files.push(file);
    Some(())
}

/// The kernel's `s_dev` (MAJOR << 20 | MINOR) as (major, minor).
fn kdev(dev: u32) -> (u64, u64) {
    ((dev >> 20) as u64, (dev & 0xfffff) as u64)
}

pub(super) use crate::outdir::as_user;

/// The owner, group and mode of the executable `rec`'s process ran: the
/// file under one of its exec paths `exes` that is the kernel's own (the
/// inode and device of `mm->exe_file`), stat'ed, never opened. A set-id
/// program is known by it once its process is gone.
pub fn exe_owner_mode(rec: &CrashRecord, exes: &[String]) -> Option<(u32, u32, u32)> {
    if rec.exe_ino == 0 {
        return None;
    }
    exes.iter().find_map(|path| {
        let meta = std::fs::metadata(path).ok()?;
        let dev = (
            libc::major(meta.dev()) as u64,
            libc::minor(meta.dev()) as u64,
        );
        (meta.ino() == rec.exe_ino && dev == kdev(rec.exe_dev))
            .then(|| (meta.uid(), meta.gid(), meta.mode()))
    })
}

/// The modules of `rec`'s process from what the kernel recorded: `exes`
/// are the paths it may have been exec'd by (the latest first).
pub(super) fn rebuild(rec: &CrashRecord, exes: &[String], libs: &mut LibIndex) -> Modules {
    let mut modules = Modules::default();
    let mut seen_ids: Vec<String> = Vec::new();
    if rec.exe_ino != 0 && rec.exe_start_code != 0 {
        for path in exes {
            let Some(f) = open_regular(Path::new(path)) else {
                continue;
            };
            let Ok(meta) = f.metadata() else { continue };
            let dev = (
                libc::major(meta.dev()) as u64,
                libc::minor(meta.dev()) as u64,
            );
            if meta.ino() != rec.exe_ino || dev != kdev(rec.exe_dev) {
                continue;
            }
            let Some(segs) = loads(&f) else { continue };
            let Some(text) = segs.iter().filter(|s| s.3).map(|s| s.0).min() else {
                continue;
            };
            if let Some(id) = note_build_id(&f) {
                seen_ids.push(id);
            }
            let path = std::fs::canonicalize(path)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| path.clone());
            place(&mut modules, f, path, rec.exe_start_code.wrapping_sub(text));
            break;
        }
    }
    let n = (rec.build_ids_len as usize).min(rec.build_ids.len());
    // The dynamic linker's list (read from the process's memory while it
    // lived): each shared object by its path at its load bias. A module
    // the kernel's walk named by build id must be that build id.
    let objects = (rec.objects_len as usize).min(rec.objects.len());
    for o in &rec.objects[..objects] {
        let name = crate::symbolize::cstr(&o.name);
        if !name.starts_with('/') || modules.mappings.iter().any(|m| m.path == name) {
            continue;
        }
        let Some(f) = open_regular(Path::new(&name)) else {
            continue;
        };
        let id = note_build_id(&f);
        if id.as_ref().is_some_and(|id| seen_ids.contains(id)) {
            continue;
        }
        let before = modules.mappings.len();
        if place(&mut modules, f, name, o.bias).is_none() {
            continue;
        }
        // A kernel frame in this range whose file offset is the one this
        // placement gives it is a claim about this module: its build id
        // must be this file's. (One whose offset is not was resolved
        // against another mapping: the kernel's build-id walk takes the
        // next mapping above an unmapped address.)
        let placed = &modules.mappings[before..];
        let contradicted = (0..n).any(|i| {
            let b = &rec.build_ids[i];
            let ip = rec.ips.get(i).copied().unwrap_or(0);
            let ours = placed
                .iter()
                .find(|m| (m.start..m.end).contains(&ip))
                .map(|m| ip - m.start + m.offset);
            b.status == BUILD_ID_VALID
                && ours == Some(b.offset_or_ip)
                && id.as_deref() != Some(hex(&b.build_id).as_str())
        });
        if contradicted {
            modules.mappings.truncate(before);
            modules.files.pop();
            continue;
        }
        seen_ids.extend(id);
    }
    // Modules the kernel's walk named by build id and nothing above placed.
    for b in &rec.build_ids[..n] {
        if b.status != BUILD_ID_VALID {
            continue;
        }
        let id = hex(&b.build_id);
        if seen_ids.contains(&id) {
            continue;
        }
        seen_ids.push(id.clone());
        let Some(path) = libs.find(&id).map(Path::to_path_buf) else {
            continue;
        };
        let Some(f) = open_regular(&path) else {
            continue;
        };
        // The index may be older than the file: read its id again.
        if note_build_id(&f).as_deref() != Some(id.as_str()) {
            continue;
        }
        let Some(segs) = loads(&f) else { continue };
        // The frame's address and file offset place the module.
        let i = rec.build_ids[..n]
            .iter()
            .position(|x| std::ptr::eq(x, b))
            .unwrap_or(0);
        let Some(ip) = rec.ips.get(i).copied().filter(|_| i < rec.ips_len as usize) else {
            continue;
        };
        let off = b.offset_or_ip;
        let Some(seg) = segs.iter().find(|s| off >= s.2 && off < s.2 + s.1.max(1)) else {
            continue;
        };
        let svma = off - seg.2 + seg.0;
        let path = path.to_string_lossy().into_owned();
        place(&mut modules, f, path, ip.wrapping_sub(svma));
    }
    modules.mappings.sort_by_key(|m| m.start);
    modules
}
