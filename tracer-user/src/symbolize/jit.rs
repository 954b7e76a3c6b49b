//! JIT code, named by the perf map its runtime writes: `/tmp/perf-PID.map`,
//! one `START SIZE name` line per function (hex, as V8 writes it under
//! Node's `--perf-basic-prof-only-functions`, the JVM's perf-map-agent,
//! .NET's `DOTNET_PerfMapEnabled` and LuaJIT; the format of the Linux
//! tree's tools/perf/Documentation/jit-interface.txt). A frame in no
//! mapped file (anonymous executable memory) is looked up here.
//!
//! The file is the wrapped command's: read bounded (`MAX_PERF_MAP_BYTES`),
//! never followed through a link (run/crash_maps.rs), each line parsed
//! with checked arithmetic, names cut; only the entries a frame of this
//! crash can fall in are kept (every address a walk can look up is the
//! instruction pointer, a return address from the copied stack, or one of
//! the kernel's frames), so a 100k-line map of a long-running JVM costs
//! the crash a handful of entries, not megabytes.
use serde::{Deserialize, Serialize};

/// The most of a perf map read (a busy Node process writes ~100 B per
/// compiled function: 16 MiB is ~160k functions).
pub const MAX_PERF_MAP_BYTES: u64 = 16 << 20;
/// The longest name kept (V8's names carry the script's path and line).
const MAX_JIT_NAME: usize = 512;
/// Entries kept per crash at most (each matches an address of the stack).
const MAX_KEPT: usize = 4096;

/// The perf map's entries a crash's frames may fall in.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct JitMap {
    /// The map's path as the process named it (`/tmp/perf-42.map`).
    pub path: String,
    /// In file order: a later line for the same code is the newer
    /// function (code space is reused after a collection).
    pub symbols: Vec<JitSymbol>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct JitSymbol {
    pub start: u64,
    pub end: u64,
    pub name: String,
}

impl JitMap {
    /// The entries of perf map `text` (named `path`) holding any of
    /// `addrs`: see [`parse`].
    pub fn parse(path: &str, text: &[u8], addrs: &[u64]) -> JitMap {
        parse(path, text, addrs)
    }

    /// The function at `addr`: the last line whose range holds it.
    pub fn lookup(&self, addr: u64) -> Option<&JitSymbol> {
        self.symbols
            .iter()
            .rev()
            .find(|s| s.start <= addr && addr < s.end)
    }
}

/// The entries of perf map `text` (named `path`) holding any of `addrs`
/// (each as it is and less one: a return address may be just past the
/// function that made the call). Malformed lines are skipped.
fn parse(path: &str, text: &[u8], addrs: &[u64]) -> JitMap {
    let mut wanted: Vec<u64> = addrs
        .iter()
        .flat_map(|&a| [a, a.wrapping_sub(1)])
        .filter(|&a| a != 0 && a != u64::MAX)
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let holds_one = |start: u64, end: u64| {
        let i = wanted.partition_point(|&a| a < start);
        wanted.get(i).is_some_and(|&a| a < end)
    };
    let mut symbols = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        if symbols.len() >= MAX_KEPT {
            break;
        }
        let Some((start, end, name)) = parse_line(line) else {
            continue;
        };
        if holds_one(start, end) {
            symbols.push(JitSymbol {
                start,
                end,
                name: name_of(name),
            });
        }
    }
    JitMap {
        path: path.to_string(),
        symbols,
    }
}

/// `START SIZE name`: hex numbers (an optional `0x`), a size above zero,
/// a range that does not wrap, a name that is not empty.
fn parse_line(line: &[u8]) -> Option<(u64, u64, &[u8])> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut it = line.splitn(3, |&b| b == b' ');
    let start = hex(it.next()?)?;
    let size = hex(it.next()?)?;
    let name = it.next()?;
    if size == 0 || name.is_empty() {
        return None;
    }
    Some((start, start.checked_add(size)?, name))
}

fn hex(field: &[u8]) -> Option<u64> {
    let digits = field
        .strip_prefix(b"0x")
        .or_else(|| field.strip_prefix(b"0X"))
        .unwrap_or(field);
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// A name as the report keeps it: lossy UTF-8, control characters as
/// U+FFFD (each report escapes for its own format; a name carries no line
/// breaks into the event log's readers), cut at `MAX_JIT_NAME` bytes.
fn name_of(raw: &[u8]) -> String {
    let s: String = String::from_utf8_lossy(raw)
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect();
    match s.char_indices().find(|&(i, _)| i >= MAX_JIT_NAME) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_entries_a_frame_falls_in_are_kept_and_the_newest_wins() {
        let text = b"1000 100 old_fn\n\
            2000 10 LazyCompile:*parse /srv/app/parse.js:42\n\
            3000 10 unrelated\n\
            1000 80 new_fn\n";
        let m = parse("/tmp/perf-7.map", text, &[0x1010, 0x200a]);
        let names: Vec<_> = m.symbols.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "old_fn",
                "LazyCompile:*parse /srv/app/parse.js:42",
                "new_fn"
            ]
        );
        assert_eq!(m.lookup(0x1010).unwrap().name, "new_fn");
        // Past new_fn's end, old_fn still holds it.
        assert_eq!(m.lookup(0x1090).map(|s| s.name.as_str()), Some("old_fn"));
        assert_eq!(m.lookup(0x200a).unwrap().start, 0x2000);
        assert!(m.lookup(0x3005).is_none(), "not kept: no frame there");
    }

    /// A return address just past the function that called: the entry
    /// holding the address less one is kept.
    #[test]
    fn a_return_address_at_a_functions_end_keeps_it() {
        let m = parse("p", b"4000 20 caller\n", &[0x4020]);
        assert_eq!(m.lookup(0x401f).unwrap().name, "caller");
    }

    /// Hostile lines: bad numbers, a range that wraps, a zero size, no
    /// name, a 17-digit number, control characters, an endless name.
    #[test]
    fn malformed_lines_are_skipped_and_names_are_bounded() {
        let long = "x".repeat(10_000);
        let text = format!(
            "zz 10 bad\n10 zz bad\nffffffffffffff00 1000 wraps\n20 0 empty\n30 10\n\
             10000000000000000 10 big\n0x40 0x10 with\u{1b}[31mescape\n50 10 {long}\n"
        );
        let m = parse("p", text.as_bytes(), &[0x10, 0x20, 0x35, 0x45, 0x55]);
        let names: Vec<_> = m.symbols.iter().map(|s| s.name.clone()).collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[0], "with\u{fffd}[31mescape");
        assert!(names[1].len() <= MAX_JIT_NAME + '…'.len_utf8());
    }
}
