//! How things are said. One place, so the JSON headline, the Markdown and the
//! terminal summary use the same words.
use super::{
    types::{ProcRef, TargetNs},
    Relation,
};
use crate::eventlog::ExitStatus;

/// The event log's own wall-clock rendering: reports and log never disagree.
pub use crate::eventlog::wall_time;

/// `12.3 s`, `450 ms`, `2 min 03 s`.
/// An RFC 3339 time as people read it: to the millisecond
/// (`2026-12-01T18:29:51.135Z`); report.json keeps the nanoseconds. Text
/// that is no such time comes back as it was.
pub fn ms(time: &str) -> String {
    let Some((whole, frac)) = time.split_once('.') else {
        return time.to_string();
    };
    let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
    if digits <= 3 {
        return time.to_string();
    }
    format!("{whole}.{}{}", &frac[..3], &frac[digits..])
}

pub fn duration(ns: u64) -> String {
    let ms = ns / 1_000_000;
    match ms {
        0 => format!("{} µs", ns / 1_000),
        1..=999 => format!("{ms} ms"),
        1_000..=59_999 => format!("{}.{} s", ms / 1000, (ms % 1000) / 100),
        _ => format!("{} min {:02} s", ms / 60_000, (ms / 1000) % 60),
    }
}

/// `1.5 GiB`, `512 MiB`, `800 KiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if v.fract() < 0.05 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Commands in prose are cut so a sentence stays readable.
pub fn short_command(cmd: &str) -> String {
    crate::text::command::cut(cmd)
}

/// "`node worker.js` (pid 4242)". A process that never exec'd runs its
/// parent's image: say so, or parent and child read as the same process.
pub fn proc_phrase(p: &ProcRef) -> String {
    format!(
        "{} ({}{})",
        crate::text::markdown::code(&short_command(&prose_command(p))),
        pid_label(p),
        fork_note(p)
    )
}

/// "pid 4242", or "pid 4242, pid 7 in its namespace" for a process in a
/// container's pid namespace: the second is what its own logs print.
pub fn pid_label(p: &ProcRef) -> String {
    match p.ns_pid {
        Some(ns) => format!("pid {}, pid {} in its namespace", p.pid, ns.pid),
        None => format!("pid {}", p.pid),
    }
}

/// The command as prose names it: the program without its directory, an
/// interpreter's own flags left out, long paths shortened
/// (`/usr/local/bin/node --require /x/setup.js /w/node_modules/vitest/dist/
/// workers/forks.js` -> `node …/vitest/dist/workers/forks.js`), so a cut
/// sentence keeps what tells two workers apart (see `text::command`).
/// report.json keeps argv whole.
pub fn prose_command(p: &ProcRef) -> String {
    if p.argv.is_empty() {
        return p.command.clone();
    }
    crate::text::command::abbreviate(&p.argv)
}

pub fn fork_note(p: &ProcRef) -> &'static str {
    if p.argv_inherited {
        ", a fork that never exec'd"
    } else {
        ""
    }
}

pub fn relation_phrase(r: Relation) -> &'static str {
    match r {
        Relation::Itself => "itself",
        Relation::Parent => "its parent",
        Relation::Ancestor => "its ancestor",
        Relation::Sibling => "a sibling",
        Relation::Descendant => "its descendant",
        Relation::UnrelatedInRun => "an unrelated process in the run",
        Relation::OutsideRun => "a process outside the run",
        Relation::Tracer => "the tracer",
    }
}

pub fn status_phrase(s: &ExitStatus) -> String {
    match s {
        ExitStatus::Exited { code } => format!("exited with code {code}"),
        ExitStatus::Signaled {
            name,
            core_dumped: true,
            ..
        } => {
            format!("killed by {name} (core dumped)")
        }
        ExitStatus::Signaled { name, .. } => format!("killed by {name}"),
    }
}

/// The kill-family call in C notation: `kill(-4242, SIGKILL)`.
pub fn call_notation(syscall: &str, target_arg: i64, tid_arg: Option<i64>, sig: &str) -> String {
    match (syscall, tid_arg) {
        ("pidfd_send_signal", _) => format!("pidfd_send_signal(pidfd {target_arg}, {sig})"),
        (_, Some(tid)) => format!("{syscall}({target_arg}, {tid}, {sig})"),
        (_, None) => format!("{syscall}({target_arg}, {sig})"),
    }
}

/// What a call aimed at, from its arguments as given. kill() with a negative
/// pid is a process-group kill, and must always be called one.
pub fn aimed_at(syscall: &str, target_arg: i64, tid_arg: Option<i64>) -> String {
    match (syscall, target_arg, tid_arg) {
        ("kill", 0, _) => "the sender's own process group".into(),
        ("kill", -1, _) => "every process the sender may signal".into(),
        ("kill", n, _) if n < 0 => format!("process group {}", -n),
        ("tkill", n, _) => format!("thread {n}"),
        // The call's own arguments cannot say which process a pidfd refers
        // to; a delivered signal can (see `aimed_through_pidfd`).
        ("pidfd_send_signal", n, _) => format!("pidfd {n} (unresolved)"),
        (_, n, Some(tid)) => format!("thread {tid} of pid {n}"),
        (_, n, None) => format!("pid {n}"),
    }
}

