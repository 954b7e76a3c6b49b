//! The output invariants the escapers promise, as checks: the unit, fuzz
//! and integration tests all hold rendered reports to these (and the
//! cargo-fuzz target in fuzz/ does too). Each returns what it found wrong,
//! one line per violation, empty when the text keeps every promise.

use super::is_hazard;

fn ci_command(line: &str) -> bool {
    line.trim_start().starts_with("::") || line.contains("##[")
}

fn hazards(s: &str, allowed: &[char]) -> Vec<String> {
    s.char_indices()
        .filter(|(_, c)| is_hazard(*c) && !allowed.contains(c))
        .take(3)
        .map(|(i, c)| format!("hazard U+{:04X} at byte {i}", c as u32))
        .collect()
}

/// A fence line: its backtick count, if it opens or closes a block. An
/// info string with a backtick in it makes no fence (CommonMark 4.5): a
/// line that starts with a long code span is a paragraph.
fn fence_ticks(line: &str) -> Option<usize> {
    let l = line.trim_start_matches(' ');
    if line.len() - l.len() > 3 {
        return None;
    }
    let n = l.chars().take_while(|&c| c == '`').count();
    (n >= 3 && !l[n..].contains('`')).then_some(n)
}

/// Lines outside fenced blocks, with their numbers; and an error if a block
/// never closes.
fn outside_fences(md: &str) -> (Vec<(usize, &str)>, Vec<String>) {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize)> = None;
    for (i, line) in md.lines().enumerate() {
        match open {
            None => match fence_ticks(line) {
                Some(n) => open = Some((n, i)),
                None => out.push((i, line)),
            },
            Some((n, _)) => {
                let l = line.trim_start_matches(' ');
                let closes = fence_ticks(line).is_some_and(|m| m >= n)
                    && l.trim_start_matches('`').trim().is_empty();
                if closes {
                    open = None;
                }
            }
        }
    }
    let errs = open
        .map(|(_, i)| vec![format!("line {}: a fenced block never closes", i + 1)])
        .unwrap_or_default();
    (out, errs)
}

