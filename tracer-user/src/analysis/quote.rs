//! Last words: which line of a process's stderr tail a headline quotes, and
//! how much of it a report shows.

/// Lines of last words report.md shows (report.json keeps the whole tail).
pub const SHOWN_LINES: usize = 20;
/// A quoted line is cut to this many characters.
const QUOTE_MAX: usize = 160;
/// Words that make a line read like the error, not like a stack frame or a
/// runtime's version banner (`Node.js v20.1.0` follows Node's crash trace).
const ERROR_WORDS: [&str; 6] = ["error", "panic", "fatal", "exception", "fail", "abort"];

/// Lines a runtime prints to say why it died, strongest first in no order:
/// V8's `FATAL ERROR: … JavaScript heap out of memory`, a Rust panic, Go's
/// `fatal error:` / `panic:`, CPython's fatal errors, a segfault notice.
/// Whatever follows them (native stack frames, `note: run with
/// RUST_BACKTRACE`) explains less.
const EXPLAINING: [&str; 6] = [
    "FATAL ERROR:",
    " panicked at ",
    "fatal error:",
    "Fatal Python error:",
    "Segmentation fault",
    "panic: ",
];

/// The line worth quoting: the line that explains the death when there is
/// one (an [`EXPLAINING`] marker, or the exception line closing a Python
/// traceback), else the last line that reads like an error and is not a
/// stack frame, else the last non-empty one. A line ending in `:` (Rust's
/// `panicked at f.rs:2:5:`) takes the next line along, where the message is.
pub fn quote_line(text: &str) -> Option<String> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let is_error = |l: &str| {
        let lower = l.to_lowercase();
        !is_frame(l) && ERROR_WORDS.iter().any(|w| lower.contains(w))
    };
    let explaining = lines
        .iter()
        .rposition(|l| !is_frame(l) && EXPLAINING.iter().any(|m| l.contains(m)));
    let i = explaining
        .into_iter()
        .chain(python_exception(&lines))
        .max()
        .or_else(|| lines.iter().rposition(|l| is_error(l)))
        .or_else(|| lines.iter().rposition(|l| !l.trim().is_empty()))?;
    let mut line = lines[i].trim().to_string();
    if line.ends_with(':') {
        if let Some(next) = lines.get(i + 1).map(|n| n.trim()).filter(|n| !n.is_empty()) {
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

/// The exception line of the last Python traceback: the first unindented
/// line after `Traceback (most recent call last):`.
fn python_exception(lines: &[&str]) -> Option<usize> {
    let tb = lines
        .iter()
        .rposition(|l| l.trim() == "Traceback (most recent call last):")?;
    (tb + 1..lines.len()).find(|&i| {
        let l = lines[i];
        !l.trim().is_empty() && !l.starts_with(char::is_whitespace)
    })
}

/// A stack frame, not a message: JS `at f (a.js:1:2)`, Python
/// `File "x.py", line 3`, native `12: 0x55d… v8::…` or `#3 0x…`, a bare
/// address.
fn is_frame(line: &str) -> bool {
    let l = line.trim_start();
    if l.starts_with("at ") || l.starts_with("File \"") || l.starts_with("0x") {
        return true;
    }
    let digits = l.trim_start_matches('#');
    let n = digits.chars().take_while(char::is_ascii_digit).count();
    n > 0 && matches!(digits[n..].chars().next(), Some(':' | ' ')) && {
        let rest = digits[n..].trim_start_matches([':', ' ']);
        rest.starts_with("0x") || l.starts_with('#') || rest.contains("::")
    }
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
    fn the_explaining_line_beats_the_stack_that_follows() {
        let v8 = "<--- JS stacktrace --->\n\nFATAL ERROR: Reached heap limit Allocation failed - \
                  JavaScript heap out of memory\n----- Native stack trace -----\n\n \
                  1: 0xb8ced1 node::OOMErrorHandler(char const*, v8::OOMDetails const&) [node]\n \
                  2: 0xf06460 v8::Utils::ReportOOMFailure(v8::internal::Isolate*) [node]\n";
        assert_eq!(
            quote_line(v8).unwrap(),
            "FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"
        );
        let rust = "thread 'main' panicked at src/main.rs:4:5:\nindex out of bounds\nstack \
                    backtrace:\n   0: rust_begin_unwind\n   1: core::panicking::panic_fmt\n             \
                    at /rustc/x/library/core/src/panicking.rs:72:14\nnote: Some details are \
                    omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n";
        assert_eq!(
            quote_line(rust).unwrap(),
            "thread 'main' panicked at src/main.rs:4:5: index out of bounds"
        );
        let py = "Traceback (most recent call last):\n  File \"w.py\", line 3, in <module>\n    \
                  main()\n  File \"w.py\", line 2, in main\n    raise RuntimeError('x')\n\
                  ConnectionRefusedError: [Errno 111] Connection refused\nlogging: shutting down\n";
        assert_eq!(
            quote_line(py).unwrap(),
            "ConnectionRefusedError: [Errno 111] Connection refused"
        );
        let segv = "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most \
                    recent call first):\n  File \"<string>\", line 1 in <module>\n\nExtension \
                    modules: _cffi (total: 1)\n";
        assert_eq!(
            quote_line(segv).unwrap(),
            "Fatal Python error: Segmentation fault"
        );
        // Without a marker, native frames naming errors are not quoted.
        let frames =
            "worker failed to start\n#0 0x7f in abort_handler ()\n#1 0x7f in error_exit ()\n";
        assert_eq!(quote_line(frames).unwrap(), "worker failed to start");
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 2), (vec!["b", "c"], true));
        assert_eq!(tail_lines("a\nb", 5), (vec!["a", "b"], false));
    }
}
