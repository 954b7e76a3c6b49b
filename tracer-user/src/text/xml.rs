//! The XML escaper (JUnit files): attribute values and element content.
//!
//! XML 1.0 admits no C0 control but tab, LF and CR, and no U+FFFE/U+FFFF
//! anywhere (not even as character references): one such byte in argv and
//! GitLab or Jenkins rejects the whole file. Every hazard is made visible
//! as the other formats show it (`\e`, `\u{202e}`: [`super::push_visible`]),
//! so the file stays valid and two different commands never look alike.

use super::{display_lines, one_line};

fn entities(s: &str, o: &mut String) {
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            '\u{FFFE}' | '\u{FFFF}' => super::push_visible(o, c),
            c => o.push(c),
        }
    }
}

/// Untrusted text as one attribute value (inside `"…"`): one line, every
/// hazard visible, entity-escaped.
pub fn attr(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    entities(&one_line(s), &mut o);
    o
}

/// Untrusted multi-line text as element content: each line as
/// [`display_lines`] shows it (ANSI removed, hazards visible), joined by
/// `\n`, entity-escaped.
pub fn text(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 8);
    entities(&display_lines(s).join("\n"), &mut o);
    o
}
