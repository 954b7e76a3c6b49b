//! The Markdown escaper (report.md, `tracer summarize`), for GitHub and
//! GitLab renderers and for the raw file printed in a CI log. Four shapes:
//! - [`code`]: untrusted text as an inline code span;
//! - [`text`]: untrusted text as prose;
//! - [`inline`]: a line tracer composed (headline, verdict, finding) whose
//!   code spans are kept and whose prose is escaped;
//! - [`cell`]: any of the above inside a table row;
//! - [`fence`]: untrusted multi-line text as a fenced block.
//!
//! All of them keep the invariants: one line where one line is promised, no
//! control bytes, balanced code spans, no heading/HTML block/CI command at a
//! line start.

use super::{display_lines, one_line};

/// Characters escaped in prose: the ones that open inline HTML (`<`),
/// entity and character references (`&`: `&#x202e;` in a frame name
/// rendered as a bidi override in a step summary), links (`[`, `]`),
/// emphasis/strike (`*`, `~`; `_` only where it could open or close) and
/// the escape itself. All are ASCII punctuation, so a
/// backslash before them is a CommonMark escape.
fn escape_into(o: &mut String, prev: Option<char>, c: char, next: Option<char>) {
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let needs = match c {
        '\\' | '`' | '<' | '>' | '[' | ']' | '*' | '~' | '&' => true,
        '_' => !(word(prev) && word(next)),
        _ => false,
    };
    if needs {
        o.push('\\');
    }
    o.push(c);
}

fn escape_prose(s: &str, o: &mut String) {
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| chars[j]);
        escape_into(o, prev, c, chars.get(i + 1).copied());
    }
}

/// Untrusted text as prose on one line.
pub fn text(s: &str) -> String {
    let line = one_line(s);
    let mut o = String::with_capacity(line.len() + 8);
    escape_prose(&line, &mut o);
    o
}

/// Untrusted text as an inline code span: on one line, delimited by a
/// backtick run longer than any inside it, padded with a space where the
/// content starts or ends with a backtick or would lose its outer spaces
/// (CommonMark 6.1). `|` is left alone: [`cell`] escapes it in tables.
pub fn code(s: &str) -> String {
    let line = one_line(s);
    if line.is_empty() {
        return "` `".into();
    }
    let longest = longest_run(&line);
    let ticks = "`".repeat(longest + 1);
    let pad = line.starts_with('`')
        || line.ends_with('`')
        || (line.starts_with(' ') && line.ends_with(' ') && line.trim() != "");
    let sp = if pad { " " } else { "" };
    format!("{ticks}{sp}{line}{sp}{ticks}")
}

fn longest_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// Inside a table row: an unescaped `|` would end the cell, even inside a
/// code span (GFM parses the row first), and a line break would end the row.
pub fn cell(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 4);
    for c in s.chars() {
        match c {
            // GFM escapes a pipe by the backslash right before it; other
            // parsers count the run. Odd in total satisfies both.
            '|' => {
                let before = o.chars().rev().take_while(|&c| c == '\\').count();
                o.push_str(if before % 2 == 1 { "\\\\|" } else { "\\|" });
            }
            '\n' | '\r' => o.push(' '),
            c => o.push(c),
        }
    }
    o
}

/// A line tracer composed from fixed words, code spans made by [`code`],
/// and untrusted text it did not wrap (a snapshot finding's path, a headline
/// read back from someone's report.json). The code spans are kept verbatim
/// (their content is literal in Markdown); everything else is escaped as
/// [`text`] is, including a backtick run that closes nothing. tracer's own
/// prose rarely holds any of the escaped characters, so it reads unchanged.
pub fn inline(s: &str) -> String {
    let line = one_line(s);
    let chars: Vec<char> = line.chars().collect();
    let mut o = String::with_capacity(line.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '`' {
            let n = run_at(&chars, i);
            if let Some(close) = closing_run(&chars, i + n, n) {
                o.extend(&chars[i..close + n]);
                i = close + n;
            } else {
                for _ in 0..n {
                    o.push_str("\\`");
                }
                i += n;
            }
            continue;
        }
        let prev = i.checked_sub(1).map(|j| chars[j]);
        escape_into(&mut o, prev, chars[i], chars.get(i + 1).copied());
        i += 1;
    }
    o
}

fn run_at(chars: &[char], i: usize) -> usize {
    chars[i..].iter().take_while(|&&c| c == '`').count()
}

/// The start of the next backtick run of exactly `n` at or after `from`.
fn closing_run(chars: &[char], from: usize, n: usize) -> Option<usize> {
    let mut j = from;
    while j < chars.len() {
        if chars[j] == '`' {
            let m = run_at(chars, j);
            if m == n {
                return Some(j);
            }
            j += m;
        } else {
            j += 1;
        }
    }
    None
}

/// Untrusted multi-line text as a fenced block (`info` names the language):
/// ANSI sequences removed and hazards made visible ([`display_lines`]),
/// fenced by a backtick run longer than any inside, so no line can close
/// it. Ends with a newline.
pub fn fence(text: &str, info: &str) -> String {
    fence_lines(&display_lines(text), info)
}

/// [`fence`] for lines already made safe by [`display_lines`] or
/// [`one_line`].
pub fn fence_lines(lines: &[String], info: &str) -> String {
    let longest = lines.iter().map(|l| longest_run(l)).max().unwrap_or(0);
    let ticks = "`".repeat(longest.max(2) + 1);
    let mut o = format!("{ticks}{info}\n");
    for l in lines {
        o.push_str(l);
        o.push('\n');
    }
    o.push_str(&ticks);
    o.push('\n');
    o
}
