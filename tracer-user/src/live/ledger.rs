//! A daemon's report, kept as it runs (issue 26): each look's analysis is
//! merged into one ledger of the run, so the stop writes its reports from
//! what is held, never by reading the whole log back. That read built one
//! model of every process the daemon ever saw: for a 10-minute soak's
//! 5.2 million events 1.01 GB and 25.5 s after SIGTERM (BENCHMARKS.md).
//!
//! What is held is bounded by what is live plus the stories:
//! - a death stays *open* (its certificate whole, not yet placed) while a
//!   look may still analyse its victim (the window keeps it: an ancestor of
//!   a live process, a failed child a later exit may follow from); it is
//!   *settled* [`SETTLE_AFTER_LOOKS`] looks after the last look that made
//!   it, when no later look can link another death to it;
//! - a settled death is a story (its certificate kept), or folds into its
//!   signature's group (analysis/fold.rs's rule: expected stops and
//!   non-zero exits no cascade links, [`fold::GROUP_MIN`] of a signature);
//!   past [`MAX_STORIES`] stories, every settled death folds, and the
//!   report says how many did;
//! - the side findings are merged: small exits counted once each, near
//!   misses folded across looks (the same sender, call and target), signals
//!   across the boundary up to [`MAX_FOREIGN`], and the processes still
//!   running from the last look.
//!
//! Certificate ids: the whole log's analysis numbers every death in the
//! ranked order, folded or not; the ledger does not keep each folded death,
//! so its ids number what the report shows (certificates and groups) in
//! that order. The cascade sentences are written once the ids are known.
use std::{
    collections::{BTreeMap, HashMap, HashSet},
    sync::Arc,
};

use crate::{
    analysis::{
        fold::{self, GROUP_MIN, MAX_MEMBERS},
        sort_groups, Analysis, DeathCounts, DeathGroup, DeathMention, ExitGroup, ForeignSignal,
        LeftOut, Leftover, NearMiss, Rank, Raw, MAX_NEAR_MISSES,
    },
    eventlog::ProcKey,
    model::{Model, Positions},
};

use self::{
    cancel::Cancel,
    chains::{cert_ids, Chains, Table},
    held::{key, pkey, story, Fold, Held, Member, Open, Shown, Story},
};
use super::Findings;

mod cancel;
mod chains;
mod held;
#[cfg(test)]
mod tests;

pub use cancel::MAX_CANCEL_SIGNALS;

/// Looks after the last one that made a death before it is settled: as
/// `Seen` forgets it (live/mod.rs), once no look can make it again.
const SETTLE_AFTER_LOOKS: u64 = super::FORGET_AFTER_LOOKS;
/// Certificates kept one by one at most; past it every settled death folds
/// into its signature's group (any rank), counted in the report.
pub const MAX_STORIES: usize = 1000;
/// Signals across the boundary listed at most; the rest are counted.
pub const MAX_FOREIGN: usize = 1000;
/// Verdict mentions kept of folded non-zero exits (the verdict names at
/// most two causes).
const MAX_MENTIONS: usize = 64;
/// Distinct near-miss folds past the list remembered, to count entries.
const UNLISTED_KEPT: usize = 65_536;

/// A near miss folded across looks: the same sender, call, signal, target
/// and return value (the whole log's fold key, analysis/extras.rs).
type MissKey = (ProcKey, String, i32, i64, Option<i64>, i64);

/// A ledger's report: the analysis, the timeline's facts, and what its
/// bounds left out (the report says so).
pub struct Ledgered {
    pub analysis: Analysis,
    pub timeline: Positions,
    /// Deaths that would have been certificates of their own, folded past
    /// [`MAX_STORIES`].
    pub stories_folded: usize,
    /// Signals across the boundary past [`MAX_FOREIGN`], not listed.
    pub foreign_left_out: usize,
    /// What the test integrations said of themselves, look by look
    /// (report.json's `run.test_integrations`).
    pub test_integrations: Vec<crate::labels::status::TestIntegration>,
}

