//! The side findings: small non-zero exits grouped, kill calls that missed,
//! signals crossing the run's boundary, processes left running.
use std::collections::{BTreeMap, HashMap};

use super::{
    cause::{sent_by_process, SIGCHLD},
    certificate::signal_ref,
    side_findings::*,
    wording as w, Ctx,
};
use crate::eventlog::{ExitStatus, ProcKey};
use tracer_common::signals::{SIGHUP, SIGINT, SIGKILL, SIGQUIT, SIGTERM};

const GROUP_SAMPLE: usize = 10;

/// One small non-zero exit, as [`group_exits`] groups it (a daemon's
/// ledger groups those of every look itself: live/ledger.rs).
#[derive(Clone, Debug, PartialEq)]
pub struct SmallExit {
    pub key: ProcKey,
    /// Its exit's `seq`.
    pub seq: u64,
    /// Its executable's base name (else argv\[0\]'s, else its comm).
    pub program: String,
    pub status: ExitStatus,
    /// Its command line, as a group's example.
    pub command: String,
}

impl SmallExit {
    /// What its group is keyed by: total-ordered (the status rendered).
    pub fn group_key(&self) -> (String, String) {
        (self.program.clone(), status_key(&self.status))
    }

    /// A group of its own, counted once.
    pub fn group(&self) -> ExitGroup {
        ExitGroup {
            program: self.program.clone(),
            status: self.status.clone(),
            count: 0,
            example: self.command.clone(),
            pids: Vec::new(),
            evidence: Vec::new(),
        }
    }

    /// Counts it in `g` (its pid and `seq` among the first few).
    pub fn count_in(&self, g: &mut ExitGroup) {
        g.count += 1;
        if g.pids.len() < GROUP_SAMPLE {
            g.pids.push(self.key.pid);
            g.evidence.push(self.seq);
        }
    }
}

/// The small exits among `keys`, in the order they ended.
pub(crate) fn small_exits(cx: &Ctx, keys: &[ProcKey]) -> Vec<SmallExit> {
    let mut ordered: Vec<(u64, ProcKey)> = keys
        .iter()
        .filter_map(|k| Some((cx.m.proc(*k)?.end.as_ref()?.seq, *k)))
        .collect();
    ordered.sort_unstable();
    ordered
        .into_iter()
        .map(|(seq, key)| {
            let p = cx.m.proc(key).expect("known");
            let end = p.end.as_ref().expect("ended");
            let r = cx.proc_ref(key, end.t);
            let program = r
                .filename
                .as_deref()
                .or(r.argv.first().map(String::as_str))
                .map(|f| f.rsplit('/').next().unwrap_or(f).to_string())
                .or_else(|| r.comm.clone())
                .unwrap_or_else(|| "?".into());
            SmallExit {
                key,
                seq,
                program,
                status: end.status.clone(),
                command: r.command,
            }
        })
        .collect()
}

/// Small exits grouped by program and status, most frequent first.
pub fn group_exits<'a>(exits: impl IntoIterator<Item = &'a SmallExit>) -> Vec<ExitGroup> {
    let mut groups: BTreeMap<(String, String), ExitGroup> = BTreeMap::new();
    for x in exits {
        let g = groups.entry(x.group_key()).or_insert_with(|| x.group());
        x.count_in(g);
    }
    sort_groups(groups.into_values().collect())
}

/// Most frequent first; the map order breaks ties deterministically (a
/// stable sort of groups in key order).
pub fn sort_groups(mut out: Vec<ExitGroup>) -> Vec<ExitGroup> {
    out.sort_by_key(|g| std::cmp::Reverse(g.count));
    out
}

fn status_key(s: &ExitStatus) -> String {
    match s {
        ExitStatus::Exited { code } => format!("exit {code:03}"),
        ExitStatus::Signaled {
            signal,
            core_dumped,
            ..
        } => format!("sig {signal:02} {core_dumped}"),
    }
}

