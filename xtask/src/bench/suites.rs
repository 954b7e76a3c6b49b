//! Real runners on suites a user recognises (issue 37 item 5): jest 30,
//! vitest 3.2 (forks pool) and pytest 9 with pytest-xdist, the runners the
//! kernel tests install (tracer-user/tests/fixtures/suites/setup.sh, its
//! cache made or reused through `test_deps::suites_cache`, as `cargo xtask
//! test` does). Each is timed bare, under `tracer record`, under `tracer
//! record --tests` (the integrations that name the tests loaded) and under
//! bpftrace, runs interleaved, medians; ratios beyond start-up as the
//! workload rows compute them.
//!
//! The fixture suites alone are two tests, one of which holds its worker a
//! second (`SUITE_KILL=0`: nothing is killed, both pass): the runner's
//! start-up and that second would be the whole row. So each suite is the
//! fixture's sibling test (that second in one worker) plus generated test
//! files (`suite_files`: hashing, file I/O, a shell-out, a stderr line per
//! file), 40 of them (10 with `--quick`), which the runner spreads over its
//! two workers as it would a project's. The fixture's cleanup test is left
//! out: it checks that it runs in another worker than the sibling, which
//! only holds when the suite is those two files.
use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result};

use super::{
    logs::read_trailer,
    measure::{measure, Measured, Stats},
    program_time::{self, Row},
    suite_files,
    workloads::{Ctx, Tool},
};
use crate::{test_deps, workspace::Workspace};

const FIXTURES: &str = "tracer-user/tests/fixtures/suites";

/// One runner's suite, laid out under the bench's scratch dir.
pub(crate) struct Suite {
    pub name: &'static str,
    pub what: String,
    /// The runner's working directory: the fixture's files, the generated
    /// ones and (JavaScript) a link to setup.sh's node_modules.
    pub cwd: PathBuf,
    pub argv: Vec<String>,
}

impl Suite {
    /// `cmd` run as the suite runs: in its directory, with `suite_dir` its
    /// `SUITE_DIR` (a fresh one each run: the sibling test writes its pid
    /// there, and the pytest one returns at once when it finds one).
    fn set_up(&self, cmd: &mut Command, suite_dir: &Path) {
        cmd.current_dir(&self.cwd)
            .env("SUITE_DIR", suite_dir)
            .env("SUITE_KILL", "0")
            .env("CI", "true")
            .env("PYTHONDONTWRITEBYTECODE", "1");
    }
}

/// The three suites, `files` generated test files each (40 × `scale`),
/// installing the runners first when setup.sh's cache lacks them.
pub(crate) fn prepare(ws: &Workspace, scratch: &Path, scale: f64) -> Result<Vec<Suite>> {
    test_deps::ensure_programs(&[
        ("node", "nodejs"),
        ("npm", "npm"),
        ("python3 -m venv", "python3-venv"),
    ])?;
    let cache = test_deps::suites_cache(ws)?;
    let files = ((40.0 * scale) as usize).max(4);
    let root = scratch.join("suites");
    let modules = cache.join("node/node_modules");
    let js = |p: &str| modules.join(p).to_string_lossy().into_owned();
    // A path: bpftrace's -c runs no PATH lookup of its own.
    let node = crate::bootstrap::which("node", &std::env::var_os("PATH").unwrap_or_default())
        .context("`node` not on PATH")?
        .to_string_lossy()
        .into_owned();
    let what = |runner: &str| {
        format!("{runner}: the fixture's sibling test + {files} generated files × 4 tests")
    };

    let dir = lay_out(ws, &root, "jest", "sibling.test.js", Some(&modules))?;
    generate(
        &dir,
        files,
        |i| format!("gen{i:03}.test.js"),
        suite_files::jest,
    )?;
    // No transform (plain CommonJS), no cache across runs (jest's timings
    // would run the next in band); the config a file, so no argument needs
    // quoting (bpftrace's -c takes one string).
    fs::write(dir.join("jest.config.json"), "{\"transform\":{}}\n")?;
    let jest = Suite {
        name: "jest",
        what: what("jest 30, `--maxWorkers=2`"),
        argv: vec![
            node.clone(),
            js("jest/bin/jest.js"),
            "--ci".into(),
            "--maxWorkers=2".into(),
            "--no-cache".into(),
            format!("--cacheDirectory={}", dir.join(".jest-cache").display()),
            format!("--config={}", dir.join("jest.config.json").display()),
        ],
        cwd: dir,
    };

    let dir = lay_out(ws, &root, "vitest-forks", "sibling.test.js", Some(&modules))?;
    generate(
        &dir,
        files,
        |i| format!("gen{i:03}.test.js"),
        suite_files::vitest,
    )?;
    let vitest = Suite {
        name: "vitest (forks)",
        what: what("vitest 3.2, `--pool=forks`, 2 workers"),
        argv: vec![
            node.clone(),
            js("vitest/vitest.mjs"),
            "run".into(),
            "--no-cache".into(),
            "--pool=forks".into(),
            "--maxWorkers=2".into(),
            "--minWorkers=2".into(),
        ],
        cwd: dir,
    };

    let dir = lay_out(ws, &root, "pytest", "test_sibling.py", None)?;
    generate(
        &dir,
        files,
        |i| format!("test_gen{i:03}.py"),
        suite_files::pytest,
    )?;
    let pytest = Suite {
        name: "pytest-xdist",
        what: what("pytest 9 + xdist 3.8, `-n 2 --dist loadfile`"),
        argv: vec![
            cache.join("venv/bin/python").to_string_lossy().into_owned(),
            "-m".into(),
            "pytest".into(),
            "-n".into(),
            "2".into(),
            "--dist".into(),
            "loadfile".into(),
            "-p".into(),
            "no:cacheprovider".into(),
            "-q".into(),
        ],
        cwd: dir,
    };
    Ok(vec![jest, vitest, pytest])
}

