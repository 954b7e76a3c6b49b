//! docs/architecture.md's house, checked against the code: the floors come
//! from the doc's own table, the arrows from every `crate::…`, `super::…`
//! and `tracer_user::…` path in tracer-user/src (the `use` lines and the
//! inline paths alike: an inline `crate::run::…` in capture/ once ran back
//! up unseen by a grep of `use` lines). A folder's test files may reach up
//! to build their fixtures; nothing else may.
//!
//! What fails: an arrow to a higher floor; a circle between folders; a
//! folder the table does not place; an import the table lists that the
//! code no longer has; a file path the table names that does not exist.
use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// One row of the table: its floor, the folders it places, and what its
/// "may import" column lists (None: "everything below" or "std and crates
/// only", which name no folder to check for).
struct Row {
    floor: u32,
    rooms: Vec<String>,
    listed: Option<Vec<String>>,
    /// Every backticked token of the row, for the path check.
    tokens: Vec<String>,
}

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn backticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// `main.rs` → main, `commands/` → commands, `report::html` → report.
fn room_name(token: &str) -> String {
    token
        .trim_end_matches('/')
        .trim_end_matches(".rs")
        .split("::")
        .next()
        .unwrap_or_default()
        .to_string()
}

fn table(doc: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        if line.starts_with("| floor |") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        let Ok(floor) = cells[0].trim_start_matches('|').trim().parse::<u32>() else {
            continue; // the `| --- |` line
        };
        assert_eq!(
            cells.len(),
            4,
            "a table row of docs/architecture.md has 4 cells: {line}"
        );
        let rooms = backticked(cells[1]).iter().map(|t| room_name(t)).collect();
        let may = cells[3];
        let listed = (!may.contains("everything below") && !may.contains("std and crates only"))
            .then(|| {
                backticked(may)
                    .iter()
                    .filter(|t| !t.contains('-')) // tracer-common: a crate, not a folder
                    .map(|t| room_name(t))
                    .collect()
            });
        rows.push(Row {
            floor,
            rooms,
            listed,
            tokens: backticked(line),
        });
    }
    rows
}

/// A source file: its module path below the crate root, and whether it
/// exists only for tests.
struct Source {
    path: PathBuf,
    module: Vec<String>,
    text: String,
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            walk(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

fn module_of(src: &Path, path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src).expect("below src");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The text of a file without comment lines and without its trailing
/// `#[cfg(test)] mod tests { … }` block (a test may reach up).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod ") && n.trim_end().ends_with('{'))
        {
            break;
        }
        // A comment line stays as an empty one: the line numbers hold.
        if !t.starts_with("//") {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// Modules declared `#[cfg(test)] mod name;`: their files are tests.
fn test_children(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_cfg = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[cfg(test)]") {
            after_cfg = true;
            continue;
        }
        if after_cfg {
            if let Some(name) = line.strip_prefix("mod ").and_then(|r| r.strip_suffix(';')) {
                out.push(name.trim().to_string());
            }
        }
        after_cfg = false;
    }
    out
}

fn sources(src: &Path) -> Vec<Source> {
    let mut paths = Vec::new();
    walk(src, &mut paths);
    let mut all: Vec<Source> = paths
        .into_iter()
        .map(|path| Source {
            module: module_of(src, &path),
            text: fs::read_to_string(&path).expect("a source file"),
            path,
        })
        .collect();
    let mut tests: BTreeSet<Vec<String>> = BTreeSet::new();
    for s in &all {
        for child in test_children(&s.text) {
            let mut m = s.module.clone();
            m.push(child);
            tests.insert(m);
        }
    }
    all.retain(|s| {
        !tests
            .iter()
            .any(|t| s.module.len() >= t.len() && s.module[..t.len()] == t[..])
    });
    all
}

/// The first names after `prefix` in `code`: `crate::a::b` gives a,
/// `crate::{a::x, b}` gives a and b.
fn names_after(code: &str, prefix: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find(prefix) {
        let start = from + at;
        from = start + prefix.len();
        let before = code[..start].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':') {
            continue; // `$crate::`, `foo_crate::`, `a::super::`
        }
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            let mut word = String::new();
            for c in group.chars() {
                if item_start && (c.is_alphanumeric() || c == '_') {
                    word.push(c);
                    continue;
                }
                if !word.is_empty() {
                    out.push((start, std::mem::take(&mut word)));
                    item_start = false;
                }
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => item_start = true,
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
            }
            if !word.is_empty() {
                out.push((start, word));
            }
        } else {
            let word: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !word.is_empty() {
                out.push((start, word));
            }
        }
    }
    out
}

/// Every folder (top module) a file's code names, with the line it is on.
fn arrows(s: &Source, tops: &BTreeSet<String>) -> Vec<(String, usize)> {
    let code = code_of(&s.text);
    let line_of = |at: usize| code[..at].lines().count().max(1);
    let mut out = Vec::new();
    for prefix in ["crate::", "tracer_user::"] {
        for (at, name) in names_after(&code, prefix) {
            out.push((name, line_of(at)));
        }
    }
    // super::super::x from module [a, b, c] resolves to [a] + x.
    let mut from = 0;
    while let Some(at) = code[from..].find("super::") {
        let start = from + at;
        let before = code[..start].chars().next_back();
        let mut depth = 0;
        let mut end = start;
        while code[end..].starts_with("super::") {
            depth += 1;
            end += "super::".len();
        }
        from = end;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let base = s.module.len().saturating_sub(depth);
        if base >= 1 {
            out.push((s.module[0].clone(), line_of(start)));
        } else {
            let rest = &code[end - "super::".len()..];
            // Only this path's names: the first match, at the start of `rest`.
            for (_, name) in names_after(rest, "super::")
                .into_iter()
                .take_while(|(a, _)| *a == 0)
            {
                out.push((name, line_of(start)));
            }
        }
    }
    out.retain(|(name, _)| tops.contains(name));
    out
}

fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut circle = path[i..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_house_has_no_arrow_up_and_no_circle() {
    let root = manifest();
    let src = root.join("src");
    let doc = fs::read_to_string(root.join("../docs/architecture.md")).expect("architecture.md");
    let rows = table(&doc);
    assert!(
        rows.len() >= 10,
        "the floors table was not found in docs/architecture.md"
    );
    let floor: BTreeMap<String, u32> = rows
        .iter()
        .flat_map(|r| r.rooms.iter().map(|n| (n.clone(), r.floor)))
        .collect();
    let files = sources(&src);
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|s| s.module.first().cloned())
        .filter(|t| t != "lib")
        .collect();

    let mut faults = Vec::new();
    for top in &tops {
        if !floor.contains_key(top) {
            faults.push(format!(
                "`{top}` is on no floor of docs/architecture.md's table"
            ));
        }
    }
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for s in &files {
        let Some(me) = s.module.first() else { continue };
        let Some(&mine) = floor.get(me) else { continue };
        for (to, line) in arrows(s, &tops) {
            if &to == me {
                continue;
            }
            graph.entry(me.clone()).or_default().insert(to.clone());
            if floor.get(&to).is_some_and(|&theirs| theirs < mine) {
                faults.push(format!(
                    "{}:{line}: `{me}` (floor {mine}) reaches up to `{to}` (floor {})",
                    s.path.strip_prefix(&root).unwrap_or(&s.path).display(),
                    floor[&to]
                ));
            }
        }
    }
    if let Some(circle) = find_circle(&graph) {
        faults.push(format!(
            "an import circle between folders: {}",
            circle.join(" -> ")
        ));
    }
    for row in &rows {
        for listed in row.listed.iter().flatten() {
            let used = row
                .rooms
                .iter()
                .any(|r| graph.get(r).is_some_and(|g| g.contains(listed)));
            if !used {
                faults.push(format!(
                    "docs/architecture.md says {} may import `{listed}`, but none of it does",
                    row.rooms.join(", ")
                ));
            }
        }
        for token in &row.tokens {
            let is_path = token.contains('/')
                && (token.ends_with(".rs") || token.ends_with('/'))
                && !token.contains(' ');
            if !is_path {
                continue;
            }
            // Below src/, below the row's folder, or a path from tracer-user/ or the repository.
            let bases = [src.clone(), root.clone(), root.join("..")];
            let found = bases.iter().any(|b| b.join(token).exists())
                || row.rooms.iter().any(|r| src.join(r).join(token).exists());
            if !found {
                faults.push(format!(
                    "docs/architecture.md names `{token}` ({} row), which does not exist",
                    row.rooms.join(", ")
                ));
            }
        }
    }
    assert!(
        faults.is_empty(),
        "the house does not match its plan:\n{}",
        faults.join("\n")
    );
}

#[test]
fn an_inline_path_up_is_an_arrow() {
    let tops: BTreeSet<String> = ["run", "capture"].iter().map(|s| s.to_string()).collect();
    let s = Source {
        path: PathBuf::from("capture/x.rs"),
        module: vec!["capture".into(), "x".into()],
        text: "use crate::{capture::y, run::z};\nfn f() { crate::run::event_loop::g(); }\n\
               // crate::run::in_a_comment\n"
            .into(),
    };
    let found: Vec<String> = arrows(&s, &tops).into_iter().map(|(n, _)| n).collect();
    assert_eq!(found, ["capture", "run", "run"]);
    let up = Source {
        path: PathBuf::from("capture/mod.rs"),
        module: vec!["capture".into()],
        text: "use super::run::x;\nuse super::{capture, run};\n".into(),
    };
    let found: Vec<String> = arrows(&up, &tops).into_iter().map(|(n, _)| n).collect();
    assert_eq!(found, ["run", "capture", "run"]);
}

/// No merge left half done: a conflict's markers once stayed in
/// BENCHMARKS.md for a day, both sides of it published as one.
#[test]
fn no_tracked_file_keeps_a_conflicts_markers() {
    let root = manifest().join("..");
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["ls-files", "-z"])
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git ls-files failed");
    let mut faults = Vec::new();
    for name in out.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        let name = String::from_utf8_lossy(name).into_owned();
        let Ok(text) = fs::read_to_string(root.join(&name)) else {
            continue; // binary, or gone from the work tree
        };
        for (i, line) in text.lines().enumerate() {
            if line.starts_with("<<<<<<< ") || line.starts_with(">>>>>>> ") {
                faults.push(format!("{name}:{}: {line}", i + 1));
            }
        }
    }
    assert!(
        faults.is_empty(),
        "conflict markers:\n{}",
        faults.join("\n")
    );
}
