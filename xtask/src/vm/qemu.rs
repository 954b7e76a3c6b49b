//! Boot a kernel with qemu (or run vm/suite.sh on the host) and parse the
//! `@@tracer-vm` lines the suite prints.
use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    path::Path,
    process::{Child, Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use super::arch::VmArch;
use crate::cmd;

const MARK: &str = "@@tracer-vm ";

/// What one kernel (VM or host) reported.
#[derive(Default)]
pub(crate) struct Run {
    pub kernel: Option<String>,
    pub btf: Option<bool>,
    pub cgroup: Option<String>,
    /// The fields of the oom:mark_victim tracepoint.
    pub mark_victim: Option<String>,
    /// The self-test's event log header (JSON).
    pub header: Option<String>,
    /// (test name, passed, detail such as `secs=12 rc=101`).
    pub results: Vec<(String, bool, String)>,
    /// (test name, failing test case, its panic/output lines).
    pub failures: Vec<(String, String, Vec<String>)>,
    pub done: bool,
    pub timed_out: bool,
    pub secs: u64,
}

impl Run {
    pub(crate) fn result(&self, test: &str) -> Option<&(String, bool, String)> {
        self.results.iter().find(|(n, _, _)| n == test)
    }
}

pub(crate) struct Vm<'a> {
    pub arch: &'a VmArch,
    /// `cgroup_no_v1=all`: vm/init.sh then mounts cgroup2 alone, with the
    /// memory controller (its fallback when v1 memory cannot be mounted).
    pub cgroup_v2: bool,
    pub vmlinuz: &'a Path,
    pub initrd: &'a Path,
    pub memory_mb: u32,
    pub cpus: u32,
    pub timeout: Duration,
}

/// Boot, stream the console into `log`, parse it.
pub(crate) fn boot(vm: &Vm, log: &Path) -> Result<Run> {
    let mut qemu = Command::new(vm.arch.qemu.0);
    vm.arch.machine(&mut qemu, vm.arch.accel());
    qemu.args([
        "-m",
        &vm.memory_mb.to_string(),
        "-smp",
        &vm.cpus.to_string(),
    ])
    .args(["-display", "none", "-serial", "stdio", "-monitor", "none"])
    .args(["-no-reboot", "-kernel"])
    .arg(vm.vmlinuz)
    .arg("-initrd")
    .arg(vm.initrd)
    .arg("-append")
    .arg(format!(
        "console={} panic=-1 oops=panic quiet loglevel=3 rdinit=/init{}{}",
        vm.arch.console,
        vm.arch.cmdline,
        if vm.cgroup_v2 {
            " cgroup_no_v1=all"
        } else {
            ""
        }
    ));
    run_logged(qemu, log, vm.timeout)
}

/// `sh vm/suite.sh ARGS` on this machine, logged and parsed like a VM.
pub(crate) fn host(suite: &Path, args: &[String], log: &Path, timeout: Duration) -> Result<Run> {
    let mut sh = Command::new("sh");
    sh.arg(suite).args(args);
    run_logged(sh, log, timeout)
}

/// Parse a log written earlier (`--report-only`).
pub(crate) fn from_log(log: &Path) -> Result<Run> {
    let text = fs::read(log).with_context(|| format!("reading {}", log.display()))?;
    let lines: Vec<String> = String::from_utf8_lossy(&text)
        .lines()
        .map(String::from)
        .collect();
    Ok(parse(&lines))
}

fn run_logged(mut command: Command, log: &Path, timeout: Duration) -> Result<Run> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd::echo(&command);
    let start = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("could not start `{}`", cmd::display(&command)))?;
    let mut file = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut stderr = child.stderr.take().context("stderr")?;
    let err_thread = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let reader = thread::spawn(move || -> Vec<String> {
        let mut lines = Vec::new();
        let mut buf = Vec::new();
        let mut stdout = BufReader::new(stdout);
        while stdout.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
            let line = String::from_utf8_lossy(&buf).trim_end().to_string();
            buf.clear();
            let _ = writeln!(file, "{line}");
            if let Some(rest) = line.strip_prefix(MARK) {
                if rest.starts_with("result") || rest.starts_with("kernel") {
                    eprintln!("  {rest}");
                }
            }
            lines.push(line);
        }
        lines
    });
    let timed_out = wait(&mut child, timeout)?;
    let lines = reader.join().unwrap_or_default();
    let secs = start.elapsed().as_secs();
    // Appended so that `--report-only` sees the same as this run.
    let mut file = fs::OpenOptions::new().append(true).open(log)?;
    writeln!(
        file,
        "{MARK}wall {secs} {}",
        if timed_out { "timeout" } else { "exited" }
    )?;
    let stderr = err_thread.join().unwrap_or_default();
    if !stderr.trim().is_empty() {
        fs::write(log.with_extension("stderr"), &stderr)?;
        let first = stderr.lines().next().unwrap_or("");
        eprintln!(
            "  stderr ({}): {first}",
            log.with_extension("stderr").display()
        );
    }
    let mut lines = lines;
    lines.push(format!(
        "{MARK}wall {secs} {}",
        if timed_out { "timeout" } else { "exited" }
    ));
    Ok(parse(&lines))
}