/// `root/name`, fresh: the sibling test `sibling` of the fixture suite
/// `name`, and a link to `modules` as its node_modules.
fn lay_out(
    ws: &Workspace,
    root: &Path,
    name: &str,
    sibling: &str,
    modules: Option<&Path>,
) -> Result<PathBuf> {
    let dir = root.join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let src = ws.root.join(FIXTURES).join(name).join(sibling);
    fs::copy(&src, dir.join(sibling)).with_context(|| format!("copying {}", src.display()))?;
    if let Some(m) = modules {
        std::os::unix::fs::symlink(m, dir.join("node_modules"))?;
    }
    Ok(dir)
}

fn generate(
    dir: &Path,
    n: usize,
    name: impl Fn(usize) -> String,
    body: impl Fn(usize) -> String,
) -> Result<()> {
    for i in 0..n {
        fs::write(dir.join(name(i)), body(i))?;
    }
    Ok(())
}

/// The suites' rows: `tools` (bare first) interleaved, `reps` runs each
/// (bpftrace `ref_reps`); each suite also once under `--program-stats`,
/// into `program_rows`. `startup` holds each tool's `-- true` time.
pub(crate) fn rows(
    cx: &mut Ctx,
    suites: &[Suite],
    tools: &[Tool],
    startup: &[f64; Tool::COUNT],
    (reps, ref_reps): (usize, usize),
    program_rows: &mut Vec<Row>,
) -> Result<()> {
    cx.say("");
    cx.say("## Real suites (`SUITE_KILL=0`: every test passes): median wall time; ×raw = tool/bare; ×beyond = (tool − its start-up)/bare");
    cx.say("");
    cx.say("| suite | bare | tracer | ×raw / ×beyond | tracer --tests | ×raw / ×beyond | bpftrace ×raw / ×beyond | events (tracer / --tests) | lost | peak RSS of the tree |");
    cx.say("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut notes = Vec::new();
    for s in suites {
        let dir = cx.tmp("suite-stats");
        let sdir = fresh(cx, "suite-dir")?;
        let mut c = cx.stats_command(&s.argv, &dir);
        s.set_up(&mut c, &sdir);
        program_rows.push(program_time::measure_cmd(&mut c, s.name, &dir)?);

        let mut times: Vec<Vec<Measured>> = vec![Vec::new(); Tool::COUNT];
        let (mut events, mut lost) = ([None, None], String::new());
        let mut failed = 0;
        for rep in 0..reps {
            for &tool in tools {
                if tool == Tool::Bpftrace && rep >= ref_reps {
                    continue;
                }
                let dir = cx.tmp("suite-out");
                let sdir = fresh(cx, "suite-dir")?;
                let mut c = cx.command(tool, &s.argv, &dir, None);
                s.set_up(&mut c, &sdir);
                let m = measure(&mut c)?;
                if m.code != 0 {
                    failed += 1;
                    eprintln!(
                        "bench: warning: {} under {} exited {}",
                        s.name,
                        tool.label(),
                        m.code
                    );
                }
                let log = dir.join("events.ndjson");
                let slot = match tool {
                    Tool::Tracer => Some(0),
                    Tool::TracerTests => Some(1),
                    _ => None,
                };
                if let Some(i) = slot {
                    if let Some(t) = read_trailer(&log) {
                        events[i] = Some(t.events);
                        if t.lost_total() > 0 || lost.is_empty() {
                            lost = t.lost_summary();
                        }
                    }
                }
                if tool == Tool::TracerTests && rep == 0 {
                    notes.push(format!(
                        "{}: `--tests` changed {}",
                        s.name,
                        env_changes(&log).unwrap_or_else(|| "nothing (no header?)".into())
                    ));
                }
                times[tool as usize].push(m);
                let _ = fs::remove_dir_all(&dir);
            }
        }
        let bare = Stats::of(&times[Tool::Bare as usize]).median;
        let med = |tool: Tool| Stats::of(&times[tool as usize]).median;
        let ratio = |tool: Tool| -> String {
            if times[tool as usize].is_empty() {
                return "–".into();
            }
            let m = med(tool);
            format!(
                "{:.2}× / {:.2}×",
                m / bare,
                (m - startup[tool as usize]).max(0.0) / bare
            )
        };
        let count = |e: Option<u64>| e.map_or("?".into(), |e| e.to_string());
        let rss = Stats::of(&times[Tool::Tracer as usize])
            .rss_mb
            .max(Stats::of(&times[Tool::TracerTests as usize]).rss_mb);
        let failed = if failed > 0 {
            format!(" **{failed} runs failed**")
        } else {
            String::new()
        };
        cx.say(format!(
            "| {} ({}){failed} | {bare:.2} s | {:.2} s | {} | {:.2} s | {} | {} | {} / {} | {} | {rss:.1} MB |",
            s.name,
            s.what,
            med(Tool::Tracer),
            ratio(Tool::Tracer),
            med(Tool::TracerTests),
            ratio(Tool::TracerTests),
            ratio(Tool::Bpftrace),
            count(events[0]),
            count(events[1]),
            if lost.is_empty() { "no trailer" } else { &lost },
        ));
    }
    cx.say("");
    for n in notes {
        cx.say(format!("- {n}"));
    }
    Ok(())
}

/// `cx.tmp(name)`, created.
fn fresh(cx: &Ctx, name: &str) -> Result<PathBuf> {
    let dir = cx.tmp(name);
    fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The variables the log's header says `--tests` changed, joined.
fn env_changes(log: &Path) -> Option<String> {
    // The header only: the first line (see `logs::last_line` on why not the whole log).
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(fs::File::open(log).ok()?),
        &mut first,
    )
    .ok()?;
    let header: serde_json::Value = serde_json::from_str(&first).ok()?;
    let vars: Vec<String> = header["env_changes"]
        .as_array()?
        .iter()
        .filter_map(|c| Some(format!("{} ({})", c["var"].as_str()?, c["how"].as_str()?)))
        .collect();
    Some(if vars.is_empty() {
        "nothing".into()
    } else {
        vars.join(", ")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_changes_lists_the_headers_variables() {
        let dir = std::env::temp_dir().join(format!("bench-suites-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let log = dir.join("events.ndjson");
        fs::write(
            &log,
            concat!(
                "{\"type\":\"header\",\"env_changes\":[",
                "{\"var\":\"NODE_OPTIONS\",\"how\":\"set\",\"new\":\"--require /x\"},",
                "{\"var\":\"PYTHONPATH\",\"how\":\"prepended\",\"old\":\"a\",\"new\":\"/t:a\"}]}\n",
                "{\"type\":\"trailer\",\"events\":0}\n"
            ),
        )
        .unwrap();
        assert_eq!(
            env_changes(&log).as_deref(),
            Some("NODE_OPTIONS (set), PYTHONPATH (prepended)")
        );
        fs::write(&log, "{\"type\":\"header\",\"env_changes\":[]}\n").unwrap();
        assert_eq!(env_changes(&log).as_deref(), Some("nothing"));
        // Without `--tests` the header has no such field.
        fs::write(&log, "{\"type\":\"header\"}\n").unwrap();
        assert_eq!(env_changes(&log), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