/// Folded near misses listed at most: report.json keeps the first this many
/// (by their first call) and counts the rest. 200,000 failed kills of the
/// tracer made a 164 MB report.json when each was listed with its sender.
pub const MAX_NEAR_MISSES: usize = 1000;

/// Failed kill-family calls, identical ones folded (same sender process,
/// syscall, signal, target and thread as given, return value), in order
/// of their first call; past [`MAX_NEAR_MISSES`] only counted.
pub(crate) fn near_misses(cx: &Ctx) -> (Vec<NearMiss>, LeftOut) {
    type Key<'a> = (ProcKey, &'a str, i32, i64, Option<i64>, i64);
    // Per fold: the first and last call (indices into `kill_calls`) and
    // how many; the folds in order of their first call.
    let mut index: HashMap<Key, usize> = HashMap::new();
    let mut folds: Vec<(usize, usize, u64)> = Vec::new();
    let mut left_out = LeftOut::default();
    for (i, k) in cx.m.kill_calls.iter().enumerate() {
        if k.ev.ret >= 0 {
            continue;
        }
        let key = (
            k.sender(),
            &*k.ev.syscall,
            k.ev.sig,
            k.ev.target_arg,
            k.ev.tid_arg(),
            k.ev.ret,
        );
        // A record of calls the kernel counted stands for `count` of them.
        let calls = k.ev.count.max(1);
        match index.get(&key) {
            Some(&f) if f < folds.len() => {
                folds[f].1 = i;
                folds[f].2 += calls;
            }
            // Past the cap: only counted (the index still says it is new
            // only once, so the count of entries is exact).
            Some(_) => left_out.events += calls,
            None if folds.len() < MAX_NEAR_MISSES => {
                index.insert(key, folds.len());
                folds.push((i, i, calls));
            }
            None => {
                index.insert(key, usize::MAX);
                left_out.entries += 1;
                left_out.events += calls;
            }
        }
    }
    let list = folds
        .into_iter()
        .map(|(first, last, count)| {
            let (k, l) = (&cx.m.kill_calls[first], &cx.m.kill_calls[last]);
            let target_ns = cx.target_ns(k.sender(), &k.ev.syscall, k.ev.target_arg, k.ev.at.t);
            NearMiss {
                seq: k.ev.at.seq,
                time: cx.m.time_at(&k.ev.at),
                count,
                last_seq: l.ev.at.seq,
                last_time: cx.m.time_at(&l.ev.at),
                sender_id: cx.entry(k.sender(), k.ev.at.t),
                sender_tid: k.ev.sender.tid,
                syscall: k.ev.syscall.to_string(),
                sig: k.ev.sig,
                sig_name: k.ev.sig_name.to_string(),
                target_arg: k.ev.target_arg,
                tid_arg: k.ev.tid_arg(),
                aimed_at: w::aimed_in_ns(
                    &w::aimed_at(&k.ev.syscall, k.ev.target_arg, k.ev.tid_arg()),
                    target_ns.as_ref(),
                ),
                target_ns,
                ret: k.ev.ret,
                errno: k.ev.errno.map(|e| e.to_string()),
                probe: k.ev.sig == 0,
            }
        })
        .collect();
    (list, left_out)
}

/// Process-sent signals whose ends are on different sides of the run's
/// boundary. Kernel-raised ones (OOM, faults, timers) have an arbitrary
/// "sender" and SIGCHLD is noise, so neither is listed.
/// Signals whose default action ends a process, as a run sends them to
/// stop one: sent outside the run, they lead the verdict.
const OUTBOUND_KILL_SIGS: [i32; 5] = [SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGQUIT];

