//! Cascades: a death that follows from the abnormal death of a process the
//! victim was waiting on — the shell that exits 137 after its child was
//! SIGKILLed, the Python parent whose pool broke, `make` exiting 2 after a
//! recipe died, the wrapper (`sh -c`, npx, unshare) passing a status on, the
//! writer whose pipe's reader died. Such a certificate points back to the
//! death that started the chain (`consequence_of`), ranks `consequence`
//! when that chain's first failure is reported on its own, and is not
//! counted again. Rules stated in docs/report.md ("Cascades").
//!
//! Two steps, as certificate ids exist only after ranking: [`link`] finds
//! the links and sets the ranks; [`word`] writes ids and sentences.
use std::collections::BTreeMap;

mod words;
pub(crate) use words::word;
pub use words::{fate, then_line};

use super::{types::*, wording as w, Ctx};
use crate::eventlog::{ExitStatus, ProcKey};

/// A non-zero exit this soon after the death of a process it waited on is
/// that death's doing, whatever the exit code: a runner that reports a lost
/// worker and exits 1, a wrapper passing a status on. Stated in
/// docs/report.md.
pub const CASCADE_WINDOW_NS: u64 = 5_000_000_000;
/// Processes one certificate's search below it visits at most: the walk
/// goes through processes still running (a fork server), so a fork-bomb
/// log cannot make it quadratic.
const MAX_WALK: usize = 4096;
/// A runtime's words for a worker that vanished under it (Python's
/// `BrokenProcessPool: A process in the process pool was terminated
/// abruptly`, tinypool's `Worker exited unexpectedly`), lower case. Node's
/// `ERR_IPC_CHANNEL_CLOSED` is what vitest 3.2's forks pool prints when a
/// worker is SIGKILLed mid-file (tinypool's send to it fails: "Error:
/// Channel closed"), seen on every run of tests/kernel/runners/vitest.rs;
/// without it vitest's exit was tied to the kill only by the 5 s window,
/// which a suite with more files after the kill outlasts. pytest-xdist's
/// `worker 'gw0' crashed while running 'test_x.py::test_y'` goes to stdout:
/// it counts when the job's log is one file for both (as in
/// tests/kernel/runners/pytest.rs).
const LOST_WORKER: [&str; 7] = [
    "brokenprocesspool",
    "terminated abruptly",
    "exited unexpectedly",
    "died unexpectedly",
    "worker exited",
    "err_ipc_channel_closed",
    "crashed while running",
];
/// A quoted line of last words in a link's detail is cut to this.
const QUOTE_MAX: usize = 100;

/// A link found by [`link`], before certificates have ids.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Link {
    /// The victim of the death it follows from.
    pub(crate) cause: ProcKey,
    via: LinkVia,
    evidence: LinkEvidence,
    detail: String,
}

fn key(c: &Certificate) -> ProcKey {
    ProcKey {
        pid: c.victim.process.pid,
        start: c.victim.process.start,
    }
}

/// What [`link`] reads of a death: built from its certificate, which a
/// folded death then lets go (analysis/fold.rs). About 100 bytes; the last
/// words only for a non-zero exit with children, the one kind whose link
/// quotes them.
#[derive(Clone, Debug)]
pub(crate) struct LinkView {
    pub key: ProcKey,
    ns_pid: Option<u32>,
    /// Set to `consequence` by [`link`].
    pub rank: Rank,
    pub end_seq: u64,
    pub end_t: u64,
    status: ExitStatus,
    kind: CauseKind,
    mechanism: Option<(MechanismKind, Option<ProcKey>)>,
    killer: Option<ProcKey>,
    last_words: Option<String>,
}

impl LinkView {
    pub(crate) fn of(cx: &Ctx, c: &Certificate) -> Self {
        let k = key(c);
        let pkey = |p: &ProcRef| ProcKey {
            pid: p.pid,
            start: p.start,
        };
        // Only `waited_on` quotes last words, and only the victim's: a
        // non-zero exit that had children to wait on.
        let quoted = c.cause.kind == CauseKind::NonzeroExit
            && c.rank == Rank::NonzeroExit
            && cx.m.proc(k).is_some_and(|p| !p.children.is_empty());
        LinkView {
            key: k,
            ns_pid: c.victim.process.ns_pid.map(|n| n.pid),
            rank: c.rank,
            end_seq: c.victim.end_seq,
            end_t: c.victim.end_t,
            status: c.victim.status.clone(),
            kind: c.cause.kind,
            mechanism: c
                .cause
                .mechanism
                .as_ref()
                .map(|m| (m.kind, m.process.as_ref().map(pkey))),
            killer: c.killer.as_ref().map(|k| pkey(&k.process)),
            last_words: c
                .last_words
                .as_ref()
                .filter(|_| quoted)
                .map(|l| l.text.clone()),
        }
    }
}

