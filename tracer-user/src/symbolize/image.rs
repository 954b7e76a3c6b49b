//! A module's file, frozen: copied (bounded) by tracer into a sealed memfd
//! that only tracer holds (`ImageCache`), then mapped and parsed in the
//! parse child (`Images`, `sandbox.rs`). The wrapped command cannot change or
//! truncate what is parsed (a mapping of its own file would fault with
//! SIGBUS in tracer when truncated), and the copy is the file that was
//! mapped (opened through its fd, never by path again).
use std::{
    fs::File,
    io::{Read, Write},
    os::fd::{AsRawFd, FromRawFd},
    path::{Path, PathBuf},
    rc::Rc,
    sync::Arc,
};

use object::{Object, ObjectSection};

/// The largest module read (a test binary with full debug info is tens of
/// MB; libc ~2 MB). Beyond it the module's frames keep their address and
/// offset, no name.
pub const MAX_MODULE_BYTES: u64 = 512 << 20;

/// The copies of a crash's modules, by `Modules::files` index, mapped and
/// parsed: in the parse child (`sandbox.rs`), never in tracer itself.
pub(super) struct Images {
    slots: Vec<Result<Rc<Image>, String>>,
}

/// A module's sealed copy, made by tracer (`ImageCache`) and handed to the
/// parse child by fd.
pub(super) struct Frozen {
    pub memfd: File,
}

pub(super) struct Image {
    /// The memfd the copy is in: blazesym opens it as /proc/self/fd/N.
    pub memfd: File,
    pub map: Arc<memmap2::Mmap>,
    pub build_id: Option<String>,
    /// It has DWARF of its own (`.debug_info`).
    pub has_dwarf: bool,
    /// blazesym's parsed view of this copy (symbols, DWARF), kept with it:
    /// the next crash in the same module (of one parse child's batch)
    /// costs lookups, not a parse.
    pub symbolizer: blazesym::symbolize::Symbolizer,
    /// A module without DWARF of its own: its separate debug file, found
    /// by build id in a debug directory (`.build-id/xx/yyyy.debug`, its
    /// build id checked) or else by its `.gnu_debuglink` (its CRC-32
    /// checked), held open (read as /proc/self/fd/N).
    pub debug: Option<File>,
}

/// A file as it was copied: (device, inode, size, mtime s, mtime ns).
type FileKey = (u64, u64, u64, i64, i64);

/// Module copies kept across crashes (a crash storm of one test binary
/// copies its modules once: before, each crash cost a copy of libc and the
/// binary). Bounded: emptied when full. Only copies: nothing here parses.
#[derive(Default)]
pub struct ImageCache {
    images: std::collections::HashMap<FileKey, Rc<Frozen>>,
}

/// Copies kept at most: their memory is the files' size, in memfds.
const MAX_CACHED: usize = 32;

impl ImageCache {
    pub(super) fn get(&mut self, file: &File) -> Result<Rc<Frozen>, String> {
        use std::os::unix::fs::MetadataExt;
        let m = file.metadata().map_err(|e| e.to_string())?;
        let key = (m.dev(), m.ino(), m.size(), m.mtime(), m.mtime_nsec());
        if let Some(img) = self.images.get(&key) {
            return Ok(img.clone());
        }
        let img = Rc::new(Frozen::copy(file)?);
        if self.images.len() >= MAX_CACHED {
            self.images.clear();
        }
        self.images.insert(key, img.clone());
        Ok(img)
    }
}

impl Images {
    pub(super) fn new(slots: Vec<Result<Rc<Image>, String>>) -> Self {
        Self { slots }
    }

    /// Slots, one per `Modules::files` index.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    pub(super) fn get(&self, i: usize) -> Option<&Image> {
        self.slots.get(i)?.as_ref().ok().map(|a| &**a)
    }

    pub(super) fn error(&self, i: usize) -> Option<&str> {
        self.slots.get(i)?.as_ref().err().map(String::as_str)
    }
}

impl Frozen {
    fn copy(file: &File) -> Result<Frozen, String> {
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        if len > MAX_MODULE_BYTES {
            return Err(format!(
                "{len} bytes, more than the {} MiB tracer reads",
                MAX_MODULE_BYTES >> 20
            ));
        }
        let memfd = memfd().map_err(|e| format!("memfd: {e}"))?;
        let mut src = file.take(MAX_MODULE_BYTES);
        let mut dst = &memfd;
        // pread-like: the fd's offset is tracer's own (opened for this).
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = src.read(&mut buf).map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                break;
            }
            dst.write_all(&buf[..n]).map_err(|e| format!("copy: {e}"))?;
        }
        seal(&memfd).map_err(|e| format!("seal: {e}"))?;
        Ok(Frozen { memfd })
    }
}

impl Image {
    /// Map and parse a module's copy (`memfd`: sealed by tracer); a
    /// module without DWARF looks for its debug file in `debug_dirs` and,
    /// by its debug link, beside `module` (its path in /proc/PID/maps).
    pub(super) fn map(
        memfd: File,
        module: Option<&Path>,
        debug_dirs: &[PathBuf],
    ) -> Result<Image, String> {
        // Mapped private, read-only: kernels before 6.7 refuse a shared
        // mapping of a memfd sealed with F_SEAL_WRITE, even a read-only one
        // (EPERM: on the VM matrix's 5.10 every crash lost its symbols).
        // SAFETY: the memfd is sealed against writes and shrinking by
        // tracer, which made it: the mapping's bytes cannot change or
        // disappear.
        let map = unsafe { memmap2::MmapOptions::new().map_copy_read_only(&memfd) }
            .map_err(|e| format!("mmap: {e}"))?;
        let obj = object::File::parse(&map[..]).ok();
        let build_id = obj
            .as_ref()
            .and_then(|o| o.build_id().ok().flatten().map(super::hex));
        let has_dwarf = obj
            .as_ref()
            .is_some_and(|o| o.section_by_name(".debug_info").is_some());
        let debug = obj.as_ref().filter(|_| !has_dwarf).and_then(|o| {
            build_id
                .as_deref()
                .and_then(|id| debug_file(id, debug_dirs))
                .or_else(|| linked_debug_file(o, module, debug_dirs))
        });
        Ok(Image {
            memfd,
            map: Arc::new(map),
            build_id,
            has_dwarf,
            symbolizer: symbolizer(),
            debug,
        })
    }

