//! Commands as headlines, verdicts and tables name them: short enough for a
//! sentence, and still different for two different processes. An
//! interpreter's own flags (`node --experimental-import-meta-resolve
//! --require /long/setup.js`) are what every worker of a runner shares, so
//! they are left out; the entry point (script, `-m module`, `-c` code, `-jar`)
//! and the arguments after it are what tell workers apart, so they stay. A
//! long script path keeps its last components (`…/vitest/dist/workers/
//! forks.js`). The full argv stays in report.json and in the details.

/// argv from a NUL-separated argument area (an exec record's, or
/// `/proc/PID/cmdline`): a cut area ends in the cut element.
pub fn split_argv(area: &[u8]) -> Vec<String> {
    let area = area.strip_suffix(&[0]).unwrap_or(area);
    if area.is_empty() {
        return Vec::new();
    }
    area.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Characters a command may take in prose; longer ones end in `…`.
pub const MAX: usize = 60;
/// A path longer than this keeps only its last components.
const PATH_MAX: usize = 40;

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Node,
    Python,
    Shell,
    Ruby,
    Perl,
    Java,
}

fn family(prog: &str) -> Option<Family> {
    let base = prog.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    Some(match base {
        "node" | "nodejs" => Family::Node,
        "python" | "pypy" => Family::Python,
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "mksh" | "ash" => Family::Shell,
        "ruby" => Family::Ruby,
        "perl" => Family::Perl,
        "java" => Family::Java,
        _ => return None,
    })
}

/// `prog` (a path or a name) is a POSIX-family shell: sh, bash, dash, zsh,
/// ksh, mksh, ash.
pub fn is_shell(prog: &str) -> bool {
    family(program(prog)) == Some(Family::Shell)
}

/// Interpreter flags whose value is the next argument.
fn takes_value(f: Family, flag: &str) -> bool {
    match f {
        Family::Node => matches!(
            flag,
            "-r" | "--require"
                | "--import"
                | "--loader"
                | "--experimental-loader"
                | "-C"
                | "--conditions"
                | "--inspect-port"
                | "--title"
                | "--env-file"
                | "--input-type"
                | "--stack-size"
        ),
        Family::Python => matches!(flag, "-W" | "-X" | "-Q"),
        // `-euo pipefail`: the option name follows a cluster ending in o.
        Family::Shell => !flag.starts_with("--") && (flag.ends_with('o') || flag.ends_with('O')),
        Family::Ruby => matches!(flag, "-r" | "-I" | "-C" | "-E"),
        Family::Perl => matches!(flag, "-I" | "-M" | "-m"),
        Family::Java => matches!(
            flag,
            "-cp" | "-classpath" | "--class-path" | "-p" | "--module-path" | "--add-opens"
        ),
    }
}

/// Flags that are the entry point, with the code or module as their value.
fn is_entry_flag(f: Family, flag: &str) -> bool {
    match f {
        Family::Node => matches!(flag, "-e" | "--eval" | "-p" | "--print"),
        Family::Python => matches!(flag, "-m" | "-c"),
        Family::Shell => flag == "-c",
        Family::Ruby | Family::Perl => matches!(flag, "-e" | "-E"),
        Family::Java => matches!(flag, "-jar" | "-m" | "--module"),
    }
}

/// The file name of `prog`: `/usr/local/bin/node` -> `node`.
pub fn program(prog: &str) -> &str {
    prog.rsplit('/').next().unwrap_or(prog)
}

/// A long path keeps the last components that fit: `…/dist/workers/forks.js`.
/// Text with whitespace is not a path (a `-c` script) and stays whole.
pub fn short_path(arg: &str) -> String {
    if arg.chars().count() <= PATH_MAX || !arg.contains('/') || arg.contains(char::is_whitespace) {
        return arg.to_string();
    }
    let parts: Vec<&str> = arg.split('/').collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut len = 2; // "…/"
    for p in parts.iter().rev() {
        let add = p.chars().count() + usize::from(!kept.is_empty());
        if !kept.is_empty() && len + add > PATH_MAX {
            break;
        }
        len += add;
        kept.push(p);
    }
    kept.reverse();
    format!("…/{}", kept.join("/"))
}

/// The command as headlines name it: the program's file name, then for an
/// interpreter its entry point and what follows it, else every argument;
/// long paths shortened. Not cut: [`cut`] does that.
pub fn abbreviate(argv: &[String]) -> String {
    let Some((prog, rest)) = argv.split_first() else {
        return String::new();
    };
    let name = program(prog);
    let mut words: Vec<String> = vec![name.to_string()];
    let args = match family(name).and_then(|f| entry(f, rest)) {
        Some(i) => &rest[i..],
        None => rest,
    };
    words.extend(args.iter().map(|a| short_path(a)));
    words.join(" ")
}

/// Where the entry point starts in an interpreter's arguments, if it has
/// one (`node --version` has none: then every argument is shown).
fn entry(f: Family, args: &[String]) -> Option<usize> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return (i + 1 < args.len()).then_some(i + 1);
        }
        if !a.starts_with('-') && !a.starts_with('+') || a == "-" {
            return Some(i);
        }
        if is_entry_flag(f, a) {
            return Some(i);
        }
        // `bash -ec 'script'`: -c among clustered single-letter flags.
        if f == Family::Shell && !a.starts_with("--") && a.starts_with('-') && a.contains('c') {
            return Some(i);
        }
        // `-mpytest`, `-c'code'`: an entry flag with its value attached.
        if f == Family::Python && (a.starts_with("-m") || a.starts_with("-c")) && a.len() > 2 {
            return Some(i);
        }
        i += if takes_value(f, a) { 2 } else { 1 };
    }
    None
}

/// A command cut to [`MAX`] characters, ending in `…` when cut.
pub fn cut(cmd: &str) -> String {
    if cmd.chars().count() <= MAX {
        return cmd.to_string();
    }
    let mut c: String = cmd.chars().take(MAX - 1).collect();
    c.push('…');
    c
}
