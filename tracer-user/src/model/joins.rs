//! The joins after the one pass: kill calls to the signals they sent, the
//! run's own processes, OOM kills to their victims.
use std::collections::{HashMap, VecDeque};

// SIGKILL and the si_code the OOM killer uses (SEND_SIG_PRIV -> SI_KERNEL).
use tracer_common::signals::{SIGKILL, SI_KERNEL};

use super::Model;
use crate::eventlog::ProcKey;

/// How far apart an oom:mark_victim and its SIGKILL may be. The kernel sends
/// the signal and marks the victim in the same function; a second is slack.
const OOM_PAIR_WINDOW_NS: u64 = 1_000_000_000;
/// `signal.call.id` == `kill_call.call_id` of the same sender thread. Keyed
/// by the sender's process identity too, so a recycled tid cannot cross-join.
/// The first kill call of a key wins. Sorted indices, not a map: a signal
/// storm has half a million kill calls, and a map of their keys cost 30 MB.
pub(super) fn join_kill_calls(m: &mut Model) {
    let kills = &m.kill_calls;
    let key = |i: u32| {
        let k = &kills[i as usize];
        (k.sender(), k.ev.sender.tid, k.ev.call_id)
    };
    let mut by_key: Vec<u32> = (0..kills.len() as u32).collect();
    // Stable: among equal keys the first kill call stays first.
    by_key.sort_by_key(|&i| key(i));
    by_key.dedup_by_key(|i| key(*i));
    for s in m.signals.iter_mut() {
        let Some(call) = &s.ev.call else { continue };
        let want = (s.sender, s.ev.sender.tid, call.id);
        if let Ok(j) = by_key.binary_search_by_key(&want, |&i| key(i)) {
            s.kill_call = Some(by_key[j]);
        }
    }
}

/// The run is the tracer's child and everything descending from it. A
/// process the kernel side tracked but whose fork we never saw (daemon mode,
/// or a lost fork record) counts too: we cannot prove it is outside.
pub(super) fn mark_run(m: &mut Model) {
    let tracer = m.tracer_pid;
    let mut queue: VecDeque<ProcKey> = m.root.into_iter().collect();
    while let Some(k) = queue.pop_front() {
        let Some(p) = m.procs.get_mut(&k) else {
            continue;
        };
        if p.in_run {
            continue;
        }
        p.in_run = true;
        queue.extend(p.children.iter().copied());
    }
    let orphans: Vec<ProcKey> = m
        .procs
        .values()
        .filter(|p| p.lifecycle_seen && p.fork.is_none() && p.key.pid != tracer)
        .map(|p| p.key)
        .collect();
    for k in orphans {
        let mut queue = VecDeque::from([k]);
        while let Some(k) = queue.pop_front() {
            let Some(p) = m.procs.get_mut(&k) else {
                continue;
            };
            if !p.in_run {
                p.in_run = true;
                queue.extend(p.children.iter().copied());
            }
        }
    }
}

/// Resolves each OOM victim tid to a process and pairs it with the SIGKILL
/// (SI_KERNEL) the OOM killer sent, whose "sender" is only the task that
/// happened to be allocating. The kernel's SIGKILLs (by target thread,
/// target process and time) and the tids (by process) are indexed first: a
/// scan of every signal and every process per OOM kill made 40,000 OOM
/// kills take 25 s.
pub(super) fn join_ooms(m: &mut Model) {
    if m.ooms.is_empty() {
        return;
    }
    let kills = KernelKills::of(m);
    let tids = super::threads::TidIndex::of(m);
    for i in 0..m.ooms.len() {
        let (tid, t) = (m.ooms[i].ev.victim_tid, m.ooms[i].ev.at.t);
        let by_tid = if tid == 0 {
            None
        } else {
            tids.owner(m, tid, t)
        };
        let signal = kills.nearest(m, tid, by_tid, t);
        m.ooms[i].signal = signal;
        m.ooms[i].victim = by_tid.or_else(|| signal.map(|j| m.signals[j].target));
    }
    let (mut by_victim, mut by_signal) = (HashMap::new(), HashMap::new());
    for (i, o) in m.ooms.iter().enumerate() {
        // The first OOM kill of each wins, as a search in log order would.
        if let Some(v) = o.victim {
            by_victim.entry(v).or_insert(i);
        }
        if let Some(s) = o.signal {
            by_signal.entry(s).or_insert(i);
        }
    }
    m.oom_index = OomIndex {
        by_victim,
        by_signal,
    };
}

/// Where each OOM kill's victim and SIGKILL are found again (the first OOM
/// kill of a victim, of a signal): `Model::oom_of`, `Model::oom_by_signal`.
#[derive(Debug, Clone, Default)]
pub(super) struct OomIndex {
    by_victim: HashMap<ProcKey, usize>,
    by_signal: HashMap<usize, usize>,
}

impl OomIndex {
    pub(super) fn of_victim(&self, key: ProcKey) -> Option<usize> {
        self.by_victim.get(&key).copied()
    }

    pub(super) fn of_signal(&self, signal: usize) -> Option<usize> {
        self.by_signal.get(&signal).copied()
    }
}

/// The SIGKILLs with SI_KERNEL, as indices into `signals` in log order: by
/// target thread, by target process, and all of them by time.
struct KernelKills {
    by_tid: HashMap<u32, Vec<usize>>,
    by_target: HashMap<ProcKey, Vec<usize>>,
    /// (t, index), sorted.
    by_time: Vec<(u64, usize)>,
}

impl KernelKills {
    fn of(m: &Model) -> KernelKills {
        let mut k = KernelKills {
            by_tid: HashMap::new(),
            by_target: HashMap::new(),
            by_time: Vec::new(),
        };
        for (i, s) in m.signals.iter().enumerate() {
            if s.ev.sig == SIGKILL && s.ev.code == SI_KERNEL {
                k.by_tid.entry(s.ev.target.tid).or_default().push(i);
                k.by_target.entry(s.target).or_default().push(i);
                k.by_time.push((s.ev.at.t, i));
            }
        }
        k.by_time.sort_unstable();
        k
    }

    /// The kernel SIGKILL nearest in time to an OOM kill at `t` of thread
    /// `tid` (of process `owner`), within the pairing window; the earliest
    /// in the log among equally near ones. tid 0: the victim's pid was not
    /// visible from the tracer's pid namespace; its SIGKILL alone names it.
    fn nearest(&self, m: &Model, tid: u32, owner: Option<ProcKey>, t: u64) -> Option<usize> {
        let near = |j: &usize| m.signals[*j].ev.at.t.abs_diff(t) <= OOM_PAIR_WINDOW_NS;
        let best = |c: &mut dyn Iterator<Item = usize>| {
            c.min_by_key(|&j| (m.signals[j].ev.at.t.abs_diff(t), j))
        };
        if tid == 0 {
            let from = self
                .by_time
                .partition_point(|&(s, _)| s < t.saturating_sub(OOM_PAIR_WINDOW_NS));
            let window = self.by_time[from..]
                .iter()
                .take_while(|&&(s, _)| s <= t.saturating_add(OOM_PAIR_WINDOW_NS))
                .map(|&(_, j)| j);
            return best(&mut window.into_iter());
        }
        let of_tid = self.by_tid.get(&tid).into_iter().flatten();
        let of_owner = owner
            .and_then(|o| self.by_target.get(&o))
            .into_iter()
            .flatten();
        best(&mut of_tid.chain(of_owner).copied().filter(near))
    }
}
