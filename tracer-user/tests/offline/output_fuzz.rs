//! Property tests of the renderers: every fixture log, its argv, comm, exe
//! paths, fds, memcg names, stderr and host facts replaced by hostile
//! strings (newlines, CR, ESC sequences, backticks, pipes, `#`, `<h1>`,
//! `</script>`, `::error::`, bidi controls, zero-width characters...), seeded so a failure
//! replays. The reports must keep the invariants of `text::invariants` and
//! read with the same structure as the same log with plain strings.
//! No root needed: this is rendering only. fuzz/fuzz_targets/render.rs
//! explores the same property with libFuzzer.
use std::{collections::HashMap, path::Path};

use serde_json::Value;
use tracer_user::{
    eventlog::read_log,
    report::{self, build_report, html, render_markdown, ReportOptions},
    summarize,
    text::invariants,
};

/// The corpus: what breaks Markdown, HTML, terminals and CI logs.
const ATOMS: &[&str] = &[
    "\n",
    "\r",
    "\r\n",
    "\t",
    "\x1b[31m",
    "\x1b[2J\x1b[H",
    "\x1b]0;title\x07",
    "\x1b]8;;http://evil\x1b\\",
    "\x1b",
    "\x00",
    "\x07",
    "\x08",
    "\x7f",
    "\u{85}",
    "\u{9b}31m",
    "\u{202e}",
    "\u{2066}",
    "\u{2028}",
    "\u{2029}",
    "\u{61c}",
    "\u{200b}",
    "\u{200d}",
    "\u{2060}",
    "\u{feff}",
    "`",
    "``",
    "```",
    "````",
    "~~~",
    "|",
    "\\",
    "\\|",
    "#",
    "# ",
    "\n# pwned",
    "\n---\n",
    "\n```\n",
    "\n    ",
    "<h1>",
    "</h1>",
    "<script>",
    "</script>",
    "<img src=x onerror=alert(1)>",
    "<!--",
    "-->",
    "<details>",
    "&lt;",
    "&",
    "::error::pwned",
    "\n::error file=a::pwned",
    "::set-output name=x::y",
    "\n::stop-commands::t",
    "##[error]v1",
    "section_start:1:s\r\x1b[0K",
    "*",
    "**",
    "_",
    "__init__",
    "[a](http://e)",
    "![i](http://e/i.png)",
    "${{ secrets.X }}",
    "$x$",
    " ",
    "  ",
    "é",
    "✓",
    "\u{fffd}",
    "a",
    "1.",
    "> ",
    "- ",
    "+ ",
    "= ",
    "'",
    "\"",
    "/",
    "../",
    "//",
];

/// Fields the run controls, as the log names them.
fn hostile_key(parent: &str, key: &str) -> bool {
    matches!(
        key,
        "argv"
            | "command"
            | "filename"
            | "comm"
            | "text"
            | "exe"
            | "fds"
            | "hostname"
            | "kernel"
            | "code_name"
            | "result"
            | "errno"
    ) || (parent == "memcg" && matches!(key, "name" | "path"))
}

fn hostile(rng: &mut fastrand::Rng, tag: usize) -> String {
    // A visible start and a unique end: distinct strings stay distinct,
    // and a basename (the part after the last `/`) stays distinct too.
    let mut s = String::from("z");
    for _ in 0..rng.usize(1..7) {
        if rng.u8(..) < 200 {
            s.push_str(ATOMS[rng.usize(..ATOMS.len())]);
        } else {
            s.push(rng.char(..));
        }
    }
    s.push_str(&format!("z{tag}"));
    s
}

/// Replaces each distinct run-controlled string by its own substitute.
fn mutate(v: &mut Value, parent: &str, sub: &mut dyn FnMut(&str) -> String) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if hostile_key(parent, k) {
                    match x {
                        Value::String(s) => *s = sub(s),
                        Value::Array(a) => {
                            for e in a.iter_mut() {
                                if let Value::String(s) = e {
                                    *s = sub(s);
                                }
                            }
                        }
                        _ => mutate(x, k, sub),
                    }
                } else {
                    mutate(x, k, sub);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mutate(x, parent, sub)),
        _ => {}
    }
}

fn rewrite(
    src: &str,
    dir: &Path,
    name: &str,
    sub: &mut dyn FnMut(&str) -> String,
) -> std::path::PathBuf {
    let mut out = String::new();
    for line in src.lines() {
        // truncated.ndjson ends mid-line on purpose: keep such a line.
        match serde_json::from_str::<Value>(line) {
            Ok(mut v) => {
                mutate(&mut v, "", sub);
                out.push_str(&serde_json::to_string(&v).unwrap());
            }
            Err(_) => out.push_str(line),
        }
        out.push('\n');
    }
    let p = dir.join(name);
    std::fs::write(&p, out).unwrap();
    p
}

struct Rendered {
    md: String,
    html: String,
    summary: String,
    json: String,
}

fn render(path: &Path) -> Rendered {
    let log = read_log(path).expect("a mutated log still reads");
    let r = build_report(&log, &ReportOptions::default());
    let cx = html::Context::from_log(&log, &r);
    Rendered {
        md: render_markdown(&r),
        html: html::render(&r, &cx),
        summary: report::summary(&r, Path::new("out/report.md"), Path::new("out/report.json")),
        json: report::render_json(&r),
    }
}

fn summary_md(dir: &Path, json: &str) -> String {
    let d = dir.join("runs");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("report.json"), json).unwrap();
    let loaded = summarize::load(&[d]);
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped.len());
    summarize::markdown(&summarize::summarize(&loaded))
}

