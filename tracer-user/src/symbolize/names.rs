//! Names for a frame: blazesym over the frozen copy of its module (ELF
//! symtab, DWARF file:line and inlined functions, demangled).
use blazesym::symbolize::{
    source::{Elf, Source},
    CodeInfo, Input, Symbolized,
};

use super::image::Image;
use crate::eventlog::CrashFrame;

/// Longest symbol or file name kept (a hostile binary's names are any
/// length).
const MAX_NAME: usize = 512;

pub(super) struct Named {
    /// Innermost first: the inlined functions at the address, then the
    /// function they were inlined into.
    parts: Vec<(String, Option<String>, Option<u32>, bool)>,
}

impl Named {
    pub(super) fn into_frames(self, base: CrashFrame) -> Vec<CrashFrame> {
        if self.parts.is_empty() {
            return vec![base];
        }
        self.parts
            .into_iter()
            .map(|(symbol, file, line, inlined)| CrashFrame {
                symbol: Some(symbol),
                file,
                line,
                inlined,
                ..base.clone()
            })
            .collect()
    }
}

fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_NAME) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

fn place(ci: Option<&CodeInfo>) -> (Option<String>, Option<u32>) {
    match ci {
        Some(ci) => (Some(cut(&ci.to_path().to_string_lossy())), ci.line),
        None => (None, None),
    }
}

/// The function (and what was inlined into it) at file offset `offset`.
/// No symbol there is not an error: the frame keeps its address.
pub(super) fn name(img: &Image, offset: u64) -> Result<Named, String> {
    // A module without DWARF whose debug file was found: named from that
    // (its symbols and DWARF, by address); else, or when it names
    // nothing, from the module itself.
    if let (Some(debug), Some(addr)) = (&img.debug, img.address_of(offset)) {
        use std::os::fd::AsRawFd;
        let elf = Elf::new(format!("/proc/self/fd/{}", debug.as_raw_fd()));
        if let Ok(named) = lookup(img, elf, Input::VirtOffset(addr)) {
            if !named.parts.is_empty() {
                return Ok(named);
            }
        }
    }
    // A module's own DWARF when it has any; else its ELF symbols alone (a
    // distribution's stripped libc keeps only .dynsym). Never blazesym's
    // own debug-link search: it checksummed candidate files on every
    // lookup (crc32 was most of tracer's time in a crash storm); the link
    // is followed once per module, in `Image::map`.
    let mut elf = Elf::new(img.path());
    elf.debug_syms = img.has_dwarf;
    lookup(img, elf, Input::FileOffset(offset))
}

fn lookup(img: &Image, elf: Elf, input: Input<u64>) -> Result<Named, String> {
    let sym = img
        .symbolizer
        .symbolize_single(&Source::Elf(elf), input)
        .map_err(|e| e.to_string())?;
    let mut parts = Vec::new();
    if let Symbolized::Sym(sym) = sym {
        // blazesym lists the inlined calls outermost first; each one's
        // code info is where the instruction is in it, the outer
        // function's is the call site of the first inlined one.
        let mut inner: Vec<_> = sym.inlined.iter().collect();
        inner.reverse();
        for f in inner {
            let (file, line) = place(f.code_info.as_ref());
            parts.push((cut(&f.name), file, line, true));
        }
        let (file, line) = place(sym.code_info.as_deref());
        parts.push((cut(&sym.name), file, line, false));
    }
    Ok(Named { parts })
}
