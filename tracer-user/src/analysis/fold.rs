//! Deaths folded by signature (issue 26): expected stops and non-zero exits
//! that no cascade links, when at least [`GROUP_MIN`] of one rank share a
//! signature ([`signature`]: the JUnit test name, short command names,
//! cause, killer relation). Unexpected deaths, the roots of cascades and
//! their consequences stay certificates of their own: each is a story, and
//! every `consequence_of`/`consequences` id still names a certificate.
//!
//! One rule, two callers: the analysis of a report folds as it ranks
//! (`analyze_model` with `AnalysisOptions::fold`: a folded death's
//! certificate is let go once its signature, link view and verdict mention
//! are taken, and built again only for a group's example), and
//! report/groups.rs folds an analysis that kept every certificate (the
//! OTLP export at the end of a run sends every death). A soak's log of
//! 22,308 deaths held every certificate until the fold: 179 MB peak for
//! `tracer report` of a 54 MB log.
use super::types::*;
use crate::text::shape::{self, Death};

/// Fewer deaths of one signature read as fast one by one as in a group
/// (and keep their whole certificates).
pub const GROUP_MIN: usize = 3;
/// Members a group lists; the rest are counted (`members_left_out`).
pub const MAX_MEMBERS: usize = 20;

/// May this death fold (its rank, and no cascade link either way)?
pub fn foldable(c: &Certificate) -> bool {
    foldable_rank(c.rank) && c.consequence_of.is_none() && c.consequences.is_empty()
}

pub(crate) fn foldable_rank(r: Rank) -> bool {
    matches!(r, Rank::Expected | Rank::NonzeroExit)
}

pub fn proc_shape(p: &ProcRef) -> String {
    shape::command(&p.argv, &p.command)
}

/// The signature of a certificate: its JUnit test case's name.
pub fn signature(c: &Certificate) -> String {
    let victim = proc_shape(&c.victim.process);
    let cause = c.cause.kind.as_str();
    let killer = c
        .killer
        .as_ref()
        .map(|k| shape::with_test(proc_shape(&k.process), killer_test(c).as_deref()));
    let relation = c.killer.as_ref().map(|k| k.relation.as_str());
    let exit_code = match &c.victim.status {
        crate::eventlog::ExitStatus::Exited { code } => Some(*code),
        crate::eventlog::ExitStatus::Signaled { .. } => None,
    };
    shape::death(&Death {
        victim: &victim,
        cause,
        signal: c.cause.signal.as_ref().map(|s| s.sig_name.as_str()),
        exit_code: c.cause.signal.is_none().then_some(exit_code).flatten(),
        relation,
        killer: killer.as_deref(),
    })
}

/// The killer's test, run-independent, when one is known: a signature
/// keyed by it shows a flaky killer test across runs.
fn killer_test(c: &Certificate) -> Option<String> {
    let t = c.killer.as_ref()?.test.as_ref()?;
    (t.one_of.len() <= 1).then(|| t.test.full_name())
}

/// Which deaths of a ranked list fold: `keys[i]` is death `i`'s rank and
/// signature when it may fold. Returns, per death, the group it folds
/// into; groups are numbered in the order of their first members.
pub(crate) fn plan(keys: &[Option<(Rank, &str)>]) -> Vec<Option<usize>> {
    let mut sizes: std::collections::BTreeMap<(Rank, &str), usize> = Default::default();
    for &k in keys.iter().flatten() {
        *sizes.entry(k).or_default() += 1;
    }
    let mut at: std::collections::BTreeMap<(Rank, &str), usize> = Default::default();
    keys.iter()
        .map(|k| {
            let k = (*k).filter(|k| sizes[k] >= GROUP_MIN)?;
            let next = at.len();
            Some(*at.entry(k).or_insert(next))
        })
        .collect()
}

/// Adds a member to group `g` of `groups` (a new group when `g` is the
/// next number: the member is its example, built by `example`).
pub(crate) fn add(
    groups: &mut Vec<DeathGroup>,
    g: usize,
    signature: &str,
    member: GroupMember,
    ended_at: String,
    example: impl FnOnce() -> Certificate,
) {
    if let Some(grp) = groups.get_mut(g) {
        grp.count += 1;
        grp.last_time = ended_at;
        if grp.members.len() < MAX_MEMBERS {
            grp.members.push(member);
        } else {
            grp.members_left_out += 1;
        }
        return;
    }
    let example = example();
    groups.push(DeathGroup {
        id: example.id,
        rank: example.rank,
        signature: signature.to_string(),
        count: 1,
        first_time: ended_at.clone(),
        last_time: ended_at,
        members: vec![member],
        members_left_out: 0,
        example,
    });
}

pub(crate) fn member(c: &Certificate) -> GroupMember {
    GroupMember {
        pid: c.victim.process.pid,
        start: c.victim.process.start,
        end_seq: c.victim.end_seq,
    }
}
