//! The verdict: the first line of every report.
use super::facts::LogFacts;
use crate::analysis::{
    cascade, wording as w, Analysis, Certificate, ForeignSignal, Leftover, Rank,
};

/// The first line of every report. Names at most two causes: the rest is a
/// scroll away. Never claims "no unexpected deaths" on lossy data unqualified.
pub fn verdict(a: &Analysis, log: &LogFacts) -> String {
    let list = |rank: Rank| {
        let all = mentions(a.certificates.iter().filter(|c| c.rank == rank));
        let mut items: Vec<String> = all.iter().take(2).cloned().collect();
        if all.len() > 2 {
            items.push(format!("and {} more", all.len() - 2));
        }
        items.join("; ")
    };
    let mut v = if a.counts.unexpected > 0 {
        let n = a.counts.unexpected;
        format!(
            "{}: {}",
            w::plural(n, "unexpected death", "unexpected deaths"),
            list(Rank::Unexpected)
        )
    } else if a.counts.nonzero_exit > 0 {
        let n = a.counts.nonzero_exit;
        format!(
            "No unexpected deaths; {}: {}",
            w::plural(n, "non-zero exit", "non-zero exits"),
            list(Rank::NonzeroExit)
        )
    } else {
        "No unexpected deaths.".to_string()
    };
    if let Some(leaks) = leaked_phrase(&a.leftovers) {
        v = format!("{}. Leaked: {leaks}", v.trim_end_matches('.'));
    }
    if log.truncated || log.lost_total > 0 {
        let why = if log.truncated {
            "the log is truncated".to_string()
        } else if log.lost_total == log.lines_skipped {
            skipped_lines(log.lines_skipped)
        } else {
            w::plural(
                log.lost_total as usize,
                "event was lost",
                "events were lost",
            )
        };
        v = format!(
            "{} (incomplete: {why}, so deaths may be missing)",
            v.trim_end_matches('.')
        );
    }
    v
}

/// The verdict's first clause when the run sent a killing signal to a
/// process outside it (a fabricated pid that was someone else's, a
/// `kill -9 $pid` of a stranger, a `pkill -f` matching the tracer): what a
/// shared runner most needs to know comes before everything else.
pub(super) fn outbound_clause(a: &Analysis) -> Option<String> {
    let out: Vec<&ForeignSignal> = a
        .foreign_signals
        .iter()
        .filter(|f| f.outbound_kill)
        .collect();
    let f = out.first()?;
    let target = if f.target_is_tracer {
        format!("the tracer (pid {})", f.target.pid)
    } else {
        w::proc_phrase(&f.target)
    };
    let via = f
        .call
        .as_ref()
        .map(|c| format!(", via {c}"))
        .unwrap_or_default();
    let more = match out.len() {
        1 => String::new(),
        n => format!(
            " (and {} outside the run)",
            w::plural(n - 1, "more such signal", "more such signals")
        ),
    };
    let tracer = if f.target_is_tracer {
        ": no CI cancellation, the run stopped itself through the tracer"
    } else {
        ""
    };
    Some(format!(
        "{} in the run sent {} to {target}, outside the run{via}{more}{tracer}",
        w::proc_phrase(&f.sender),
        f.signal.sig_name
    ))
}

/// The rank the verdict leads with: unexpected deaths, else non-zero exits.
fn leading(a: &Analysis) -> Option<Rank> {
    if a.counts.unexpected > 0 {
        Some(Rank::Unexpected)
    } else if a.counts.nonzero_exit > 0 {
        Some(Rank::NonzeroExit)
    } else {
        None
    }
}

/// The chains started by the deaths the verdict leads with, one `then:`
/// line each (at most two, as the verdict names at most two causes): said
/// right under the verdict in report.md and the stderr summary.
pub(super) fn then_lines(a: &Analysis) -> Vec<String> {
    let Some(rank) = leading(a) else {
        return Vec::new();
    };
    let roots: Vec<&Certificate> = a
        .certificates
        .iter()
        .filter(|c| c.rank == rank && !c.consequences.is_empty())
        .take(2)
        .collect();
    let several = roots.len() > 1;
    roots
        .into_iter()
        .filter_map(|c| {
            let line = cascade::then_line(&a.certificates, c)?;
            Some(if several {
                format!("#{} {line}", c.id)
            } else {
                line
            })
        })
        .collect()
}