fn fixtures() -> Vec<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "ndjson"))
        .collect();
    v.sort();
    v
}

/// The skeleton, without the rows that show a whole command line only when
/// its abbreviation left something out (which depends on the strings).
fn shape(md: &str) -> Vec<String> {
    let kept: Vec<&str> = md
        .lines()
        .filter(|l| !l.starts_with("| command |") && !l.starts_with("| killer command |"))
        .collect();
    invariants::skeleton(&kept.join("\n"))
}

fn check(what: &str, violations: Vec<String>, doc: &str) {
    assert!(
        violations.is_empty(),
        "{what}: {violations:#?}\n----- the output -----\n{doc}"
    );
}

/// Seeds per fixture; `TRACER_FUZZ_ROUNDS` raises it for a longer run.
fn rounds() -> u64 {
    std::env::var("TRACER_FUZZ_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

#[test]
fn hostile_strings_never_break_the_reports() {
    let tmp = tempfile::tempdir().unwrap();
    let mut renders = 0;
    for fx in fixtures() {
        let src = std::fs::read_to_string(&fx).unwrap();
        let name = fx.file_name().unwrap().to_string_lossy().to_string();
        // Plain strings, one per distinct original: the structure to keep.
        let mut plain_map: HashMap<String, String> = HashMap::new();
        let plain_path = rewrite(&src, tmp.path(), "plain.ndjson", &mut |s| {
            let n = plain_map.len();
            plain_map
                .entry(s.to_string())
                .or_insert_with(|| format!("s{n}"))
                .clone()
        });
        let plain = render(&plain_path);
        let plain_summary_md = summary_md(tmp.path(), &plain.json);
        for seed in 0..rounds() {
            let mut rng = fastrand::Rng::with_seed(seed * 7919 + name.len() as u64);
            let mut map: HashMap<String, String> = HashMap::new();
            let path = rewrite(&src, tmp.path(), "hostile.ndjson", &mut |s| {
                let n = map.len();
                map.entry(s.to_string())
                    .or_insert_with(|| hostile(&mut rng, n))
                    .clone()
            });
            let got = render(&path);
            let ctx = format!("{name} seed {seed}");
            check(
                &format!("{ctx}: report.md"),
                invariants::report_md(&got.md),
                &got.md,
            );
            assert_eq!(
                shape(&got.md),
                shape(&plain.md),
                "{ctx}: report.md's structure changed with hostile strings\n{}\n-----\n{}",
                got.md,
                plain.md
            );
            // report.json's sentences are what CI scripts quote (annotations):
            // one clean line each, like the Markdown's.
            let j: Value = serde_json::from_str(&got.json).unwrap();
            let mut sentences = vec![j["verdict"].as_str().unwrap().to_string()];
            for c in j["certificates"].as_array().unwrap() {
                sentences.push(c["headline"].as_str().unwrap().to_string());
            }
            for s in sentences {
                assert!(
                    !s.chars().any(tracer_user::text::is_hazard),
                    "{ctx}: a hazard in report.json: {s:?}"
                );
            }
            check(
                &format!("{ctx}: report.html"),
                invariants::html(&got.html),
                "",
            );
            for bad in ["<h1>", "<img", "<!--", "<details>"] {
                assert!(!got.html.contains(bad), "{ctx}: {bad} reached report.html");
            }
            check(
                &format!("{ctx}: summary"),
                invariants::terminal(&got.summary),
                &got.summary,
            );
            assert_eq!(
                got.summary.lines().count(),
                plain.summary.lines().count(),
                "{ctx}: the summary's lines\n{}\n-----\n{}",
                got.summary,
                plain.summary
            );
            // `tracer summarize` reads report.json files as input too.
            let sm = summary_md(tmp.path(), &got.json);
            check(&format!("{ctx}: summarize"), invariants::markdown(&sm), &sm);
            assert_eq!(
                invariants::skeleton(&sm),
                invariants::skeleton(&plain_summary_md),
                "{ctx}: summarize's structure\n{sm}\n-----\n{plain_summary_md}"
            );
            renders += 1;
        }
    }
    assert!(
        renders >= 12 * 20,
        "{renders} renders: the fixtures went missing?"
    );
}

/// The checks catch what they claim to: a test whose checks cannot fail
/// proves nothing.
#[test]
fn the_invariant_checks_catch_breakage() {
    assert!(
        !invariants::markdown("a `b\n").is_empty(),
        "unbalanced span"
    );
    assert!(!invariants::markdown("```\nx\n").is_empty(), "open fence");
    assert!(!invariants::markdown("| a | b |\n|---|---|\n| x | y | z |\n").is_empty());
    assert!(!invariants::markdown("x\n::error::y\n").is_empty());
    assert!(!invariants::markdown("x ##[error] y\n").is_empty());
    assert!(!invariants::markdown("<h1>x</h1>\n").is_empty());
    assert!(!invariants::markdown("a\x1b[31m\n").is_empty());
    assert!(
        !invariants::report_md("a\nb\n\nc\n").is_empty(),
        "two-line verdict"
    );
    assert!(invariants::report_md("v `a|b` \\` ok\n\n| a | `x\\|y` |\n|---|---|\n").is_empty());
    assert!(!invariants::terminal("tracer: x\nevil\n").is_empty());
    assert!(!invariants::terminal("tracer: x\n  ::error::y\n").is_empty());
    assert!(!invariants::html("<script></script><script>").is_empty());
    assert_ne!(
        invariants::skeleton("v\n\n### 1. a\n"),
        invariants::skeleton("v\n\n### 1. a\n# b\n")
    );
}