/// The keys of the deaths a link ties (each consequence and its cause):
/// their certificates are shown whole, never folded.
pub(crate) fn linked(links: &BTreeMap<ProcKey, Link>) -> std::collections::BTreeSet<ProcKey> {
    links.iter().flat_map(|(&v, l)| [v, l.cause]).collect()
}

/// A failure reported in its own right: what a chain's consequences are
/// not counted beside.
fn is_failure(r: Rank) -> bool {
    matches!(r, Rank::Unexpected | Rank::NonzeroExit | Rank::Consequence)
}

/// Finds every consequence among `certs` (not yet sorted, no ids) and
/// ranks it `consequence` when its chain starts at a failure; returns the
/// links by victim.
pub(crate) fn link(cx: &Ctx, certs: &mut [LinkView]) -> BTreeMap<ProcKey, Link> {
    let by_key: BTreeMap<ProcKey, usize> =
        certs.iter().enumerate().map(|(i, c)| (c.key, i)).collect();
    // Causes die first: deciding in order of death settles each cause's
    // own chain before its consequences are looked at.
    let mut order: Vec<usize> = (0..certs.len()).collect();
    order.sort_by_key(|&i| (certs[i].end_seq, i));
    // The rank a chain is reported under, per certificate: a chain whose
    // first death was expected (the SIGPIPE of `producer | head` under
    // `set -o pipefail`) is reported from its first failure on.
    let mut chain_rank: Vec<Rank> = certs.iter().map(|c| c.rank).collect();
    let mut links = BTreeMap::new();
    for i in order {
        let c = &certs[i];
        let found = match (c.kind, c.mechanism.map(|m| m.0)) {
            (CauseKind::NonzeroExit, _) if c.rank == Rank::NonzeroExit => {
                waited_on(cx, certs, &by_key, i)
            }
            // A wrapper (timeout(1), sudo, strace) passing on its child's
            // fatal signal by raising it on itself.
            (CauseKind::SelfInflicted, _) => waited_on(cx, certs, &by_key, i),
            (CauseKind::Sigpipe, Some(MechanismKind::PipeReaderGone)) => {
                pipe_reader(certs, &by_key, i)
            }
            (_, Some(MechanismKind::PidNamespaceTeardown)) => namespace_init(certs, &by_key, i),
            _ => None,
        };
        let Some((j, l)) = found else { continue };
        if is_failure(chain_rank[j]) {
            chain_rank[i] = chain_rank[j];
            certs[i].rank = Rank::Consequence;
        }
        links.insert(certs[i].key, l);
    }
    links
}

/// The child (or a fork server's worker) whose death a non-zero exit
/// follows from: the last of them to fail before the victim exited — a
/// child that exited non-zero or died of a signal the victim did not send
/// itself (a pool's own shutdown of its other workers is no failure) —
/// when it has a certificate, the victim ran the same program from before
/// that death to its exit, and one piece of evidence ties the two.
fn waited_on(
    cx: &Ctx,
    certs: &[LinkView],
    by_key: &BTreeMap<ProcKey, usize>,
    i: usize,
) -> Option<(usize, Link)> {
    let v = &certs[i];
    let vk = v.key;
    let end_seq = v.end_seq;
    let killed_by_v = |k: &ProcKey| {
        by_key
            .get(k)
            .and_then(|&j| certs[j].killer)
            .is_some_and(|kr| kr == vk)
    };
    let mut stack: Vec<(ProcKey, bool)> =
        cx.m.proc(vk)?
            .children
            .iter()
            .rev()
            .map(|&k| (k, true))
            .collect();
    let mut last: Option<(u64, ProcKey, bool)> = None;
    let mut budget = MAX_WALK;
    while let Some((k, direct)) = stack.pop() {
        if budget == 0 {
            break;
        }
        budget -= 1;
        let Some(p) = cx.m.proc(k) else { continue };
        match &p.end {
            // It ended before the victim: a failure, or a success that
            // absorbed whatever happened below it.
            Some(e) if e.seq < end_seq => {
                let failed = !matches!(e.status, ExitStatus::Exited { code: 0 });
                if failed && !killed_by_v(&k) && last.is_none_or(|(s, ..)| e.seq > s) {
                    last = Some((e.seq, k, direct));
                }
            }
            // Still running when the victim exited: the processes it forked
            // may be the ones the victim waited on (a fork server's workers).
            _ => stack.extend(p.children.iter().rev().map(|&g| (g, false))),
        }
    }
    let (_, last_k, direct) = last?;
    let ck = match by_key.get(&last_k) {
        Some(_) => last_k,
        None => pipeline_stage(cx, by_key, (vk, end_seq), last_k, killed_by_v)?,
    };
    let j = *by_key.get(&ck)?;
    // The program that exited must be the one that waited: a shell that
    // exec'd its last command (`bash -c '…; grep -q x f'`) after the death
    // exits with that command's status, not the dead child's.
    let exec_after =
        cx.m.proc(vk)?
            .last_exec()
            .is_some_and(|e| e.t > certs[j].end_t);
    if exec_after {
        return None;
    }
    let via = if direct {
        LinkVia::Child
    } else {
        LinkVia::Descendant
    };
    let (evidence, detail) = match v.status {
        ExitStatus::Exited { code } => evidence(code, v, &certs[j], via)?,
        ExitStatus::Signaled { signal, .. } => reraised(signal, &certs[j], via)?,
    };
    Some((
        j,
        Link {
            cause: ck,
            via,
            evidence,
            detail,
        },
    ))
}