/// The verdict's leak clause. `leak` records say exactly which processes
/// outlived the command; a log without them only shows orphans with no end.
fn leaked_phrase(leftovers: &[Leftover]) -> Option<String> {
    let recorded: Vec<&Leftover> = leftovers.iter().filter(|l| l.leak.is_some()).collect();
    let inferred: Vec<&Leftover> = leftovers.iter().filter(|l| l.orphaned).collect();
    let (list, recorded) = if recorded.is_empty() {
        (inferred, false)
    } else {
        (recorded, true)
    };
    let first = list.first()?;
    let more = match list.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    if !recorded {
        return Some(format!(
            "{}{more} outlived its parent and was still running when the log ended.",
            w::proc_phrase(&first.process)
        ));
    }
    let mut facts = String::new();
    if first.leak.as_ref().is_some_and(|l| l.detached) {
        facts.push_str(", detached via setsid");
    }
    if let Some(by) = &first.spawned_by {
        facts.push_str(&format!(", spawned by {}", w::proc_phrase(by)));
    }
    let verb = if list.len() == 1 { "was" } else { "were" };
    let sep = if facts.is_empty() { "" } else { "," };
    Some(format!(
        "{}{facts}{sep}{more} {verb} still running when the command exited.",
        w::proc_phrase(&first.process)
    ))
}

/// What killed several processes at once: one call (a group kill, several
/// deliveries), or one OOM group kill of a `memory.oom.group` cgroup.
#[derive(Clone, Copy, PartialEq)]
enum OneKill {
    Call(u64),
    OomGroup(u64),
}

/// One mention per cause: the victims of one group kill (one call, several
/// deliveries; one OOM group kill) are named together, led by the process
/// the call aimed at.
fn mentions<'a>(certs: impl Iterator<Item = &'a Certificate>) -> Vec<String> {
    let mut groups: Vec<(Option<OneKill>, Vec<&Certificate>)> = Vec::new();
    for c in certs {
        let call = c
            .killer
            .as_ref()
            .filter(|k| k.deliveries.unwrap_or(0) > 1)
            .and_then(|k| k.call_seq)
            .map(OneKill::Call)
            .or_else(|| {
                let group = c.oom.as_ref().and_then(|o| o.group.as_ref());
                group.map(|g| OneKill::OomGroup(g.seq))
            });
        match groups.iter_mut().find(|g| call.is_some() && g.0 == call) {
            Some(g) => g.1.push(c),
            None => groups.push((call, vec![c])),
        }
    }
    groups
        .into_iter()
        .map(|(kill, cs)| {
            let same = match kill {
                Some(OneKill::OomGroup(_)) => "the same OOM group kill",
                _ => "the same call",
            };
            let aimed = |c: &&&Certificate| {
                let arg = c
                    .killer
                    .as_ref()
                    .and_then(|k| k.target_arg)
                    .map(i64::unsigned_abs);
                arg == Some(u64::from(c.victim.process.pid))
            };
            let rep = cs.iter().find(aimed).unwrap_or(&cs[0]);
            let others: Vec<String> = cs
                .iter()
                .filter(|c| c.id != rep.id)
                .map(|c| c.victim.process.pid.to_string())
                .collect();
            match others.len() {
                0 => rep.headline.clone(),
                1 => format!("{} ({same} also killed pid {})", rep.headline, others[0]),
                _ => format!(
                    "{} ({same} also killed pids {})",
                    rep.headline,
                    others.join(", ")
                ),
            }
        })
        .collect()
}

/// "1 line over the 64 MiB line limit skipped", as the loss line says it.
pub(crate) fn skipped_lines(n: u64) -> String {
    format!(
        "{} over the {} MiB line limit skipped",
        w::plural(n as usize, "line", "lines"),
        crate::eventlog::MAX_LINE_BYTES >> 20
    )
}
