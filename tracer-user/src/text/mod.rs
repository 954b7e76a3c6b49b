//! Untrusted text on its way to a reader. argv, comm, paths, stderr (and any
//! string read back from a log or a report) may hold newlines, CR, ESC
//! sequences, bidi overrides and CI workflow commands. Every output format
//! has ONE escaper, here, and every writer of that format uses it:
//! [`markdown`] (report.md, `tracer summarize`), [`html`] (report.html),
//! [`terminal`] (stderr lines). This module holds what they share: the
//! visible form of a control character, ANSI removal, and how a line is kept
//! from being read as a CI command. [`command`] shortens commands for
//! headlines; [`shape`] makes them the same from run to run (signatures);
//! [`xml`] escapes for JUnit files; [`env`] writes environment assignments
//! (`tracer integrations`: a shell's `export`, `$GITHUB_ENV`).
pub mod command;
pub mod env;
pub mod html;
pub mod invariants;
pub mod markdown;
pub mod shape;
pub mod terminal;
#[cfg(test)]
mod tests;
pub mod xml;

use std::fmt::Write as _;

/// Characters a reader must never receive raw: C0, DEL, C1 (all `Cc`), the
/// Unicode line and paragraph separators (some renderers break lines at
/// them), every bidi control (Unicode's `Bidi_Control` set: the embeddings,
/// overrides and isolates that reorder what is shown, "Trojan Source", and
/// the three marks, U+061C among them) and the invisible format characters
/// (zero-width space, non-joiner and joiner, word joiner, the invisible
/// operators, the BOM), which render as nothing: with them two different
/// commands would look alike (`rm` and `r\u{200b}m`).
pub fn is_hazard(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{2028}' | '\u{2029}' | '\u{200E}' | '\u{200F}' | '\u{FEFF}'
        )
        || ('\u{200B}'..='\u{200D}').contains(&c)
        || ('\u{202A}'..='\u{202E}').contains(&c)
        || ('\u{2060}'..='\u{2064}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// The visible stand-in for a hazard: `\n`, `\r`, `\t`, `\e`, `\x7f`,
/// `\u{202e}`. A reader sees that the byte was there; report.json and the
/// log keep the original.
pub fn push_visible(o: &mut String, c: char) {
    match c {
        '\n' => o.push_str("\\n"),
        '\r' => o.push_str("\\r"),
        '\t' => o.push_str("\\t"),
        '\x1b' => o.push_str("\\e"),
        c if (c as u32) < 0x80 => {
            let _ = write!(o, "\\x{:02x}", c as u32);
        }
        c => {
            let _ = write!(o, "\\u{{{:x}}}", c as u32);
        }
    }
}

/// GitHub's runner reads `##[command]` anywhere in a log line (its v1
/// syntax); `#\#[` says the same to a person and nothing to the runner.
const V1_COMMAND: &str = "##[";

/// The most characters report.md's first line (the verdict, escapes
/// included) may have: a CI step summary shows it whole, whatever the run
/// (issue 25 saw 700). `report/verdict.rs` sizes to it; the output
/// invariants hold every report to it.
pub const MAX_VERDICT_CHARS: usize = 300;

/// One line of untrusted text: every hazard made visible, GitHub's `##[`
/// broken, and a leading `::` (a workflow command once the line is printed:
/// the runner trims leading blanks first) escaped as `\::`. GitLab's
/// `section_start:` markers need ESC and CR, which never survive.
pub fn one_line(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        if is_hazard(c) {
            push_visible(&mut o, c);
        } else {
            o.push(c);
        }
    }
    if o.contains(V1_COMMAND) {
        o = o.replace(V1_COMMAND, "#\\#[");
    }
    if o.trim_start().starts_with("::") {
        o.insert(0, '\\');
    }
    o
}

/// `one_line`, cut to `max` characters with `…`.
pub fn one_line_cut(s: &str, max: usize) -> String {
    let line = one_line(s);
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Multi-line untrusted text (stderr last words) as a terminal would have
/// shown it to a person, minus what could harm the next reader: ANSI
/// colour/cursor/OSC sequences removed, CRLF and lone CR taken as line ends
/// (as CI log viewers do), tabs expanded to 8-column stops, every other
/// hazard made visible, each line kept from being read as a CI command.
pub fn display_lines(s: &str) -> Vec<String> {
    strip_ansi(s)
        .split('\n')
        .flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'))
        .map(|l| one_line(&expand_tabs(l)))
        .collect()
}

/// `display_lines` joined by `\n`, without a trailing empty line.
pub fn display_text(s: &str) -> String {
    let mut lines = display_lines(s);
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    lines.join("\n")
}

fn expand_tabs(l: &str) -> String {
    if !l.contains('\t') {
        return l.to_string();
    }
    let mut o = String::with_capacity(l.len() + 8);
    let mut col = 0;
    for c in l.chars() {
        if c == '\t' {
            let n = 8 - col % 8;
            o.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else {
            o.push(c);
            col += 1;
        }
    }
    o
}

/// Removes ANSI escape sequences (ECMA-48): CSI (`ESC [` … final byte, or
/// the 8-bit U+009B), OSC/DCS/SOS/PM/APC strings up to BEL or ST, and the
/// two- and three-byte ESC forms. A string never runs past its line: an
/// unterminated one must not swallow the rest of the text. What is left of
/// a broken sequence stays and is made visible by the escapers.
pub fn strip_ansi(s: &str) -> String {
    if !s.contains([
        '\x1b', '\u{9b}', '\u{9d}', '\u{90}', '\u{98}', '\u{9e}', '\u{9f}',
    ]) {
        return s.to_string();
    }
    let mut o = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        let kind = match c {
            '\x1b' => match it.peek().copied() {
                Some('[') => {
                    it.next();
                    Seq::Csi
                }
                Some(']' | 'P' | 'X' | '^' | '_') => {
                    it.next();
                    Seq::Str
                }
                Some('\x20'..='\x2f') => {
                    // nF: intermediates, then one final byte.
                    while it.peek().is_some_and(|c| ('\x20'..='\x2f').contains(c)) {
                        it.next();
                    }
                    if it.peek().is_some_and(|c| ('\x30'..='\x7e').contains(c)) {
                        it.next();
                    }
                    continue;
                }
                Some('\x30'..='\x7e') => {
                    it.next();
                    continue;
                }
                _ => continue,
            },
            '\u{9b}' => Seq::Csi,
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => Seq::Str,
            c => {
                o.push(c);
                continue;
            }
        };
        match kind {
            Seq::Csi => {
                // Parameters and intermediates, then the final byte.
                while it.peek().is_some_and(|c| ('\x20'..='\x3f').contains(c)) {
                    it.next();
                }
                if it.peek().is_some_and(|c| ('\x40'..='\x7e').contains(c)) {
                    it.next();
                }
            }
            Seq::Str => {
                while let Some(&n) = it.peek() {
                    match n {
                        '\x07' | '\u{9c}' => {
                            it.next();
                            break;
                        }
                        '\x1b' => {
                            it.next();
                            if it.peek() == Some(&'\\') {
                                it.next();
                            }
                            break;
                        }
                        '\n' => break,
                        _ => {
                            it.next();
                        }
                    }
                }
            }
        }
    }
    o
}

enum Seq {
    Csi,
    Str,
}
