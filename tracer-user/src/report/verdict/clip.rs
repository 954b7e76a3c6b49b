//! Cutting the verdict's clauses to size: parentheses, commands, asides
//! and whole clauses, each cut keeping what a reader needs (a code span
//! closed again, a pid kept beside its command).
use super::{PAREN, SPAN};

/// `s` in at most `max` characters: cut at a space when one is near the
/// end, "…" added, and a code span the cut left open closed again (its
/// backtick run repeated), so report.md shows the rest as prose.
pub(super) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(1);
    let mut cut: String = s.chars().take(keep).collect();
    if let Some(sp) = cut.rfind(' ') {
        if cut[..sp].chars().count() * 4 >= keep * 3 {
            cut.truncate(sp);
        }
    }
    // Backtick runs alternate open, close: an odd count leaves one open.
    let mut open: Option<usize> = None;
    let mut run = 0;
    for ch in cut.chars().chain(std::iter::once(' ')) {
        if ch == '`' {
            run += 1;
            continue;
        }
        if run > 0 {
            open = match open {
                Some(n) if n == run => None,
                Some(n) => Some(n),
                None => Some(run),
            };
            run = 0;
        }
    }
    cut.push('…');
    if let Some(n) = open {
        cut.push_str(&"`".repeat(n));
    }
    cut
}

/// `s` in at most `max` characters, its start and its end kept (a lead
/// clause says what happened first and what it means last).
pub(super) fn clip_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let tail_len = max / 2;
    let head = clip(s, max.saturating_sub(tail_len).max(1));
    let used = head.chars().count();
    let room = max.saturating_sub(used);
    let tail: String = s.chars().skip(n - room.min(n)).collect();
    // Start the tail at a word, outside any code span it would cut.
    let tail = match tail.find(' ') {
        Some(i) if i < tail.len() / 2 => tail[i + 1..].to_string(),
        _ => tail,
    };
    if tail.matches('`').count() % 2 == 1 {
        return head;
    }
    format!("{head} {tail}")
}

/// Each parenthesis of `s` (outside code spans) longer than [`PAREN`]
/// characters cut to its start: `(/root/.pyenv/versions/3.11.7/bin/python3 -c
/// import …)` becomes `(python3 -c import subprocess;…)`.
pub(super) fn compact_parens(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut o = String::with_capacity(s.len());
    let mut i = 0;
    let mut in_code = false;
    while i < c.len() {
        if c[i] == '`' {
            in_code = !in_code;
        }
        if c[i] == '(' && !in_code {
            // Its matching close, skipping code spans inside.
            let (mut depth, mut j, mut code) = (0usize, i, false);
            let mut end = None;
            while j < c.len() {
                match c[j] {
                    '`' => code = !code,
                    '(' if !code => depth += 1,
                    ')' if !code => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(j);
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            if let Some(j) = end.filter(|&j| j - i > PAREN) {
                let inner: String = c[i + 1..j].iter().collect();
                // A command's program by its name, not its directory.
                let inner = match inner.split_once(' ') {
                    Some((prog, rest)) if prog.starts_with('/') => {
                        format!("{} {rest}", crate::text::command::program(prog))
                    }
                    _ => inner,
                };
                o.push('(');
                o.push_str(&clip(&inner, PAREN - 2));
                o.push(')');
                i = j + 1;
                continue;
            }
        }
        o.push(c[i]);
        i += 1;
    }
    o
}

/// Each code span of `s` (one backtick each side) longer than [`SPAN`]
/// characters cut to its start and "…": a command line shortened, its
/// pid after it kept.
pub(super) fn compact_spans(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('`') {
        let run = rest[open..].chars().take_while(|&c| c == '`').count();
        let delim = "`".repeat(run);
        let after = &rest[open + run..];
        let Some(close) = after.find(&delim) else {
            break;
        };
        let inner = &after[..close];
        out.push_str(&rest[..open + run]);
        // A span delimited by a longer run holds backticks: kept whole.
        if run == 1 && inner.chars().count() > SPAN {
            out.extend(inner.chars().take(SPAN - 1));
            out.push('…');
        } else {
            out.push_str(inner);
        }
        out.push_str(&delim);
        rest = &after[close + run..];
    }
    out.push_str(rest);
    out
}

/// A clause without its closing aside (` — the read ends only when …`):
/// what the snapshot explains at length.
pub(super) fn drop_aside(s: &str) -> &str {
    match s.rfind(" — ") {
        Some(i) => {
            let aside = &s[i..];
            let balanced = aside.matches('(').count() == aside.matches(')').count()
                && aside.matches('`').count().is_multiple_of(2);
            if balanced {
                &s[..i]
            } else {
                s
            }
        }
        None => s,
    }
}