/// A pidfd resolved by the signal it delivered: the kernel's signal event
/// names the target (any kernel), so the pidfd is no longer a mystery.
pub fn aimed_through_pidfd(pidfd: i64, target_pid: u32) -> String {
    format!("pid {target_pid} through pidfd {pidfd}")
}

/// `aimed_at` for a target named inside the sender's pid namespace.
pub fn aimed_in_ns(aimed_at: &str, ns: Option<&TargetNs>) -> String {
    match ns {
        None => aimed_at.to_string(),
        Some(TargetNs { pid: Some(p), .. }) => {
            format!("{aimed_at} in the sender's pid namespace (pid {p} here)")
        }
        Some(TargetNs { pid: None, .. }) => {
            format!("{aimed_at} in the sender's pid namespace (no process of the log had it)")
        }
    }
}

/// The trailing clause that calls out group and broadcast kills.
pub fn aim_note(syscall: &str, target_arg: i64, tid_arg: Option<i64>) -> String {
    match (syscall, target_arg) {
        ("kill", 0) => " — a kill of the sender's own process group".into(),
        ("kill", -1) => " — a kill of every process it could signal".into(),
        ("kill", n) if n < 0 => format!(" — a process-group kill of group {}", -n),
        ("tkill", n) => format!(" — aimed at thread {n}"),
        (_, _) if tid_arg.is_some() => format!(" — aimed at thread {}", tid_arg.unwrap_or(0)),
        _ => String::new(),
    }
}

/// "1 unexpected death" / "2 unexpected deaths".
pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What the headline says of the tests (docs/report.md, "Which test"): the
/// killer's — ", spawned by `T` in vitest worker 1" for a helper, ", in `T`
/// …" when the sending thread ran it — then the victim's: "; the victim
/// was running `V` …" (or "was spawned by"). Only when the killer's test is
/// known and is not the victim's: a death with no killer's test (or both
/// ends in the one test of a scenario) keeps its sentence; report.json
/// keeps both tests whatever the headline says.
pub fn tests_phrase(
    victim: Option<&crate::labels::TestAt>,
    killer: Option<&super::Killer>,
) -> String {
    use crate::labels::Via;
    let Some(kt) = killer.and_then(|k| k.test.as_ref()) else {
        return String::new();
    };
    if victim.is_some_and(|v| v.same_tests(kt)) {
        return String::new();
    }
    let how = match kt.via {
        Via::Spawned => "spawned by",
        Via::Own => "in",
    };
    let mut out = format!(", {how} {}", kt.phrase());
    if let Some(v) = victim {
        let lead = match v.via {
            Via::Own => "; the victim was running",
            Via::Spawned => "; the victim was spawned by",
        };
        out.push_str(&format!("{lead} {}", v.phrase()));
    }
    out
}

/// With no test known: the workers, as their runner calls them, when the
/// killer's is known and is not the victim's (", from vitest worker 1; the
/// victim: vitest worker 2"). Nothing otherwise: the sentence stays as it was.
pub fn workers_phrase(victim: Option<&str>, killer: Option<&super::Killer>) -> String {
    let Some(kw) = killer.and_then(|k| k.worker.as_deref()) else {
        return String::new();
    };
    if victim == Some(kw) {
        return String::new();
    }
    match victim {
        Some(v) => format!(", from {kw}; the victim: {v}"),
        None => format!(", from {kw}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_for_people_stop_at_the_millisecond() {
        assert_eq!(
            super::ms("2026-12-01T18:29:51.135272839Z"),
            "2026-12-01T18:29:51.135Z"
        );
        assert_eq!(
            super::ms("2026-12-01T18:29:51.1Z"),
            "2026-12-01T18:29:51.1Z"
        );
        assert_eq!(super::ms("2026-12-01T18:29:51Z"), "2026-12-01T18:29:51Z");
        assert_eq!(super::ms("not a time"), "not a time");
    }

    use super::*;

    #[test]
    fn group_kill_is_named_a_group_kill() {
        assert_eq!(aimed_at("kill", -4242, None), "process group 4242");
        assert_eq!(
            aim_note("kill", -4242, None),
            " — a process-group kill of group 4242"
        );
        assert_eq!(
            call_notation("kill", -4242, None, "SIGKILL"),
            "kill(-4242, SIGKILL)"
        );
        assert_eq!(aimed_at("kill", 4242, None), "pid 4242");
        assert_eq!(aim_note("kill", 4242, None), "");
        assert_eq!(aimed_at("tgkill", 10, Some(12)), "thread 12 of pid 10");
    }

    #[test]
    fn durations_and_sizes() {
        assert_eq!(duration(1_500_000_000), "1.5 s");
        assert_eq!(duration(450_000_000), "450 ms");
        assert_eq!(duration(125_000_000_000), "2 min 05 s");
        assert_eq!(bytes(512 << 20), "512 MiB");
        assert_eq!(bytes(1536 << 20), "1.5 GiB");
    }
}
