//! The joins after the one pass: kill calls to the signals they sent, the
//! run's own processes, OOM kills to their victims.
use std::collections::VecDeque;

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
/// happened to be allocating.
pub(super) fn join_ooms(m: &mut Model) {
    for i in 0..m.ooms.len() {
        let (tid, t) = (m.ooms[i].ev.victim_tid, m.ooms[i].ev.at.t);
        let by_tid = if tid == 0 { None } else { m.tid_owner(tid, t) };
        let signal = m
            .signals
            .iter()
            .enumerate()
            .filter(|(_, s)| s.ev.sig == SIGKILL && s.ev.code == SI_KERNEL)
            // tid 0: the victim's pid was not visible from the tracer's pid
            // namespace; its SIGKILL alone names it.
            .filter(|(_, s)| tid == 0 || s.ev.target.tid == tid || Some(s.target) == by_tid)
            .filter(|(_, s)| s.ev.at.t.abs_diff(t) <= OOM_PAIR_WINDOW_NS)
            .min_by_key(|(_, s)| s.ev.at.t.abs_diff(t))
            .map(|(j, _)| j);
        m.ooms[i].signal = signal;
        m.ooms[i].victim = by_tid.or_else(|| signal.map(|j| m.signals[j].target));
    }
}
