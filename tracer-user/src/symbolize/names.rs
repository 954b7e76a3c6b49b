//! Names for a frame: blazesym over the frozen copy of its module (ELF
//! symtab, DWARF file:line and inlined functions, demangled).
use blazesym::symbolize::{
    source::{Elf, Source},
    CodeInfo, Input, Symbolized, Symbolizer,
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
    let symbolizer = Symbolizer::builder()
        .enable_code_info(true)
        .enable_inlined_fns(true)
        .enable_demangling(true)
        // Only the module itself: a debug directory or debuglink path is
        // the wrapped command's to choose, and read as root.
        .set_debug_dirs(None::<&[&str]>)
        .build();
    // With debug info first; a module whose DWARF (or debug link) does
    // not resolve the address is asked again for its ELF symbols alone
    // (a distribution's stripped libc keeps only .dynsym).
    let mut sym = Symbolized::Unknown(blazesym::symbolize::Reason::Unsupported);
    for debug_syms in [true, false] {
        let mut elf = Elf::new(img.path());
        elf.debug_syms = debug_syms;
        let src = Source::Elf(elf);
        match symbolizer.symbolize_single(&src, Input::FileOffset(offset)) {
            Ok(found @ Symbolized::Sym(_)) => {
                sym = found;
                break;
            }
            Ok(_) => {}
            Err(e) if !debug_syms => return Err(e.to_string()),
            Err(_) => {}
        }
    }
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
