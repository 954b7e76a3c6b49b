//! Last words: which line of a process's stderr tail a headline quotes, and
//! how much of it a report shows.

/// Lines of last words report.md shows (report.json keeps the whole tail).
pub const SHOWN_LINES: usize = 20;
/// A quoted line is cut to this many characters.
const QUOTE_MAX: usize = 160;
/// Words that make a line read like the error, not like a stack frame or a
/// runtime's version banner (`Node.js v20.1.0` follows Node's crash trace).
const ERROR_WORDS: [&str; 6] = ["error", "panic", "fatal", "exception", "fail", "abort"];

/// The line worth quoting: the last line that reads like an error, else the
/// last non-empty one. A line ending in `:` (Rust's `panicked at f.rs:2:5:`)
/// takes the next line along, where the message is.
pub fn quote_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let is_error = |l: &str| {
        let lower = l.to_lowercase();
        !l.starts_with("at ") && ERROR_WORDS.iter().any(|w| lower.contains(w))
    };
    let i = lines
        .iter()
        .rposition(|l| is_error(l))
        .or_else(|| lines.iter().rposition(|l| !l.is_empty()))?;
    let mut line = lines[i].to_string();
    if line.ends_with(':') {
        if let Some(next) = lines.get(i + 1).filter(|n| !n.is_empty()) {
            line = format!("{line} {next}");
        }
    }
    let line = line.replace('`', "'");
    Some(if line.chars().count() > QUOTE_MAX {
        let cut: String = line.chars().take(QUOTE_MAX - 1).collect();
        format!("{cut}…")
    } else {
        line
    })
}

/// The last `n` lines of `text` (a trailing newline does not count as an
/// empty last line), and whether earlier lines were left out.
pub fn tail_lines(text: &str, n: usize) -> (Vec<&str>, bool) {
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    (lines[from..].to_vec(), from > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_the_error_not_the_stack_or_the_banner() {
        let node = "TypeError: x is undefined\n    at f (a.js:1:2)\n    at g (a.js:3:4)\n\nNode.js v20.1.0\n";
        assert_eq!(quote_line(node).unwrap(), "TypeError: x is undefined");
        let rust =
            "thread 'main' panicked at src/main.rs:2:5:\nboom\nnote: run with `RUST_BACKTRACE=1`\n";
        assert_eq!(
            quote_line(rust).unwrap(),
            "thread 'main' panicked at src/main.rs:2:5: boom"
        );
        assert_eq!(quote_line("one\ntwo\n\n").unwrap(), "two");
        assert_eq!(quote_line(" \n\n"), None);
        assert_eq!(quote_line("use `x`").unwrap(), "use 'x'");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), (vec!["b", "c"], true));
        assert_eq!(tail_lines("a\nb", 5), (vec!["a", "b"], false));
    }
}
