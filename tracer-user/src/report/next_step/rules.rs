//! The kill classes: pids a process never spawned, a `pkill -f` pattern,
//! a kill of the caller's own process group. Each reads the certificates'
//! killers and calls (and the near misses), never the log.
use super::{list, seen_from_killer, spawned_by_sender, target_phrase, Advice, NextStep};
use crate::{
    analysis::{wording as w, Analysis, CauseKind, Certificate, ForeignSignal, ProcRef},
    text::markdown::code,
};

/// The same process: pid and start.
fn same(a: &ProcRef, b: &ProcRef) -> bool {
    a.pid == b.pid && a.start == b.start
}

/// Calls that name a pid (or group) by number; a pidfd is a handle to a
/// process the caller holds, never a number it made up.
fn names_a_pid(syscall: Option<&str>, arg: i64) -> bool {
    syscall.is_some_and(|s| s != "pidfd_send_signal") && arg.unsigned_abs() > 1
}

/// `sender` signalled pids it never spawned: a kill that reached a
/// process not its descendant (a certificate, or a kill outside the run)
/// and a call that found no process at all (a near miss, ESRCH). Either
/// alone could be a pid read from a process it knows; both together say
/// its pids came from nowhere it holds.
pub(super) fn unspawned(
    a: &Analysis,
    certs: &[&Certificate],
    sender: &ProcRef,
) -> Option<NextStep> {
    let mut evidence = Vec::new();
    let mut missing: Vec<i64> = Vec::new();
    for n in &a.near_misses {
        let from_sender = a.entry(n.sender_id).is_some_and(|p| same(p, sender));
        if from_sender
            && n.errno.as_deref() == Some("ESRCH")
            && !n.probe
            && names_a_pid(Some(&n.syscall), n.target_arg)
        {
            evidence.push(n.seq);
            if !missing.contains(&n.target_arg) {
                missing.push(n.target_arg);
            }
        }
    }
    if missing.is_empty() {
        return None;
    }
    let mut hit: Vec<i64> = Vec::new();
    let mut hits: Vec<String> = Vec::new();
    let mut certificates = Vec::new();
    let mut test = None;
    for c in certs {
        let Some(k) = c.killer.as_ref().filter(|k| same(&k.process, sender)) else {
            continue;
        };
        let Some(arg) = k.target_arg else { continue };
        if spawned_by_sender(k.relation) || !names_a_pid(k.syscall.as_deref(), arg) {
            continue;
        }
        certificates.push(c.id);
        evidence.extend(c.cause.signal.as_ref().map(|s| s.seq));
        test = test.or(k.test.as_ref());
        if !hit.contains(&arg) {
            hit.push(arg);
            hits.push(format!(
                "{} ({})",
                target_phrase(arg),
                seen_from_killer(k.relation)
            ));
        }
    }
    for f in &a.foreign_signals {
        if f.outbound_kill && same(&f.sender, sender) {
            evidence.push(f.signal.seq);
            let arg = i64::from(f.target.pid);
            if !hit.contains(&arg) {
                hit.push(arg);
                hits.push(format!("{} (outside the run)", target_phrase(arg)));
            }
        }
    }
    if hit.is_empty() {
        return None;
    }
    evidence.sort_unstable();
    evidence.dedup();
    let gone: Vec<String> = missing.iter().map(|&t| target_phrase(t)).collect();
    let in_test = test
        .map(|t| format!(", in {},", t.phrase()))
        .unwrap_or_default();
    let line = format!(
        "{}{in_test} signals pids it never spawned: it killed {}; {} did not exist — mock the kill, or signal only pids you spawned",
        w::proc_phrase(sender),
        list(&hits, 3),
        list(&gone, 3),
    );
    Some(NextStep {
        line,
        advice: Advice::UnspawnedPids {
            sender: sender.clone(),
            hit,
            missing,
            certificates,
            evidence,
        },
    })
}

/// `pkill`'s full-command-line match (`-f`, `--full`, or a flag cluster
/// holding `f`), neither exact (`-x`) nor anchored at the start (`^…`),
/// and its pattern (the last argument), when its argv says so.
pub(super) fn pkill_pattern(argv: &[String]) -> Option<&str> {
    let prog = argv.first()?;
    if prog.rsplit('/').next() != Some("pkill") || argv.len() < 3 {
        return None;
    }
    let pattern = argv.last()?;
    let flags = &argv[1..argv.len() - 1];
    let cluster = |a: &str, c: char| {
        a.strip_prefix('-').is_some_and(|f| {
            !f.starts_with('-')
                && !f.is_empty()
                && f.chars().all(|x| x.is_ascii_alphabetic())
                && f.contains(c)
        })
    };
    let full = flags.iter().any(|a| a == "--full" || cluster(a, 'f'));
    let exact = flags.iter().any(|a| a == "--exact" || cluster(a, 'x'));
    // An anchored pattern (`^name`) matched what it was written for, as
    // far as the argv tells: "anchor the pattern" would be no advice.
    let anchored = pattern.starts_with('^');
    (full && !exact && !anchored && !pattern.starts_with('-')).then_some(pattern.as_str())
}

