//! The run's deaths as [`super::analyze_model`] ranks them: found (each
//! certificate built, or only what a fold reads of it kept), quiet helpers
//! marked, ordered and numbered within their ranks, then settled into the
//! certificates a report shows whole and the groups folded deaths join.
use std::collections::{BTreeMap, BTreeSet};

use super::{
    cascade::{self, Link, LinkView},
    caught, certificate, fold, quiet, Certificate, Ctx, DeathCounts, DeathGroup, DeathMention,
    GroupMember, Rank,
};
use crate::eventlog::{ExitStatus, ProcKey};

/// One death while the analysis ranks: its certificate, or (when it may
/// fold) what a group and the verdict read of it, the certificate let go.
pub(super) struct Death {
    id: usize,
    /// The fatal signal's `seq` (else the end's): the order within a rank,
    /// after whether it is a quiet helper's exit (last).
    cause_seq: u64,
    quiet: bool,
    /// Boxed, as is the mention: inline, an `Option<Certificate>` made
    /// every folded death as large as a certificate (616 B a `Death`:
    /// 323 MB of a 470 MB report of one soak segment, 262k deaths).
    cert: Option<Box<Certificate>>,
    /// Shared by the deaths of one signature (interned as they are
    /// ranked: a soak's 262k folded deaths had 25 MB of copies of a few).
    signature: Option<std::sync::Arc<str>>,
    mention: Option<Box<DeathMention>>,
}

impl Death {
    fn of(c: Certificate, fold: bool, sigs: &mut crate::model::Interner) -> Self {
        let cause_seq = c.cause.signal.as_ref().map_or(c.victim.end_seq, |s| s.seq);
        let quiet = false;
        if !(fold && fold::foldable_rank(c.rank)) {
            return Death {
                id: 0,
                cause_seq,
                quiet,
                cert: Some(Box::new(c)),
                signature: None,
                mention: None,
            };
        }
        // Unlinked, these headlines are final (cascade::word rewrites only
        // a linked death's, and a linked death is built again).
        Death {
            id: 0,
            cause_seq,
            quiet,
            signature: Some(sigs.text(&fold::signature(&c))),
            mention: (c.rank == Rank::NonzeroExit).then(|| Box::new(DeathMention::of(&c))),
            cert: None,
        }
    }
}

/// Per death: what the cascades read, and its certificate unless it may
/// fold (then only its signature and what the verdict reads are kept).
#[derive(Default)]
pub(super) struct Found {
    pub(super) views: Vec<LinkView>,
    pub(super) deaths: Vec<Death>,
    /// Non-zero exits that get no certificate.
    pub(super) small_exits: Vec<ProcKey>,
    /// Deaths the job's cancellation caused.
    pub(super) cancelled: usize,
}

/// Every death of the run that needs a certificate, in the model's order.
pub(super) fn find(cx: &Ctx) -> Found {
    let (model, opts) = (cx.m, cx.opts);
    let mut found = Found::default();
    let mut sigs = crate::model::Interner::default();
    for p in model.procs.values().filter(|p| p.in_run) {
        let Some(end) = &p.end else { continue };
        let oom_victim = model.oom_of(p.key).is_some();
        // The command that could not be run gets its certificate whatever
        // its fork's exit looked like: it is the whole story of the run.
        let not_run = model.not_run.is_some() && model.root == Some(p.key);
        let needs_cert = not_run
            || match end.status {
                ExitStatus::Signaled { .. } => true,
                // A non-zero exit that a caught signal explains is a death,
                // however short the life: the handler's exit(1) after a SIGTERM.
                ExitStatus::Exited { code } => {
                    oom_victim
                        || (code != 0
                            && (cx.is_worker(p.key) || caught::caught_exit(model, p.key).is_some()))
                }
            };
        if needs_cert {
            let c = certificate::build(cx, p.key);
            found.cancelled += usize::from(c.cause.cancelled);
            found.views.push(cascade::LinkView::of(cx, &c));
            found.deaths.push(Death::of(c, opts.fold, &mut sigs));
        } else if matches!(end.status, ExitStatus::Exited { code } if code != 0) {
            found.small_exits.push(p.key);
        }
    }
    found
}