/// See the module's doc.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    look: u64,
    open: HashMap<ProcKey, Open>,
    stories: Vec<Story>,
    folds: BTreeMap<(Rank, Arc<str>), Fold>,
    sigs: crate::model::Interner,
    /// Victims a recorded link names as its cause: never folded.
    causes: HashSet<ProcKey>,
    counts: DeathCounts,
    /// Settled deaths folded past [`MAX_STORIES`] that would have been
    /// certificates of their own.
    past_bound: usize,
    /// Small exits not counted yet, and the last look that made each.
    exits_open: HashMap<ProcKey, (crate::analysis::SmallExit, u64)>,
    /// Small exits counted lately (a look may still name one).
    exits_counted: HashMap<ProcKey, u64>,
    exits: BTreeMap<(String, String), ExitGroup>,
    near_misses: Vec<(NearMiss, Chains)>,
    miss_index: HashMap<MissKey, usize>,
    unlisted: HashSet<MissKey>,
    near_misses_left_out: LeftOut,
    foreign: Vec<ForeignSignal>,
    foreign_left_out: usize,
    /// The processes still running, as the latest look that kept them saw.
    leftovers: Vec<(Leftover, Chains)>,
    /// The job's cancellation by its CI runner, as looks found it.
    cancel: Cancel,
    timeline: Positions,
    table: Table,
    /// The integrations' status lines of every look (a status mark is
    /// written once, as its process loads the integration: a look sees it
    /// only while the window holds it).
    integrations: crate::labels::status::Lines,
}

impl Ledger {
    /// A restarted daemon's ledger: the deaths of what its earlier runs
    /// logged (`m`, their segments' model), all settled (those runs are
    /// over; a process they saw that still runs is found again, as
    /// `existing`). Their processes still running are not leftovers.
    pub fn of_earlier(m: &Model, opts: &crate::analysis::AnalysisOptions) -> Self {
        let opts = crate::analysis::AnalysisOptions {
            raw: true,
            fold: false,
            ..opts.clone()
        };
        let a = crate::analysis::analyze_model(m, m.boot_to_wall_ns, &opts);
        let mut a = a;
        let mut ledger = Ledger::default();
        if let Some(raw) = a.raw.take() {
            ledger.add(*raw, &a, &HashSet::new(), m, false);
        }
        let found = super::Seen::default().fresh(a);
        ledger.add_side(&found, m);
        ledger.settle_all();
        ledger
    }

