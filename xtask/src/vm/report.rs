//! The `cargo xtask vm-test` result as Markdown: a pass/fail table per kernel
//! and test, the hooks each kernel attached (from the self-test's event log
//! header), and every failure with its output.
use std::{fmt::Write, time::Duration};

use super::qemu::Run;

pub(crate) fn render(runs: &[(String, Run)], tests: &[String], elapsed: Duration) -> String {
    let mut s = String::new();
    let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
    row(&mut s, "", &labels);
    row(&mut s, "---", &vec!["---"; labels.len()]);
    let cells = |f: &dyn Fn(&Run) -> String| runs.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
    row(
        &mut s,
        "kernel",
        &cells(&|r| r.kernel.clone().unwrap_or("?".into())),
    );
    row(
        &mut s,
        "BTF",
        &cells(&|r| match r.btf {
            Some(true) => "yes".into(),
            Some(false) => "**no**".into(),
            None => "?".into(),
        }),
    );
    row(
        &mut s,
        "cgroup",
        &cells(&|r| r.cgroup.clone().unwrap_or("?".into())),
    );
    row(
        &mut s,
        "oom:mark_victim fields",
        &cells(&|r| r.mark_victim.clone().unwrap_or("?".into())),
    );
    for test in tests {
        row(&mut s, test, &cells(&|r| cell(r, test)));
    }
    row(
        &mut s,
        "wall time",
        &cells(&|r| {
            let end = if r.timed_out {
                " (timeout)"
            } else if r.done {
                ""
            } else {
                " (died)"
            };
            format!("{}s{end}", r.secs)
        }),
    );

    let hooks = hooks(runs);
    if !hooks.is_empty() {
        let _ = writeln!(
            s,
            "\nHooks (`header.hooks[].via` of the self-test's log; `-` = not attached):\n"
        );
        row(&mut s, "hook", &labels);
        row(&mut s, "---", &vec!["---"; labels.len()]);
        let mut names: Vec<&String> = Vec::new();
        for (_, list) in &hooks {
            for h in list {
                if !names.contains(&&h.0) {
                    names.push(&h.0);
                }
            }
        }
        for name in names {
            let cells: Vec<String> = hooks
                .iter()
                .map(|(_, list)| match list.iter().find(|h| &h.0 == name) {
                    Some((_, via, true, _)) => via.clone(),
                    Some((_, _, false, _)) => "-".into(),
                    None => "?".into(),
                })
                .collect();
            row(&mut s, name, &cells);
        }
        for (label, list) in &hooks {
            for (name, _, _, detail) in list {
                if let Some(d) = detail {
                    let _ = writeln!(s, "\n- {label}, {name}: {}", short(d));
                }
            }
        }
    }

    for (label, run) in runs {
        for (test, case, text) in &run.failures {
            let _ = writeln!(s, "\n### {label}: {test} / {case}\n\n```");
            for line in text {
                let _ = writeln!(s, "{line}");
            }
            let _ = writeln!(s, "```");
        }
    }
    let _ = writeln!(s, "\nTotal wall time: {}s", elapsed.as_secs());
    s
}

/// A hook's detail without the verifier's full log: its first line and the
/// last lines, where the verifier states what it rejected.
fn short(detail: &str) -> String {
    let lines: Vec<&str> = detail.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() <= 6 {
        return lines.join(" / ");
    }
    let head = lines[0]
        .split(" Verifier output:")
        .next()
        .unwrap_or(lines[0]);
    let stats = ["verification time", "stack depth", "processed "];
    let mut tail: Vec<&str> = lines
        .iter()
        .rev()
        .filter(|l| !stats.iter().any(|s| l.starts_with(s)))
        .take(2)
        .copied()
        .collect();
    tail.reverse();
    format!("{head} Verifier: `{}`", tail.join(" / "))
}

fn cell(r: &Run, test: &str) -> String {
    match r.result(test) {
        Some((_, true, detail)) => format!("pass{}", secs(detail)),
        Some((_, false, detail)) => format!("**FAIL**{}", secs(detail)),
        None if r.failures.iter().any(|f| f.0 == test) => "**died**".into(),
        None => "not run".into(),
    }
}

fn secs(detail: &str) -> String {
    detail
        .split_whitespace()
        .find_map(|w| w.strip_prefix("secs="))
        .map(|n| format!(" ({n}s)"))
        .unwrap_or_default()
}

fn row(s: &mut String, first: &str, cells: &[impl AsRef<str>]) {
    let _ = write!(s, "| {first} |");
    for c in cells {
        let _ = write!(s, " {} |", c.as_ref());
    }
    s.push('\n');
}

type Hook = (String, String, bool, Option<String>);

/// (run label, [(name, via, attached, detail)]) for each run with a header.
fn hooks(runs: &[(String, Run)]) -> Vec<(String, Vec<Hook>)> {
    let mut out = Vec::new();
    for (label, run) in runs {
        let Some(header) = &run.header else { continue };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(header) else {
            continue;
        };
        let list = v["hooks"].as_array().cloned().unwrap_or_default();
        let hooks = list
            .iter()
            .map(|h| {
                let text = |k: &str| h[k].as_str().map(str::to_string);
                (
                    text("name").unwrap_or_default(),
                    text("via").unwrap_or_default(),
                    h["attached"].as_bool().unwrap_or(false),
                    text("detail").filter(|d| !d.is_empty()),
                )
            })
            .collect();
        out.push((label.clone(), hooks));
    }
    out
}
