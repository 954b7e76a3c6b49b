//! Timing and peak RSS of one child process, and medians over runs.
use std::{
    os::unix::process::CommandExt,
    process::{Command, Stdio},
    time::Instant,
};

use anyhow::{Context, Result};

/// One measured run.
#[derive(Clone, Debug)]
pub(crate) struct Measured {
    pub secs: f64,
    /// `ru_maxrss` of the child from wait4(2): the largest of the child and
    /// the descendants it reaped (our workloads' processes are ~1–2 MB, so
    /// for `tracer record` this is the tracer's own peak).
    pub rss_kb: u64,
    /// Exit code, or 128+N when killed by signal N.
    pub code: i32,
    /// User + system CPU time of the child and the descendants it reaped.
    pub cpu_secs: f64,
}

/// `struct rusage` on Linux x86-64/aarch64: two timevals, then 14 longs,
/// `ru_maxrss` first among them.
#[repr(C)]
struct Rusage {
    utime: [i64; 2],
    stime: [i64; 2],
    maxrss: i64,
    rest: [i64; 13],
}

extern "C" {
    fn wait4(pid: i32, status: *mut i32, options: i32, rusage: *mut Rusage) -> i32;
}

/// Run `cmd` with quiet stdio; wall time from spawn to reaping.
pub(crate) fn measure(cmd: &mut Command) -> Result<Measured> {
    quiet(cmd);
    // fork, not the posix_spawn (vfork) std uses otherwise: a vfork child
    // runs in the parent's mm, and exec keeps that mm's high-water mark as
    // the child's `ru_maxrss`, so every child reported the bench's own
    // lifetime peak (measured: a parent that once held 218 MB, down to
    // 13 MB, gave `/bin/true` 218 MB through posix_spawn and 9.9 MB through
    // fork; `tracer -- true` showed 62.4 MB in one run, 30 MB in the next
    // row). A forked child starts from the bench's current RSS (dup_mm),
    // below tracer's own peak.
    // SAFETY: the closure does nothing, so nothing unsafe runs between fork
    // and exec.
    unsafe {
        cmd.pre_exec(|| Ok(()));
    }
    let t0 = Instant::now();
    let child = cmd
        .spawn()
        .with_context(|| format!("starting `{}`", crate::cmd::display(cmd)))?;
    let pid = child.id() as i32;
    let mut status = 0i32;
    let mut ru = Rusage {
        utime: [0; 2],
        stime: [0; 2],
        maxrss: 0,
        rest: [0; 13],
    };
    loop {
        // SAFETY: plain syscall wrapper; both pointers are valid for writes.
        let r = unsafe { wait4(pid, &mut status, 0, &mut ru) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err).context("wait4");
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    // Reaped above: `child` must not be waited for again.
    drop(child);
    let code = if status & 0x7f == 0 {
        (status >> 8) & 0xff
    } else {
        128 + (status & 0x7f)
    };
    let tv = |t: [i64; 2]| t[0] as f64 + t[1] as f64 / 1e6;
    Ok(Measured {
        secs,
        rss_kb: ru.maxrss.max(0) as u64,
        code,
        cpu_secs: tv(ru.utime) + tv(ru.stime),
    })
}

/// Quiet stdio for a measured command.
pub(crate) fn quiet(c: &mut Command) -> &mut Command {
    c.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
}

pub(crate) struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Largest peak RSS over the runs, MB.
    pub rss_mb: f64,
}

/// The median of `v`, sorted in place (NaN when empty).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

impl Stats {
    pub(crate) fn of(runs: &[Measured]) -> Stats {
        let mut t: Vec<f64> = runs.iter().map(|r| r.secs).collect();
        let median = median(&mut t);
        Stats {
            median,
            min: t.first().copied().unwrap_or(f64::NAN),
            max: t.last().copied().unwrap_or(f64::NAN),
            rss_mb: runs.iter().map(|r| r.rss_kb).max().unwrap_or(0) as f64 / 1024.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        let m = |v: &[f64]| {
            let runs: Vec<Measured> = v
                .iter()
                .map(|&secs| Measured {
                    secs,
                    rss_kb: 0,
                    code: 0,
                    cpu_secs: 0.0,
                })
                .collect();
            Stats::of(&runs).median
        };
        assert_eq!(m(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(m(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn measures_exit_code_and_rss() {
        let r = measure(Command::new("sh").args(["-c", "exit 3"])).unwrap();
        assert_eq!(r.code, 3);
        assert!(r.rss_kb > 0);
    }
}