    /// Merges one look: `raw` what its analysis kept for the ledger, `a`
    /// the analysis (its ancestors table, its leftovers), `pending` the
    /// deaths it must not certify yet, `m` its model. `leftovers`: keep
    /// this look's processes still running (the last look's, at a stop).
    pub fn add(
        &mut self,
        raw: Raw,
        a: &Analysis,
        pending: &HashSet<ProcKey>,
        m: &Model,
        leftovers: bool,
    ) {
        self.look += 1;
        let look = self.look;
        let causes_now: HashSet<ProcKey> = raw.links.values().map(|l| l.cause).collect();
        let Raw {
            certificates,
            links,
            small_exits,
            cancel,
        } = raw;
        self.cancel.add(cancel, a);
        let mut made = HashSet::new();
        for c in certificates {
            let k = key(&c);
            if pending.contains(&k) {
                continue;
            }
            made.insert(k);
            let link = links.get(&k);
            let linked = link.is_some() || causes_now.contains(&k);
            if let Some(o) = self.open.get_mut(&k) {
                o.last = look;
                match &mut o.held {
                    Held::Whole(s) => {
                        if s.link.is_none() {
                            s.link = link.cloned();
                        }
                    }
                    Held::Member(_) if linked => {
                        o.held = Held::Whole(Box::new(story(c, link.cloned(), a, m)));
                    }
                    Held::Member(_) => {}
                }
                continue;
            }
            match c.rank {
                Rank::Unexpected => self.counts.unexpected += 1,
                Rank::NonzeroExit => self.counts.nonzero_exit += 1,
                Rank::Consequence => self.counts.consequence += 1,
                Rank::Expected => self.counts.expected += 1,
            }
            self.cancel.count(&c);
            let member = (!linked && fold::foldable_rank(c.rank))
                .then(|| self.sigs.text(&fold::signature(&c)))
                .filter(|sig| {
                    let f = self.folds.get(&(c.rank, sig.clone()));
                    f.is_some_and(|f| f.group.is_some())
                });
            let held = match member {
                Some(sig) => Held::Member(Member::of(&c, sig)),
                None => Held::Whole(Box::new(story(c, link.cloned(), a, m))),
            };
            self.open.insert(k, Open { held, last: look });
        }
        self.causes.extend(causes_now);
        // A small exit waits as a death does: a later look may certify it
        // (its last words came after its exit), and then it is no small exit.
        for x in &small_exits {
            if pending.contains(&x.key) || self.exits_counted.contains_key(&x.key) {
                continue;
            }
            let at = self
                .exits_open
                .entry(x.key)
                .or_insert_with(|| (x.clone(), look));
            at.1 = look;
        }
        for k in &made {
            self.exits_open.remove(k);
        }
        let due: Vec<ProcKey> = self
            .exits_open
            .iter()
            .filter(|(_, (_, last))| last + SETTLE_AFTER_LOOKS < look)
            .map(|(k, _)| *k)
            .collect();
        for k in due {
            self.count_exit(k, look);
        }
        self.exits_counted
            .retain(|_, last| *last + 2 * SETTLE_AFTER_LOOKS >= look);
        if leftovers {
            self.leftovers = a
                .leftovers
                .iter()
                .map(|l| {
                    let mut l = l.clone();
                    let chains = Chains::detach(&mut [&mut l.ancestry], &a.ancestors);
                    self.timeline.note(m, pkey(&l.process));
                    (l, chains)
                })
                .collect();
        }
        let due: Vec<ProcKey> = self
            .open
            .iter()
            .filter(|(_, o)| o.last + SETTLE_AFTER_LOOKS < look)
            .map(|(k, _)| *k)
            .collect();
        self.settle(due);
    }

    /// Merges a look's side findings as `Seen` handed them on (each once;
    /// a near miss's `count` is its calls new since the last look).
    pub fn add_side(&mut self, f: &Findings, m: &Model) {
        self.integrations.marks(m);
        for n in &f.near_misses {
            let Some(sender) = f.entry(n.sender_id) else {
                continue;
            };
            let k: MissKey = (
                ProcKey {
                    pid: sender.pid,
                    start: sender.start,
                },
                n.syscall.clone(),
                n.sig,
                n.target_arg,
                n.tid_arg,
                n.ret,
            );
            if let Some(&i) = self.miss_index.get(&k) {
                let (listed, _) = &mut self.near_misses[i];
                listed.count += n.count;
                if n.last_seq > listed.last_seq {
                    listed.last_seq = n.last_seq;
                    listed.last_time = n.last_time.clone();
                }
                continue;
            }
            if self.near_misses.len() >= MAX_NEAR_MISSES {
                if self.unlisted.len() < UNLISTED_KEPT && self.unlisted.insert(k) {
                    self.near_misses_left_out.entries += 1;
                }
                self.near_misses_left_out.events += n.count;
                continue;
            }
            let mut n = n.clone();
            let mut id = Some(n.sender_id);
            let chains = Chains::detach(&mut [&mut id], &f.ancestors);
            n.sender_id = id.unwrap_or(0);
            if let Some(t) = m.kill_calls.iter().find(|c| c.ev.at.seq == n.seq) {
                self.timeline.note_seq(n.seq, t.ev.at.t);
            }
            self.miss_index.insert(k, self.near_misses.len());
            self.near_misses.push((n, chains));
        }
        self.near_misses_left_out.events += f.near_misses_unlisted;
        for s in &f.foreign_signals {
            if self.foreign.len() < MAX_FOREIGN {
                self.foreign.push(s.clone());
            } else {
                self.foreign_left_out += 1;
            }
        }
    }