/// An unexpected death by `pkill -f PATTERN`, aimed at the victim's pid,
/// whose pattern (a regex) matches the victim's command line: pkill
/// signals exactly the processes its pattern matches, so this one was
/// matched, whatever the pattern was written for.
pub(super) fn pkill(certs: &[&Certificate], c: &Certificate) -> Option<NextStep> {
    let k = c.killer.as_ref()?;
    if k.process.argv_inherited || k.target_arg != Some(i64::from(c.victim.process.pid)) {
        return None;
    }
    let pattern = pkill_pattern(&k.process.argv)?;
    let re = regex::Regex::new(pattern).ok()?;
    let matched = |c: &Certificate| {
        let argv = &c.victim.process.argv;
        !argv.is_empty() && re.is_match(&argv.join(" "))
    };
    if !matched(c) {
        return None;
    }
    let by_it: Vec<&&Certificate> = certs
        .iter()
        .filter(|d| {
            d.killer
                .as_ref()
                .is_some_and(|dk| same(&dk.process, &k.process))
                && matched(d)
        })
        .collect();
    let named: Vec<String> = by_it
        .iter()
        .map(|d| {
            let rel = d
                .killer
                .as_ref()
                .map_or("", |k| seen_from_killer(k.relation));
            format!("{}, {rel}", w::proc_phrase(&d.victim.process))
        })
        .collect();
    let certificates = by_it.iter().map(|d| d.id).collect();
    let evidence = by_it
        .iter()
        .filter_map(|d| d.killer.as_ref().and_then(|k| k.call_seq))
        .collect();
    let step = pkill_step(&k.process, "killed", &list(&named, 2), named.len(), pattern);
    Some(step(certificates, evidence))
}

/// `pkill -f PATTERN` in the run signalled a process outside it (the
/// tracer itself, a CI runner): pkill signals only what its pattern
/// matches, so that command line matched. A target whose command line
/// the log has must match the pattern too.
pub(super) fn pkill_outbound(a: &Analysis, f: &ForeignSignal) -> Option<NextStep> {
    if f.sender.argv_inherited {
        return None;
    }
    let pattern = pkill_pattern(&f.sender.argv)?;
    let re = regex::Regex::new(pattern).ok()?;
    let mut named = Vec::new();
    let mut evidence = Vec::new();
    for g in &a.foreign_signals {
        let argv = &g.target.argv;
        if !(g.outbound_kill && same(&g.sender, &f.sender)) {
            continue;
        }
        if !argv.is_empty() && !re.is_match(&argv.join(" ")) {
            return None;
        }
        evidence.push(g.signal.seq);
        named.push(w::proc_phrase(&g.target));
    }
    let whom = format!("{}, outside the run", list(&named, 2));
    let step = pkill_step(&f.sender, "signalled", &whom, named.len(), pattern);
    Some(step(Vec::new(), evidence))
}

/// The line for `pkill` having `verb` (killed, signalled) `whom` (`n`
/// processes), and the advice once its evidence is given.
fn pkill_step<'a>(
    pkill: &'a ProcRef,
    verb: &str,
    whom: &str,
    n: usize,
    pattern: &'a str,
) -> impl FnOnce(Vec<usize>, Vec<u64>) -> NextStep + 'a {
    let these = if n == 1 {
        "that command line"
    } else {
        "those command lines"
    };
    let line = format!(
        "{} {verb} {whom}: its pattern {} matched {these} — anchor the pattern, or kill by pid",
        w::proc_phrase(pkill),
        code(pattern),
    );
    move |certificates, evidence| NextStep {
        line,
        advice: Advice::PkillPattern {
            pkill: pkill.clone(),
            pattern: pattern.to_string(),
            certificates,
            evidence,
        },
    }
}

/// An unexpected death by a kill of the caller's own process group: the
/// caller's own death of it (a non-shell caller: a shell's `kill 0` is its
/// cleanup, ranked expected), or a kill(0, …), which names the caller's
/// group whoever receives it.
pub(super) fn own_group(certs: &[&Certificate], c: &Certificate) -> Option<NextStep> {
    let k = c.killer.as_ref()?;
    let own = c.cause.kind == CauseKind::OwnGroupKill
        || (k.syscall.as_deref() == Some("kill") && k.target_arg == Some(0));
    if !own {
        return None;
    }
    let call_seq = k.call_seq?;
    let by_it: Vec<&&Certificate> = certs
        .iter()
        .filter(|d| d.killer.as_ref().and_then(|k| k.call_seq) == Some(call_seq))
        .collect();
    let others: Vec<String> = by_it
        .iter()
        .filter(|d| !same(&d.victim.process, &k.process))
        .map(|d| w::proc_phrase(&d.victim.process))
        .collect();
    let with = if others.is_empty() {
        "itself".to_string()
    } else {
        list(&others, 2)
    };
    let line = format!(
        "{} signalled its own process group with {}, which killed {with} — start what it means to stop in a process group of its own (setsid, or `set -m` in a script) and signal that group, or kill by pid",
        w::proc_phrase(&k.process),
        k.call,
    );
    Some(NextStep {
        line,
        advice: Advice::OwnGroupKill {
            sender: k.process.clone(),
            call: k.call.clone(),
            certificates: by_it.iter().map(|d| d.id).collect(),
            evidence: vec![call_seq],
        },
    })
}
