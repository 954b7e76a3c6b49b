//! Quiet helpers (issue 40, item 3): a short-lived process that exited
//! non-zero having said its words only to /dev/null, while the process
//! that started it carried on — `sh -c "tput el </dev/tty" 2>/dev/null`
//! under GNU parallel (Perl's backticks run it through an outer `sh -c`,
//! which forks the inner one and passes its 2 on), a version manager's
//! lookup that fails before its shim runs the real program. Its author
//! threw its words away and went on: the failure is routine. It keeps its
//! certificate and its rank (a non-zero exit), but it is ranked after the
//! other non-zero exits and the verdict counts it instead of naming it
//! (report/verdict.rs). Stated in docs/report.md ("Quiet helpers").
use std::collections::BTreeMap;

use super::{
    cascade::{Link, LinkView},
    Certificate, Ctx, WORKER_LIFETIME_NS,
};
use crate::eventlog::{ExitStatus, ProcKey};

/// Processes of a helper's tree looked at: a helper is small, and a tree
/// larger than this is a job, not a helper.
const MAX_TREE: usize = 64;

/// The last death of each chain, by the chain's first (its root): a
/// helper's own subshell failing makes the helper and the subshell that
/// ran it fail too (`v=$(version-name 2>/dev/null)` in a shim: three
/// deaths, one story), and it is the last of them whose parent carried on.
pub(crate) fn chain_tops(
    links: &BTreeMap<ProcKey, Link>,
    views: &[LinkView],
) -> BTreeMap<ProcKey, ProcKey> {
    let end: BTreeMap<ProcKey, u64> = views.iter().map(|v| (v.key, v.end_seq)).collect();
    let mut tops: BTreeMap<ProcKey, ProcKey> = BTreeMap::new();
    for &victim in links.keys() {
        // Up the links to the chain's root (a link names an earlier death,
        // so the walk ends; bounded all the same).
        let mut root = victim;
        for _ in 0..links.len() {
            match links.get(&root) {
                Some(l) => root = l.cause,
                None => break,
            }
        }
        let later = |k: &ProcKey| end.get(k).copied().unwrap_or(0);
        let top = tops.entry(root).or_insert(root);
        if later(&victim) > later(top) {
            *top = victim;
        }
    }
    tops
}

/// Says so on its certificate: the reason its rank has, and why the
/// verdict counts it instead of naming it.
pub(crate) fn mark(c: &mut Certificate) {
    c.quiet_helper = true;
    c.rank_reason = format!(
        "{}; a quiet helper: what it and its children said went only to /dev/null, and the \
         process that started it carried on, so the verdict counts it as routine",
        c.rank_reason
    );
}

/// Whether the non-zero exit of `key` is a quiet helper's: it was not the
/// run's command nor `--watch`ed; it lived under a second (what a worker
/// lives, `Ctx::is_worker`); something in its tree (itself or what it
/// forked) wrote to stderr, and every such write that was last went to
/// /dev/null; nothing in its tree died of a signal; it ran the same
/// program from before its first child to its end (a shim that later
/// exec'd the real program is that program); and the process that started
/// it carried on: still running, exited 0, or forked or exec'd after it.
pub(crate) fn is_quiet_helper(cx: &Ctx, key: ProcKey) -> bool {
    let m = cx.m;
    let Some(p) = m.proc(key) else {
        return false;
    };
    let Some(end) = p.end.as_ref() else {
        return false;
    };
    if !matches!(end.status, ExitStatus::Exited { code } if code != 0)
        || m.root == Some(key)
        || cx.watched(key)
        || p.lifetime_ns().is_none_or(|l| l >= WORKER_LIFETIME_NS)
    {
        return false;
    }
    // The program that forked is the one that exited: no exec after its
    // first child.
    let first_child = p.children.iter().map(|c| c.start).min();
    if let (Some(first), Some(e)) = (first_child, p.last_exec()) {
        if e.t > first {
            return false;
        }
    }
    spoke_only_to_null(cx, key) && parent_carried_on(cx, key, end.t)
}

/// Its tree's words went only to /dev/null, and there were some; nothing
/// in it died of a signal (that death would be the story).
fn spoke_only_to_null(cx: &Ctx, key: ProcKey) -> bool {
    let mut stack = vec![key];
    let mut seen = 0;
    let mut said = false;
    while let Some(k) = stack.pop() {
        seen += 1;
        if seen > MAX_TREE {
            return false;
        }
        let Some(p) = cx.m.proc(k) else { continue };
        if let Some(l) = p.last_words() {
            if !l.to_null {
                return false;
            }
            said = true;
        }
        if k != key
            && p.end
                .as_ref()
                .is_some_and(|e| matches!(e.status, ExitStatus::Signaled { .. }))
        {
            return false;
        }
        stack.extend(p.children.iter().copied());
    }
    said
}

/// The process that forked `key` went on after it ended at `t`: it was
/// still running when the log ended, exited 0, or forked or exec'd later.
/// A parent that exited non-zero right after, doing nothing else, may have
/// failed because of it: then the helper's exit is not routine.
fn parent_carried_on(cx: &Ctx, key: ProcKey, t: u64) -> bool {
    let Some(pp) =
        cx.m.proc(key)
            .and_then(|p| p.parent)
            .and_then(|k| cx.m.proc(k))
    else {
        return false;
    };
    let Some(end) = pp.end.as_ref() else {
        return true;
    };
    matches!(end.status, ExitStatus::Exited { code: 0 })
        || pp.children.iter().any(|c| c.start > t)
        || pp.last_exec().is_some_and(|e| e.t > t)
}