    /// Counts small exit `k` in its group.
    fn count_exit(&mut self, k: ProcKey, look: u64) {
        let Some((x, _)) = self.exits_open.remove(&k) else {
            return;
        };
        let g = self.exits.entry(x.group_key()).or_insert_with(|| x.group());
        x.count_in(g);
        self.exits_counted.insert(k, look);
    }

    /// Places settled deaths: a story, or a member of its signature's fold.
    fn settle(&mut self, mut keys: Vec<ProcKey>) {
        // In the order they died: a group's first members are its earliest.
        keys.sort_by_key(|k| self.open.get(k).map(|o| o.held.order()));
        for k in keys {
            let Some(o) = self.open.remove(&k) else {
                continue;
            };
            let story = match o.held {
                Held::Whole(s) => *s,
                Held::Member(m) => {
                    self.causes.remove(&k);
                    self.add_member(m);
                    continue;
                }
            };
            let linked = story.link.is_some() || self.causes.remove(&k);
            let foldable = fold::foldable_rank(story.cert.rank) && !linked;
            if !foldable && self.stories.len() < MAX_STORIES {
                self.stories.push(story);
                continue;
            }
            if !foldable {
                self.past_bound += 1;
            }
            self.fold(story);
        }
        // A link names a death that is open, or one placed just now.
        let open = &self.open;
        self.causes.retain(|k| open.contains_key(k));
    }

    fn fold(&mut self, story: Story) {
        let sig = self.sigs.text(&fold::signature(&story.cert));
        let member = Member::of(&story.cert, sig.clone());
        let rank = story.cert.rank;
        if self
            .folds
            .get(&(rank, sig.clone()))
            .is_some_and(|f| f.group.is_some())
        {
            self.add_member(member);
            return;
        }
        let f = self.folds.entry((rank, sig.clone())).or_default();
        f.mentions.extend(member.mention);
        f.first.push(story);
        if f.first.len() < GROUP_MIN {
            return;
        }
        let first = std::mem::take(&mut f.first);
        let members = first.iter().map(|s| fold::member(&s.cert)).collect();
        let last_time = first
            .last()
            .map(|s| s.cert.victim.ended_at.clone())
            .unwrap_or_default();
        let ex = first.into_iter().next().expect("GROUP_MIN members");
        let g = DeathGroup {
            id: 0,
            rank: ex.cert.rank,
            signature: sig.to_string(),
            count: GROUP_MIN,
            first_time: ex.cert.victim.ended_at.clone(),
            last_time,
            members,
            members_left_out: 0,
            example: ex.cert,
        };
        f.group = Some((g, ex.chains, ex.timeline));
    }

    /// Every open death settled and every waiting small exit counted: the
    /// run is over (a stop, or an earlier run's segments).
    fn settle_all(&mut self) {
        let open: Vec<ProcKey> = self.open.keys().copied().collect();
        self.settle(open);
        let exits: Vec<ProcKey> = self.exits_open.keys().copied().collect();
        for k in exits {
            self.count_exit(k, self.look);
        }
    }

    /// Counts a member in its signature's group (which exists).
    fn add_member(&mut self, m: Member) {
        let Some(f) = self.folds.get_mut(&(m.order.0, m.sig)) else {
            return;
        };
        if let Some(mention) = m.mention.filter(|_| f.mentions.len() < MAX_MENTIONS) {
            f.mentions.push(mention);
        }
        let Some((g, _, _)) = &mut f.group else {
            return;
        };
        g.count += 1;
        g.last_time = m.ended_at;
        if g.members.len() < MAX_MEMBERS {
            g.members.push(m.at);
        } else {
            g.members_left_out += 1;
        }
    }