    /// `/proc/self/fd/N` of the copy (for blazesym, which opens by path).
    pub(super) fn path(&self) -> String {
        format!("/proc/self/fd/{}", self.memfd.as_raw_fd())
    }

    /// The address (as in the ELF file) of file offset `offset`: where
    /// its debug file, laid out by address, has it.
    pub(super) fn address_of(&self, offset: u64) -> Option<u64> {
        use object::ObjectSegment;
        let obj = object::File::parse(&self.map[..]).ok()?;
        obj.segments().find_map(|s| {
            let (off, size) = s.file_range();
            (off..off.checked_add(size)?)
                .contains(&offset)
                .then(|| offset - off + s.address())
        })
    }

    /// A section's bytes and its address range (SVMA).
    pub(super) fn section(&self, name: &str) -> Option<(Bytes, std::ops::Range<u64>)> {
        let obj = object::File::parse(&self.map[..]).ok()?;
        let s = obj.section_by_name(name)?;
        let (off, size) = s.file_range()?;
        let (off, size) = (usize::try_from(off).ok()?, usize::try_from(size).ok()?);
        if off.checked_add(size)? > self.map.len() {
            return None;
        }
        Some((
            Bytes {
                map: Some(self.map.clone()),
                range: off..off + size,
            },
            s.address()..s.address() + s.size(),
        ))
    }
}

/// Part of an image's mapping, as framehop takes section data.
/// (`Default`, empty: framehop's section info asks for it.)
#[derive(Clone, Default)]
pub(super) struct Bytes {
    map: Option<Arc<memmap2::Mmap>>,
    range: std::ops::Range<usize>,
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.map {
            Some(m) => m.get(self.range.clone()).unwrap_or(&[]),
            None => &[],
        }
    }
}

fn memfd() -> std::io::Result<File> {
    // SAFETY: a NUL-terminated name and flags; the fd returned is owned
    // by the File below.
    let fd = unsafe {
        libc::memfd_create(
            c"tracer-module".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn seal(f: &File) -> std::io::Result<()> {
    let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL;
    // SAFETY: fcntl on an fd this File owns.
    if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_ADD_SEALS, seals) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The debug file of build id `id` in `dirs` (`DIR/.build-id/xx/yyyy.debug`,
/// as distributions install them), opened as the parse child's user
/// (a regular file only), its own build id the same.
fn debug_file(id: &str, dirs: &[PathBuf]) -> Option<File> {
    if id.len() < 3 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    dirs.iter().find_map(|dir| {
        let path = dir
            .join(".build-id")
            .join(&id[..2])
            .join(format!("{}.debug", &id[2..]));
        let f = super::found::open_regular(&path)?;
        (super::found::note_build_id(&f).as_deref() == Some(id)).then_some(f)
    })
}

/// The debug file a module's `.gnu_debuglink` names (a file name and the
/// CRC-32 of that file, as `objcopy --add-gnu-debuglink` writes them),
/// looked for where GDB looks: beside the module, in its `.debug/`, and
/// under each debug directory by the module's own directory
/// (`/usr/lib/debug/usr/bin/x.debug`). Opened as the parse child's user;
/// the first candidate whose CRC-32 matches, read to its end once (a
/// mismatched candidate, another build's debug file, is never used: it
/// would name the wrong functions).
fn linked_debug_file(obj: &object::File, module: Option<&Path>, dirs: &[PathBuf]) -> Option<File> {
    let (name, crc) = obj.gnu_debuglink().ok().flatten()?;
    let name = std::str::from_utf8(name).ok()?;
    // A file name, never a path: the link is the command's to write.
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return None;
    }
    let dir = module?.parent().filter(|d| d.is_absolute())?;
    let relative = dir.strip_prefix("/").ok()?;
    let candidates = [dir.join(name), dir.join(".debug").join(name)]
        .into_iter()
        .chain(dirs.iter().map(|d| d.join(relative).join(name)));
    candidates
        .filter_map(|path| super::found::open_regular(&path))
        .find(|f| crc32_of(f) == Some(crc))
}

/// The CRC-32 (IEEE, as the debug link has it) of a file, bounded.
fn crc32_of(f: &File) -> Option<u32> {
    let mut h = crc32fast::Hasher::new();
    let mut src = f.take(MAX_MODULE_BYTES);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match src.read(&mut buf).ok()? {
            0 => return Some(h.finalize()),
            n => h.update(&buf[..n]),
        }
    }
}

/// blazesym's reader of one module copy: line tables, inlined functions,
/// demangled names.
fn symbolizer() -> blazesym::symbolize::Symbolizer {
    blazesym::symbolize::Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        // Only the module itself: a debug directory or debuglink path is
        // the wrapped command's to choose, and read as root.
        .set_debug_dirs(None::<&[&str]>)
        .build()
}