pub(crate) fn foreign_signals(cx: &Ctx) -> Vec<ForeignSignal> {
    let cancel = cx.cancel();
    cx.m.signals
        .iter()
        .enumerate()
        .filter(|(_, s)| s.ev.sig != SIGCHLD && sent_by_process(s))
        .filter_map(|(i, s)| {
            let direction = match (cx.m.in_run(s.sender), cx.m.in_run(s.target)) {
                (true, false) => Direction::RunToOutside,
                (false, true) => Direction::OutsideToRun,
                _ => return None,
            };
            Some(ForeignSignal {
                direction,
                signal: signal_ref(cx.m, s),
                sender: cx.proc_ref(s.sender, s.ev.at.t),
                sender_tid: s.ev.sender.tid,
                sender_is_tracer: cx.m.is_tracer(s.sender),
                target_is_tracer: cx.m.is_tracer(s.target),
                target: cx.proc_ref(s.target, s.ev.at.t),
                // A daemon is stopped by the job it watches (a CI step's
                // `kill -TERM`): that is no kill leaving the run.
                outbound_kill: direction == Direction::RunToOutside
                    && OUTBOUND_KILL_SIGS.contains(&s.ev.sig)
                    && !(cx.m.daemon && cx.m.is_tracer(s.target)),
                call: cx
                    .call_of(s)
                    .map(|(sc, a, t)| w::call_notation(&sc, a, t, &s.ev.sig_name)),
                cancellation: cancel.is_some_and(|f| f.sent(i)),
            })
        })
        .collect()
}

/// Run processes still alive when the command exited. A `leak` record says
/// so with /proc's facts, and such a process stays listed even if it ended
/// later (`--leaks kill`); a log without leak records falls back to "no
/// recorded end", with `orphaned` inferred from the parent's end.
pub(crate) fn leftovers(cx: &Ctx) -> Vec<Leftover> {
    let t = cx.m.last_t;
    cx.m.procs
        .values()
        .filter(|p| p.in_run && (p.end.is_none() || p.leak().is_some()))
        .map(|p| {
            let leak = p.leak().map(|l| LeakFacts {
                seq: l.at.seq,
                time: l.at.time.clone(),
                ppid: l.ppid,
                pgid: l.pgid,
                sid: l.sid,
                argv: l.argv.clone(),
                argv_truncated: l.argv_truncated,
                exe: l.exe.clone(),
                reparented: l.reparented,
                detached: l.detached,
                fds: l.fds.clone(),
                fds_left_out: l.fds_left_out,
            });
            let parent_ended = p
                .parent
                .and_then(|pp| cx.m.proc(pp))
                .is_some_and(|pp| pp.end.is_some());
            let at = p.leak().map_or(t, |l| l.at.t);
            // Named by its last exec, even one after the leak record (a fork
            // caught between fork and exec): as its certificate names it.
            let named_at = p.end.as_ref().map_or(t, |e| e.t).max(at);
            Leftover {
                process: cx.proc_ref(p.key, named_at),
                started_at: cx.wall(p.key.start),
                ancestry: cx.ancestry(p.key, at),
                orphaned: leak.as_ref().map_or(parent_ended, |l| l.reparented),
                spawned_by: p
                    .parent
                    .zip(p.fork.as_ref())
                    .map(|(pp, f)| cx.proc_ref(pp, f.t)),
                leak,
                ended_at: p.end.as_ref().map(|e| cx.wall(e.t)),
                routine: routine_end(cx, p),
            }
        })
        .collect()
}

/// A leaked process that ended by itself within [`ROUTINE_LEAK_NS`] of its
/// leak record (the command's exit): no signal from the tracer (`--leaks
/// kill`) ended it.
fn routine_end(cx: &Ctx, p: &crate::model::Process) -> bool {
    let (Some(l), Some(e)) = (p.leak(), p.end.as_ref()) else {
        return false;
    };
    let by_tracer = p
        .signals_in()
        .iter()
        .any(|&i| cx.m.is_tracer(cx.m.signals[i].sender));
    e.t <= l.at.t + super::ROUTINE_LEAK_NS && !by_tracer
}