/// Wait up to `timeout`; kill on expiry. True when it timed out.
fn wait(child: &mut Child, timeout: Duration) -> Result<bool> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(false);
        }
        thread::sleep(Duration::from_millis(200));
    }
    let _ = child.kill();
    child.wait()?;
    Ok(true)
}

pub(crate) fn parse(lines: &[String]) -> Run {
    let mut run = Run::default();
    let mut current: Option<String> = None;
    let mut block: Vec<String> = Vec::new();
    for line in lines {
        // The console may prefix a line with a stray \r or kernel text.
        let line = line.trim_start_matches('\r');
        let Some(idx) = line.find(MARK) else {
            if current.is_some() {
                block.push(line.to_string());
            }
            continue;
        };
        let rest = &line[idx + MARK.len()..];
        let (key, value) = rest.split_once(' ').unwrap_or((rest, ""));
        match key {
            "kernel" => run.kernel = Some(value.into()),
            "btf" => run.btf = Some(value == "yes"),
            "cgroup" => run.cgroup = Some(value.into()),
            "mark_victim" => run.mark_victim = Some(value.trim().into()),
            "header" => run.header = Some(value.into()),
            "done" => run.done = true,
            "wall" => {
                let mut words = value.split(' ');
                run.secs = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
                run.timed_out = words.next() == Some("timeout");
            }
            "begin" => {
                current = Some(value.into());
                block.clear();
            }
            "result" => {
                let mut words = value.splitn(3, ' ');
                let name = words.next().unwrap_or("").to_string();
                let pass = words.next() == Some("pass");
                let detail = words.next().unwrap_or("").to_string();
                if !pass {
                    run.failures.extend(
                        failed_cases(&block)
                            .into_iter()
                            .map(|(case, text)| (name.clone(), case, text)),
                    );
                }
                run.results.push((name, pass, detail));
                current = None;
            }
            _ => {}
        }
    }
    if let Some(name) = current {
        // Never finished: the VM died or timed out inside this test.
        let tail = block.iter().rev().take(15).rev().cloned().collect();
        run.failures
            .push((name.clone(), "(unfinished)".into(), tail));
    }
    run
}

/// libtest's `---- NAME stdout ----` sections: the failing cases and their output.
fn failed_cases(block: &[String]) -> Vec<(String, Vec<String>)> {
    let mut cases: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_case = false;
    for line in block {
        if let Some(name) = line
            .strip_prefix("---- ")
            .and_then(|l| l.strip_suffix(" stdout ----"))
        {
            cases.push((name.to_string(), Vec::new()));
            in_case = true;
        } else if line == "failures:" || line.starts_with("test result:") {
            in_case = false;
        } else if in_case && !line.trim().is_empty() {
            if let Some((_, text)) = cases.last_mut() {
                if text.len() < 25 {
                    text.push(line.clone());
                }
            }
        }
    }
    if cases.is_empty() {
        // No libtest section (the binary crashed, or the self-test): last lines.
        let tail: Vec<String> = block.iter().rev().take(15).rev().cloned().collect();
        cases.push(("(output)".into(), tail));
    }
    cases
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_results_and_failures() {
        let text = "noise\n@@tracer-vm kernel 6.1.0\n@@tracer-vm btf yes\n\
            @@tracer-vm begin oom\nrunning 1 test\ntest a ... FAILED\n\nfailures:\n\n\
            ---- a stdout ----\nthread 'a' panicked at x.rs:1:2:\nboom\n\nfailures:\n    a\n\n\
            test result: FAILED. 0 passed; 1 failed\n\
            @@tracer-vm result oom fail secs=3 rc=101\n@@tracer-vm begin leaks\n";
        let lines: Vec<String> = text.lines().map(String::from).collect();
        let run = parse(&lines);
        assert_eq!(run.kernel.as_deref(), Some("6.1.0"));
        assert_eq!(run.btf, Some(true));
        assert_eq!(run.results, [("oom".into(), false, "secs=3 rc=101".into())]);
        assert_eq!(run.failures[0].1, "a");
        assert_eq!(run.failures[0].2[1], "boom");
        assert_eq!(run.failures[1].0, "leaks");
        assert_eq!(run.failures[1].1, "(unfinished)");
    }
}
