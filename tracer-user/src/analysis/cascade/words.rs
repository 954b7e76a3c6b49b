//! Cascades in words: how a death ended as a clause, the links written
//! into the ranked certificates (ids assigned) and the `then:` line under
//! the verdict.
use std::collections::BTreeMap;

use super::{key, via_phrase, Link};
use crate::{
    analysis::{
        types::*,
        wording::{self as w, proc_phrase},
    },
    eventlog::{ExitStatus, ProcKey},
};

/// A `then:` line names this many consequences, then counts the rest.
const THEN_MAX: usize = 4;

/// How a death ended, as a clause after the process's name: "was killed by
/// SIGKILL from `pkill -f x` (pid 7)", "exited with code 1".
pub fn fate(c: &Certificate) -> String {
    let sig = || {
        c.cause.signal.as_ref().map_or_else(
            || match &c.victim.status {
                ExitStatus::Signaled { name, .. } => name.clone(),
                ExitStatus::Exited { .. } => "a signal".into(),
            },
            |s| s.sig_name.clone(),
        )
    };
    let from = c
        .killer
        .as_ref()
        .map(|k| format!(" from {}", proc_phrase(&k.process)))
        .unwrap_or_default();
    match (c.cause.kind, c.cause.handled_then_exited) {
        (_, Some(code)) if c.killer.is_some() => {
            format!("exited with code {code} after catching {}{from}", sig())
        }
        (CauseKind::KilledInRun | CauseKind::KilledOutsideRun | CauseKind::Tracer, _) => {
            format!("was killed by {}{from}", sig())
        }
        (CauseKind::SelfInflicted, _) => format!("killed itself with {}", sig()),
        (CauseKind::OwnGroupKill, _) => format!("was killed by {} from its own group kill", sig()),
        (CauseKind::Oom, _) => "was killed by the kernel OOM killer".into(),
        (CauseKind::Fault | CauseKind::Seccomp, _) => format!("crashed with {}", sig()),
        (CauseKind::TerminalInterrupt, _) => format!("was {}", c.cause.summary),
        (CauseKind::OwnTimer, _) => format!("was killed by {} when its own timer fired", sig()),
        (CauseKind::PidNamespaceTeardown, _) => {
            "was killed by SIGKILL when its pid namespace's init ended".into()
        }
        (CauseKind::Sigpipe, _) => {
            let reader = c
                .cause
                .mechanism
                .as_ref()
                .and_then(|m| m.process.as_ref())
                .map(|r| format!(" when its pipe's reader {} was gone", proc_phrase(r)))
                .unwrap_or_default();
            match &c.victim.status {
                ExitStatus::Exited { code } => {
                    format!("exited with code {code} on a write to its pipe (EPIPE){reader}")
                }
                ExitStatus::Signaled { .. } => format!("was killed by SIGPIPE{reader}"),
            }
        }
        _ => match &c.victim.status {
            ExitStatus::Exited { .. } => w::status_phrase(&c.victim.status),
            ExitStatus::Signaled { .. } => format!("was killed by {}", sig()),
        },
    }
}

/// The short form of a death for a `then:` line: "exited 1", "was killed
/// by SIGPIPE".
fn short_fate(c: &Certificate) -> String {
    if c.cause.kind == CauseKind::PidNamespaceTeardown {
        return "went down with its pid namespace".into();
    }
    match &c.victim.status {
        ExitStatus::Exited { code } => format!("exited {code}"),
        ExitStatus::Signaled { name, .. } => format!("was killed by {name}"),
    }
}