/// The last child of `vk` to fail had no certificate (a silent `grep -c`
/// exiting 1): when it ran beside a certified failure of another child —
/// the stages of one pipeline, `cat missing | grep -c x` under `set -o
/// pipefail`, forked before the other ended — that failure is the one the
/// shell's status comes from, the first failing stage. A child that
/// started after the certified one ended (`false_worker; grep -q x f`) is
/// the script going on: no link.
fn pipeline_stage(
    cx: &Ctx,
    by_key: &BTreeMap<ProcKey, usize>,
    (vk, end_seq): (ProcKey, u64),
    last: ProcKey,
    killed_by_v: impl Fn(&ProcKey) -> bool,
) -> Option<ProcKey> {
    let m = cx.m;
    let lp = m.proc(last)?;
    let started = lp.fork.as_ref()?.seq;
    m.proc(vk)?
        .children
        .iter()
        .filter(|&&k| k != last && by_key.contains_key(&k) && !killed_by_v(&k))
        .filter_map(|&k| Some((k, m.proc(k)?.end.as_ref()?)))
        .filter(|(_, e)| !matches!(e.status, ExitStatus::Exited { code: 0 }))
        .filter(|(_, e)| e.seq > started && e.seq < end_seq)
        .min_by_key(|(_, e)| e.seq)
        .map(|(k, _)| k)
}

/// What ties a non-zero exit `code` of `v` to the death of `c`: its exit
/// code (128+N after a death by N, or such a status passed on), its last
/// words naming the death, or the time between the two.
fn evidence(code: i32, v: &LinkView, c: &LinkView, via: LinkVia) -> Option<(LinkEvidence, String)> {
    let who = via_phrase(via);
    let shell_status = match &c.status {
        ExitStatus::Signaled { signal, .. } => 128 + signal,
        ExitStatus::Exited { code } => *code,
    };
    if code > 128 && code == shell_status {
        let detail = match &c.status {
            ExitStatus::Signaled { name, .. } => {
                format!(
                    "it exited {code} = 128+{name}, as a shell reports a child killed by {name}"
                )
            }
            ExitStatus::Exited { .. } => {
                format!("it exited {code}, the status {who} exited with")
            }
        };
        return Some((LinkEvidence::ExitCode, detail));
    }
    if let Some(line) = naming_line(v, c) {
        return Some((
            LinkEvidence::LastWords,
            format!(
                "its last words name that death: {}",
                crate::text::markdown::code(&line)
            ),
        ));
    }
    let gap = v.end_t.saturating_sub(c.end_t);
    (gap <= CASCADE_WINDOW_NS).then(|| {
        (
            LinkEvidence::Window,
            format!(
                "it exited {} after {who} died (within {})",
                w::duration(gap),
                w::duration(CASCADE_WINDOW_NS)
            ),
        )
    })
}

/// A wrapper that died of its own raise of `signal` after the process it
/// waited on died of that same signal: how `timeout(1)`, sudo, strace and
/// a C wrapper pass a child's death on (they reset the handler and raise
/// it on themselves, so their own parent sees the same wait status).
fn reraised(signal: i32, c: &LinkView, via: LinkVia) -> Option<(LinkEvidence, String)> {
    let ExitStatus::Signaled {
        signal: died_of,
        name,
        ..
    } = &c.status
    else {
        return None;
    };
    (*died_of == signal).then(|| {
        (
            LinkEvidence::ExitCode,
            format!(
                "it raised on itself the {name} {} died of: a wrapper passing its child's death on",
                via_phrase(via)
            ),
        )
    })
}