/// Quiet helpers (quiet.rs): a non-zero exit judged with the chain it
/// started, as a whole, by the chain's last death.
pub(super) fn mark_quiet(
    cx: &Ctx,
    links: &BTreeMap<ProcKey, Link>,
    views: &[LinkView],
    deaths: &mut [Death],
) {
    let tops = quiet::chain_tops(links, views);
    for (d, v) in deaths.iter_mut().zip(views) {
        let top = tops.get(&v.key).copied().unwrap_or(v.key);
        d.quiet = v.rank == Rank::NonzeroExit && quiet::is_quiet_helper(cx, top);
        if let Some(m) = &mut d.mention {
            m.quiet = d.quiet;
        }
    }
}

/// The deaths' order (indices into `deaths`), each death's id set from
/// it, and the count per rank.
pub(super) fn number(views: &[LinkView], deaths: &mut [Death]) -> (Vec<usize>, DeathCounts) {
    // Within a rank, by the moment the cause happened (the fatal signal), so a
    // group kill's victims stay together in the order the kernel reached them.
    let mut order: Vec<usize> = (0..deaths.len()).collect();
    // A quiet helper's non-zero exit comes after the others (quiet.rs).
    order.sort_by_key(|&i| {
        (
            views[i].rank,
            deaths[i].quiet,
            deaths[i].cause_seq,
            views[i].end_seq,
        )
    });
    let mut counts = DeathCounts::default();
    for (n, &i) in order.iter().enumerate() {
        match views[i].rank {
            Rank::Unexpected => counts.unexpected += 1,
            Rank::NonzeroExit => counts.nonzero_exit += 1,
            Rank::Consequence => counts.consequence += 1,
            Rank::Expected => counts.expected += 1,
        }
        deaths[i].id = n + 1;
    }
    (order, counts)
}

/// What a report shows of the deaths: the certificates whole, the groups
/// the folded ones joined, and what the verdict reads of each folded one.
#[derive(Default)]
pub(super) struct Settled {
    pub(super) certificates: Vec<Certificate>,
    pub(super) death_groups: Vec<DeathGroup>,
    pub(super) folded_mentions: Vec<DeathMention>,
}

/// Each death, in `order`, shown whole or folded into its signature's
/// group (a linked death never folds).
pub(super) fn settle(
    cx: &Ctx,
    order: &[usize],
    mut deaths: Vec<Death>,
    views: &[LinkView],
    linked: &BTreeSet<ProcKey>,
) -> Settled {
    // Which fold: a linked death never does.
    let keys: Vec<Option<(Rank, &str)>> = order
        .iter()
        .map(|&i| {
            let sig = deaths[i].signature.as_deref()?;
            let free = fold::foldable_rank(views[i].rank) && !linked.contains(&views[i].key);
            free.then_some((views[i].rank, sig))
        })
        .collect();
    let groups_of = fold::plan(&keys);
    drop(keys);
    let mut settled = Settled::default();
    // The certificate of death `i`, whole, with its final rank and id.
    let cert = |d: &mut Death, v: &LinkView| {
        let mut c = d
            .cert
            .take()
            .map_or_else(|| certificate::build(cx, v.key), |c| *c);
        c.rank = v.rank;
        c.id = d.id;
        if d.quiet {
            quiet::mark(&mut c);
        }
        c
    };
    for (&i, g) in order.iter().zip(groups_of) {
        let (d, v) = (&mut deaths[i], &views[i]);
        let Some(g) = g else {
            settled.certificates.push(cert(d, v));
            continue;
        };
        let member = GroupMember {
            pid: v.key.pid,
            start: v.key.start,
            end_seq: v.end_seq,
        };
        let sig = d.signature.take().unwrap_or_default();
        fold::add(
            &mut settled.death_groups,
            g,
            &sig,
            member,
            cx.wall(v.end_t),
            || cert(d, v),
        );
        settled
            .folded_mentions
            .extend(d.mention.take().map(|m| DeathMention { id: d.id, ..*m }));
        d.cert = None;
    }
    settled
}