/// Writes the links into the ranked certificates (ids assigned): each
/// consequence's `consequence_of`, headline, summary and rank reason, and
/// each root's `consequences`.
pub(crate) fn word(certs: &mut [Certificate], links: &BTreeMap<ProcKey, Link>) {
    let n = certs.len();
    let idx: BTreeMap<ProcKey, usize> =
        certs.iter().enumerate().map(|(i, c)| (key(c), i)).collect();
    let of: Vec<Option<(usize, &Link)>> = certs
        .iter()
        .map(|c| {
            let l = links.get(&key(c))?;
            Some((*idx.get(&l.cause)?, l))
        })
        .collect();
    // Up the links to the first certificate not ranked a consequence;
    // bounded by the number of certificates (causes die first: no cycle).
    let root_of = |i: usize| {
        let (mut j, _) = of[i]?;
        for _ in 0..n {
            match (certs[j].rank, of[j]) {
                (Rank::Consequence, Some((k, _))) => j = k,
                _ => break,
            }
        }
        Some(j)
    };
    let roots: Vec<Option<usize>> = (0..n).map(root_of).collect();
    let words: Vec<Option<(Consequence, String, String)>> = (0..n)
        .map(|i| {
            let (j, l) = of[i]?;
            let r = roots[i]?;
            Some(words_for(certs, i, j, r, l))
        })
        .collect();
    for (i, wd) in words.into_iter().enumerate() {
        let Some((link, summary, reason)) = wd else {
            continue;
        };
        let c = &mut certs[i];
        c.headline = format!("{} {summary}", proc_phrase(&c.victim.process));
        c.cause.summary = summary;
        c.rank_reason = reason;
        c.consequence_of = Some(link);
    }
    let mut chains: Vec<(usize, u64, usize)> = (0..n)
        .filter_map(|i| Some((roots[i]?, certs[i].victim.end_seq, certs[i].id)))
        .collect();
    chains.sort_unstable();
    for (r, _, id) in chains {
        certs[r].consequences.push(id);
    }
}

/// The link of certificate `i` to `j` (root `r`) in words: the
/// `consequence_of` object, the new summary, the rank reason.
fn words_for(
    certs: &[Certificate],
    i: usize,
    j: usize,
    r: usize,
    l: &Link,
) -> (Consequence, String, String) {
    let (v, c, root) = (&certs[i], &certs[j], &certs[r]);
    let after_root = if r == j {
        String::new()
    } else {
        format!(
            " (#{}), after {} {}",
            c.id,
            proc_phrase(&root.victim.process),
            fate(root)
        )
    };
    let see = format!("(see #{})", root.id);
    let summary = match l.via {
        LinkVia::Child | LinkVia::Descendant if v.cause.kind == CauseKind::SelfInflicted => {
            let call = v
                .killer
                .as_ref()
                .map(|k| format!(" via {}", k.call))
                .unwrap_or_default();
            format!(
                "{} that it raised on itself{call}, passing on the death of {} {}, which {}{after_root} {see}",
                w::status_phrase(&v.victim.status),
                via_phrase(l.via),
                proc_phrase(&c.victim.process),
                fate(c)
            )
        }
        LinkVia::Child | LinkVia::Descendant => format!(
            "{} because {} {} {}{after_root} {see}",
            w::status_phrase(&v.victim.status),
            via_phrase(l.via),
            proc_phrase(&c.victim.process),
            fate(c)
        ),
        // The mechanism's own sentence names the reader or the init.
        LinkVia::PipeReader | LinkVia::NamespaceInit => {
            format!("{}{after_root} {see}", v.cause.summary)
        }
    };
    let reason = if v.rank == Rank::Consequence {
        format!("follows from the death of #{}: {}", c.id, l.detail)
    } else {
        format!(
            "follows from #{}, an expected death, so it is reported in its own right: {}",
            c.id, l.detail
        )
    };
    (
        Consequence {
            of: c.id,
            root: root.id,
            via: l.via,
            evidence: l.evidence,
            detail: l.detail.clone(),
        },
        summary,
        reason,
    )
}

/// "then: `bash -c …` (pid 7) exited 137 → `npx vitest` (pid 5) exited 1":
/// the deaths that followed from `root`, in order, on one line; `None` when
/// none did.
pub fn then_line(certs: &[Certificate], root: &Certificate) -> Option<String> {
    if root.consequences.is_empty() {
        return None;
    }
    let by_id = |id: usize| certs.iter().find(|c| c.id == id);
    let mut line = String::from("then: ");
    let mut prev = root.id;
    for (k, &id) in root.consequences.iter().enumerate() {
        if k == THEN_MAX {
            let rest = root.consequences.len() - THEN_MAX;
            line.push_str(&format!(
                "; and {} (see report.json)",
                w::plural(rest, "more", "more")
            ));
            break;
        }
        let Some(c) = by_id(id) else { continue };
        if k > 0 {
            let chained = c.consequence_of.as_ref().is_some_and(|l| l.of == prev);
            line.push_str(if chained { " → " } else { "; " });
        }
        line.push_str(&format!(
            "{} {} (#{id})",
            proc_phrase(&c.victim.process),
            short_fate(c)
        ));
        prev = id;
    }
    Some(line)
}