/// The last line of `v`'s last words that names `c`'s death: its pid, its
/// signal (name, number, or strsignal's words, as shells, make, xargs and
/// Go print it), its exit code, or a runtime's words for a lost worker.
fn naming_line(v: &LinkView, c: &LinkView) -> Option<String> {
    let lw = v.last_words.as_ref()?;
    let mut needles: Vec<String> = vec![c.key.pid.to_string()];
    needles.extend(c.ns_pid.map(|n| n.to_string()));
    match &c.status {
        ExitStatus::Signaled { signal, name, .. } => {
            needles.push(name.to_lowercase());
            needles.push(format!("signal {signal}"));
            needles.extend(tracer_common::signals::description(*signal).map(|d| d.to_lowercase()));
        }
        ExitStatus::Exited { code } => {
            for word in ["code", "code=", "status", "error"] {
                let sep = if word.ends_with('=') { "" } else { " " };
                needles.push(format!("{word}{sep}{code}"));
            }
        }
    }
    needles.extend(LOST_WORKER.iter().map(|s| s.to_string()));
    crate::text::display_text(lw)
        .lines()
        .rev()
        .find(|l| {
            let lower = l.to_lowercase();
            needles.iter().any(|n| has_word(&lower, n))
        })
        .map(|l| crate::text::one_line_cut(l.trim(), QUOTE_MAX))
}

/// `needle` occurs in `hay` not glued to a letter or digit on either side
/// (pid 42 is not in 4242; "killed" is not in "unkilled").
fn has_word(hay: &str, needle: &str) -> bool {
    let glued = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric());
    hay.match_indices(needle).any(|(at, _)| {
        let before = hay[..at].chars().next_back();
        let after = hay[at + needle.len()..].chars().next();
        let first = needle.chars().next();
        let last = needle.chars().next_back();
        let glued_before = glued(first) && glued(before);
        let glued_after = glued(last) && glued(after);
        !glued_before && !glued_after
    })
}

/// A SIGPIPE whose reader died: the reader's certificate is the cause.
fn pipe_reader(
    certs: &[LinkView],
    by_key: &BTreeMap<ProcKey, usize>,
    i: usize,
) -> Option<(usize, Link)> {
    let rk = certs[i].mechanism?.1?;
    let j = *by_key.get(&rk)?;
    if matches!(certs[j].status, ExitStatus::Exited { code: 0 }) {
        return None;
    }
    Some((
        j,
        Link {
            cause: rk,
            via: LinkVia::PipeReader,
            evidence: LinkEvidence::PipeReader,
            detail: "the reader of the pipe it wrote to had died first".into(),
        },
    ))
}

/// Killed when its pid namespace's init ended: the init's certificate, if
/// it has one, is the cause.
fn namespace_init(
    certs: &[LinkView],
    by_key: &BTreeMap<ProcKey, usize>,
    i: usize,
) -> Option<(usize, Link)> {
    let ik = certs[i].mechanism?.1?;
    let j = *by_key.get(&ik)?;
    Some((
        j,
        Link {
            cause: ik,
            via: LinkVia::NamespaceInit,
            evidence: LinkEvidence::PidNamespace,
            detail: "the kernel kills every process left in a pid namespace when its init ends"
                .into(),
        },
    ))
}

fn via_phrase(via: LinkVia) -> &'static str {
    match via {
        LinkVia::Child => "its child",
        LinkVia::Descendant => "its descendant",
        LinkVia::PipeReader => "its pipe's reader",
        LinkVia::NamespaceInit => "its pid namespace's init",
    }
}

#[cfg(test)]
mod tests {
    use super::has_word;

    #[test]
    fn a_word_is_not_part_of_a_longer_one() {
        assert!(has_word("bash: line 1: 31338 killed  sleep 30", "31338"));
        assert!(!has_word("pid 431338 exited", "31338"));
        assert!(has_word("xargs: sh: terminated by signal 9", "signal 9"));
        assert!(!has_word("got signal 90", "signal 9"));
        assert!(has_word("make: *** [makefile:2: a] error 2", "error 2"));
        assert!(!has_word("error 21", "error 2"));
        assert!(has_word("worker died: code=1, signal=null", "code=1"));
        assert!(has_word(
            "serialized error: { code: 'err_ipc_channel_closed' }",
            "err_ipc_channel_closed"
        ));
        assert!(has_word(
            "failed t.py::test_a - worker 'gw1' crashed while running 't.py::test_a'",
            "crashed while running"
        ));
    }
}