    /// The run's analysis as the report shows it, and what the timeline
    /// needs: every open death settled (the daemon has stopped, or an
    /// interim report is made from a copy).
    pub fn finish(mut self) -> Ledgered {
        self.settle_all();
        let mut stories = std::mem::take(&mut self.stories);
        let mut groups = Vec::new();
        for (_, f) in std::mem::take(&mut self.folds) {
            stories.extend(f.first);
            if let Some(g) = f.group {
                groups.push((g, f.mentions));
            }
        }
        // A death certified before a look saw the cancellation's signature.
        self.cancel
            .mend(stories.iter_mut().map(|s| &mut s.cert), &mut self.counts);
        self.cancel.mark(&mut self.foreign);
        // One ranked order for certificates and groups; ids number it.
        let mut shown: Vec<Shown> = stories
            .into_iter()
            .map(Shown::Story)
            .chain(groups.into_iter().map(|(g, ms)| Shown::Group(g, ms)))
            .collect();
        shown.sort_by_key(Shown::order);
        let mut timeline = std::mem::take(&mut self.timeline);
        let mut certificates = Vec::new();
        let mut links = BTreeMap::new();
        let mut death_groups = Vec::new();
        let mut mentions = Vec::new();
        for (n, s) in shown.into_iter().enumerate() {
            let id = n + 1;
            match s {
                Shown::Story(mut s) => {
                    s.cert.id = id;
                    self.table.attach(&s.chains, &mut cert_ids(&mut s.cert));
                    if let Some(l) = s.link.take() {
                        links.insert(s.key(), l);
                    }
                    timeline.merge(s.timeline);
                    certificates.push(s.cert);
                }
                Shown::Group((mut g, chains, tl), ms) => {
                    g.id = id;
                    g.example.id = id;
                    self.table.attach(&chains, &mut cert_ids(&mut g.example));
                    timeline.merge(tl);
                    mentions.extend(ms.into_iter().map(|m| DeathMention { id, ..m }));
                    death_groups.push(g);
                }
            }
        }
        crate::analysis::cascade::word(&mut certificates, &links);
        if self.counts.unexpected > 0 {
            mentions.clear();
        }
        let near_misses = std::mem::take(&mut self.near_misses)
            .into_iter()
            .map(|(mut n, chains)| {
                let mut id = Some(n.sender_id);
                self.table.attach(&chains, &mut [&mut id]);
                n.sender_id = id.unwrap_or(0);
                n
            })
            .collect();
        let leftovers = std::mem::take(&mut self.leftovers)
            .into_iter()
            .map(|(mut l, chains)| {
                self.table.attach(&chains, &mut [&mut l.ancestry]);
                l
            })
            .collect();
        let analysis = Analysis {
            counts: self.counts,
            certificates,
            death_groups,
            folded_mentions: mentions,
            other_exits: sort_groups(std::mem::take(&mut self.exits).into_values().collect()),
            near_misses,
            near_misses_left_out: self.near_misses_left_out,
            cancellation: std::mem::take(&mut self.cancel).finish(),
            foreign_signals: std::mem::take(&mut self.foreign),
            leftovers,
            ancestors: std::mem::take(&mut self.table.entries),
            raw: None,
            // The daemon's reports take them from `LiveResources`.
            test_memory: Vec::new(),
        };
        Ledgered {
            analysis,
            timeline,
            stories_folded: self.past_bound,
            foreign_left_out: self.foreign_left_out,
            test_integrations: self.integrations.finish(),
        }
    }

    /// What the ledger holds (for the tests: bounded by the window and the
    /// stories, not by the deaths seen).
    pub fn held(&self) -> usize {
        self.open.len()
            + self.stories.len()
            + self
                .folds
                .values()
                .map(|f| f.first.len() + 1)
                .sum::<usize>()
            + self.exits_open.len()
            + self.exits_counted.len()
            + self.causes.len()
            + self.cancel.held()
    }
}