/// Backtick runs on one line, CommonMark's way: a backslash escapes the
/// next punctuation; a run opens a code span only if a run of the same
/// length follows. Returns the column of an unmatched run.
fn unmatched_backticks(line: &str) -> Option<usize> {
    let c: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if c[i] == '\\' && c.get(i + 1).is_some_and(char::is_ascii_punctuation) {
            i += 2;
            continue;
        }
        if c[i] != '`' {
            i += 1;
            continue;
        }
        let n = c[i..].iter().take_while(|&&x| x == '`').count();
        let mut j = i + n;
        let mut closed = None;
        while j < c.len() {
            if c[j] == '`' {
                let m = c[j..].iter().take_while(|&&x| x == '`').count();
                if m == n {
                    closed = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match closed {
            Some(j) => i = j,
            None => return Some(i),
        }
    }
    None
}

/// Pipes that split a table row: those not preceded by an odd backslash run.
fn row_pipes(line: &str) -> usize {
    let c: Vec<char> = line.chars().collect();
    (0..c.len())
        .filter(|&i| c[i] == '|')
        .filter(|&i| c[..i].iter().rev().take_while(|&&x| x == '\\').count() % 2 == 0)
        .count()
}

/// Any Markdown tracer writes: no hazard byte but `\n`, no CI command line,
/// fenced blocks closed, code spans balanced on every line outside them,
/// every row of a table as many cells as its header, no HTML block but
/// tracer's own `<details>`.
pub fn markdown(md: &str) -> Vec<String> {
    let mut v = hazards(md, &['\n']);
    for (i, line) in md.lines().enumerate() {
        if ci_command(line) {
            v.push(format!("line {}: a CI workflow command: {line}", i + 1));
        }
    }
    let (lines, errs) = outside_fences(md);
    v.extend(errs);
    let mut table: Option<usize> = None;
    for (i, line) in lines {
        if let Some(col) = unmatched_backticks(line) {
            v.push(format!(
                "line {}: unbalanced backticks at {col}: {line}",
                i + 1
            ));
        }
        if line.starts_with('<') && !line.starts_with("<details>") && line != "</details>" {
            v.push(format!("line {}: an HTML block: {line}", i + 1));
        }
        if line.starts_with('|') {
            let n = row_pipes(line);
            match table {
                None => table = Some(n),
                Some(h) if h != n => v.push(format!(
                    "line {}: {n} cell borders, header has {h}: {line}",
                    i + 1
                )),
                _ => {}
            }
        } else {
            table = None;
        }
    }
    v
}

/// report.md: all of [`markdown`], and the verdict is the whole first
/// paragraph (`head -n 1 report.md` is a CI summary).
pub fn report_md(md: &str) -> Vec<String> {
    let mut v = markdown(md);
    let mut lines = md.lines();
    let first = lines.next().unwrap_or("");
    if first.trim().is_empty() || first.starts_with('#') {
        v.push(format!("the first line is not a verdict: {first}"));
    }
    if lines.next() != Some("") {
        v.push("the verdict is not a paragraph of one line".into());
    }
    let n = first.chars().count();
    if n > super::MAX_VERDICT_CHARS {
        v.push(format!(
            "the verdict has {n} characters, over {}",
            super::MAX_VERDICT_CHARS
        ));
    }
    v
}

/// The shape of a Markdown document a reader sees: one entry per line
/// outside fenced blocks (heading level, table row and its cell count,
/// blank, paragraph) and one per block. Two reports of the same events,
/// one with hostile strings, must have the same skeleton.
pub fn skeleton(md: &str) -> Vec<String> {
    let (lines, _) = outside_fences(md);
    let mut out = Vec::new();
    let mut last = None;
    for (i, line) in lines {
        if last.is_some_and(|l| l + 1 != i) {
            out.push("block".into());
        }
        last = Some(i);
        let hashes = line.chars().take_while(|&c| c == '#').count();
        out.push(if line.is_empty() {
            String::new()
        } else if hashes > 0 && line[hashes..].starts_with(' ') {
            format!("h{hashes}")
        } else if line.starts_with('|') {
            format!("row{}", row_pipes(line))
        } else if line.starts_with('<') {
            line.to_string()
        } else {
            "p".into()
        });
    }
    out
}

/// The stderr summary and every stderr line with data in it: no hazard but
/// `\n`, every line led by tracer's own words, no CI command.
pub fn terminal(s: &str) -> Vec<String> {
    let mut v = hazards(s, &['\n']);
    for (i, line) in s.lines().enumerate() {
        if !(line.starts_with("tracer:") || line.starts_with("  ")) {
            v.push(format!("line {}: not led by tracer: {line}", i + 1));
        }
        if ci_command(line) {
            v.push(format!("line {}: a CI workflow command: {line}", i + 1));
        }
    }
    v
}

/// report.html: no hazard but `\n`/`\t`, and only tracer's own script.
pub fn html(s: &str) -> Vec<String> {
    let mut v = hazards(s, &['\n', '\t']);
    let scripts = s.matches("<script").count();
    if scripts != 1 {
        v.push(format!("{scripts} <script> elements, tracer writes 1"));
    }
    if s.matches("</script>").count() != 1 {
        v.push("a </script> outside tracer's script".into());
    }
    v
}

/// The ATX headings a reader sees (outside fenced blocks).
pub fn headings(md: &str) -> Vec<&str> {
    let (lines, _) = outside_fences(md);
    lines
        .into_iter()
        .map(|(_, l)| l)
        .filter(|l| {
            let h = l.chars().take_while(|&c| c == '#').count();
            (1..=6).contains(&h) && (l.len() == h || l[h..].starts_with(' '))
        })
        .collect()
}
