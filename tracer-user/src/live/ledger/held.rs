//! What a ledger holds of each death: a certificate whole while a look
//! may still link another death to it ([`Story`]), or what a member of its
//! signature's group needs ([`Member`]); an open death ([`Open`]), the
//! settled deaths of one signature ([`Fold`]), and what a report shows in
//! ranked order ([`Shown`]).
use std::sync::Arc;

use crate::{
    analysis::{
        cascade::Link, fold, Analysis, Certificate, DeathGroup, DeathMention, GroupMember, Rank,
    },
    eventlog::ProcKey,
    model::{Model, Positions},
};

use super::chains::{cert_ids, Chains};

/// One death, its certificate whole (its cascade sentences not written).
#[derive(Clone, Debug)]
pub(super) struct Story {
    pub(super) cert: Certificate,
    pub(super) chains: Chains,
    /// The death it follows from, when a look found one.
    pub(super) link: Option<Link>,
    /// Its processes' ends and parents, for the timeline.
    pub(super) timeline: Positions,
}

impl Story {
    pub(super) fn key(&self) -> ProcKey {
        key(&self.cert)
    }
}

/// A certificate made by a look, held whole: its ancestry apart from the
/// look's table, its processes' positions from the look's model.
pub(super) fn story(mut cert: Certificate, link: Option<Link>, a: &Analysis, m: &Model) -> Story {
    let chains = Chains::detach(&mut cert_ids(&mut cert), &a.ancestors);
    let mut timeline = Positions::default();
    timeline.note(m, pkey(&cert.victim.process));
    if let Some(k) = &cert.killer {
        timeline.note(m, pkey(&k.process));
    }
    for h in &cert.history {
        timeline.note(m, pkey(&h.sender));
    }
    Story {
        cert,
        chains,
        link,
        timeline,
    }
}

/// Within a rank, deaths are ordered by the fatal signal (else the end),
/// a quiet helper's exit last, as the whole log's analysis orders them.
pub(super) fn order(c: &Certificate) -> (Rank, bool, u64, u64) {
    let v = &c.victim;
    let cause = c.cause.signal.as_ref().map_or(v.end_seq, |s| s.seq);
    (c.rank, c.quiet_helper, cause, v.end_seq)
}

pub(super) fn key(c: &Certificate) -> ProcKey {
    pkey(&c.victim.process)
}

pub(super) fn pkey(p: &crate::analysis::ProcRef) -> ProcKey {
    ProcKey {
        pid: p.pid,
        start: p.start,
    }
}

/// An open death whose signature's group exists already and that nothing
/// links: what a member of that group needs, not a whole certificate (a
/// soak's ~2,000 open deaths held ~5 MB as certificates; ~150 B each so).
/// A look that links it makes its certificate again, and it is held whole.
#[derive(Clone, Debug)]
pub(super) struct Member {
    pub(super) at: GroupMember,
    pub(super) order: (Rank, bool, u64, u64),
    pub(super) ended_at: String,
    pub(super) sig: Arc<str>,
    pub(super) mention: Option<DeathMention>,
}

impl Member {
    pub(super) fn of(c: &Certificate, sig: Arc<str>) -> Self {
        Member {
            at: fold::member(c),
            order: order(c),
            ended_at: c.victim.ended_at.clone(),
            sig,
            mention: (c.rank == Rank::NonzeroExit).then(|| DeathMention::of(c)),
        }
    }
}

#[derive(Clone, Debug)]
pub(super) enum Held {
    /// Boxed: a certificate inline is ~2.5 KB, and a map entry is the size
    /// of its largest variant.
    Whole(Box<Story>),
    Member(Member),
}

impl Held {
    pub(super) fn order(&self) -> (Rank, bool, u64, u64) {
        match self {
            Held::Whole(s) => order(&s.cert),
            Held::Member(m) => m.order,
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Open {
    pub(super) held: Held,
    /// The last look that made it.
    pub(super) last: u64,
}

/// The settled deaths of one signature: the first few whole, then a group.
#[derive(Clone, Debug, Default)]
pub(super) struct Fold {
    pub(super) first: Vec<Story>,
    /// The group, its example's certificate in it; the example's ancestry
    /// and timeline beside it.
    pub(super) group: Option<(DeathGroup, Chains, Positions)>,
    pub(super) mentions: Vec<DeathMention>,
}

/// A certificate or a group, as a report shows them in ranked order.
pub(super) enum Shown {
    Story(Story),
    Group((DeathGroup, Chains, Positions), Vec<DeathMention>),
}

impl Shown {
    pub(super) fn order(&self) -> (Rank, bool, u64, u64) {
        match self {
            Shown::Story(s) => order(&s.cert),
            Shown::Group((g, _, _), _) => order(&g.example),
        }
    }
}
