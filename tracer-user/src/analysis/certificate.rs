//! One death certificate: victim, cause, killer, history, evidence.
use super::{
    cause::{self, Classified, SIGCHLD},
    mechanism, quote, summary,
    types::*,
    wording::{self as w, proc_phrase},
    Ctx,
};
use crate::{
    eventlog::{ExitStatus, ProcKey},
    model::{Model, SignalEv},
};

pub(crate) fn build(cx: &Ctx, key: ProcKey) -> Certificate {
    let m = cx.m;
    let p = m.proc(key).expect("known process");
    let end = p.end.as_ref().expect("ended process");
    let cls = cause::classify(cx, key);
    // A kernel path or idiom recognised (mechanism.rs) may name the kind.
    let refined = mechanism::refine(cx, key, &cls);
    let mut cls = match &refined {
        Some(r) => Classified {
            kind: r.kind,
            ..cls
        },
        None => cls,
    };
    let fatal = cls.fatal.map(|i| &m.signals[i]);
    // The tracer signalled a process it had already logged as leaked: that
    // is `--leaks kill` cleaning up, not a forwarded signal.
    let leaked = p
        .leak()
        .zip(fatal)
        .is_some_and(|(l, s)| l.at.seq < s.ev.at.seq);
    cls.cancelled &= !leaked;
    cls.timed_out &= !leaked;
    let reraised = cls.reraised.map(|i| &m.signals[i]);

    let mut process = cx.proc_ref(key, end.t);
    // The tracer's fork that failed to exec the command: named by the
    // command it was to become (it never exec'd, as the prose says).
    if let Some(nr) = m.not_run.as_ref().filter(|_| cls.kind == CauseKind::NotRun) {
        process.command = nr.command.join(" ");
        process.argv = nr.command.clone();
        process.argv_inherited = true;
    }
    let victim = Victim {
        process,
        ancestry: cx.ancestry(key, end.t),
        execs: p
            .execs
            .iter()
            .map(|e| ExecRef {
                seq: e.seq,
                time: cx.wall(e.t),
                filename: e.filename.to_string(),
                argv: e.argv.to_vec(),
                argv_truncated: e.argv_truncated,
            })
            .collect(),
        started_at: cx.wall(key.start),
        ended_at: cx.wall(end.t),
        end_t: end.t,
        end_seq: end.seq,
        lifetime_ns: p.lifetime_ns().unwrap_or(0),
        status: end.status.clone(),
        exit_code_raw: end.exit_code,
        core_dumped: matches!(
            end.status,
            ExitStatus::Signaled {
                core_dumped: true,
                ..
            }
        ),
        children: p.children.len(),
        threads: p.threads.len(),
        test: cx.test_at(key, None, end.t),
        worker: cx.worker_of(key),
    };

    let blames_sender = matches!(
        cls.kind,
        CauseKind::KilledInRun
            | CauseKind::KilledOutsideRun
            | CauseKind::Tracer
            | CauseKind::SelfInflicted
            | CauseKind::ParentDeathSignal
            | CauseKind::OwnGroupKill
            | CauseKind::TimeoutFired
    );
    let killer = fatal.filter(|_| blames_sender).map(|s| killer(cx, s, key));
    let oom = cls.oom.map(|o| oom_info(cx, o));
    let history = history(cx, key, end.t, cls.fatal);
    let (rank, rank_reason) = match refined.as_ref().and_then(|r| r.rank.clone()) {
        Some(r) => r,
        None => super::rank::rank(
            &cls,
            killer.as_ref().map(|k| k.relation),
            fatal.map(|s| s.ev.sig),
        ),
    };
    let reraise_call = reraised.map(|s| {
        cx.call_of(s).map_or_else(
            || format!("an uncaptured call (si_code {})", s.ev.code_name),
            |(sc, a, t)| w::call_notation(&sc, a, t, &s.ev.sig_name),
        )
    });
    let earlier = cls.caught_earlier.map(|i| {
        let s = &m.signals[i];
        (
            s.ev.sig_name.to_string(),
            cx.proc_ref(s.sender, s.ev.at.t),
            s.ev.at.t,
        )
    });
    // A SIGKILL that came after a request to stop the victim survived (it
    // caught or ignored a SIGTERM): the headline says so, or the reader
    // wonders why a SIGKILL was needed.
    let survived = fatal
        .filter(|s| s.ev.sig == cause::SIGKILL && cause::sent_by_process(s))
        .and_then(|k| {
            p.signals_in()
                .iter()
                .rev()
                .map(|&i| &m.signals[i])
                .find(|s| {
                    s.ev.at.seq < k.ev.at.seq
                        && cause::sent_by_process(s)
                        && super::caught::is_shutdown(s.ev.sig)
                        && matches!(s.ev.result.as_str(), "delivered" | "ignored")
                })
        })
        .map(|s| {
            // The killer is named just before: the same sender is its pid.
            let who = if fatal.is_some_and(|k| k.sender == s.sender) {
                format!("pid {}", s.sender.pid)
            } else if m.is_tracer(s.sender) {
                format!("the tracer (pid {})", s.sender.pid)
            } else {
                proc_phrase(&cx.proc_ref(s.sender, s.ev.at.t))
            };
            let gap = fatal.map_or(0, |k| k.ev.at.t.saturating_sub(s.ev.at.t));
            let how = if s.ev.result.as_str() == "ignored" {
                "that it ignored"
            } else {
                "that it caught and survived"
            };
            format!(
                ", {} after a {} from {who} {how}",
                w::duration(gap),
                s.ev.sig_name
            )
        });
    let forwarded_from = cls.forwarded_from.map(|i| {
        let s = &m.signals[i];
        (cx.proc_ref(s.sender, s.ev.at.t), s.ev.sig_name.to_string())
    });
    let facts = summary::Facts {
        forwarded_from: forwarded_from.as_ref(),
        survived: survived.as_deref(),
        victim: &victim,
        fatal,
        killer: killer.as_ref(),
        oom: oom.as_ref(),
        leaked,
        reraise_call: reraise_call.as_deref(),
        earlier: earlier.as_ref(),
        not_run: m.not_run.as_ref(),
    };
    let summary = match &refined {
        Some(mechanism::Refined {
            summary: Some(s), ..
        }) => s.clone(),
        _ => {
            let s = summary::summary(&cls, &facts);
            let suffix = refined.as_ref().and_then(|r| r.suffix.as_deref());
            format!("{s}{}", suffix.unwrap_or(""))
        }
    };
    // Where it crashed, from the crash_stack record of the signal it died
    // of. An interpreter's native frames are its own machinery: its words
    // (last words) say more, so its headline stays as it was.
    let died_of = match &end.status {
        ExitStatus::Signaled { signal, .. } => Some(*signal),
        ExitStatus::Exited { .. } => None,
    };
    let crash = super::crash::crash_ref(p, died_of);
    let interpreter = p.comm.as_deref().is_some_and(super::crash::is_interpreter);
    let summary = match crash
        .as_ref()
        .filter(|c| !interpreter && !c.clause.is_empty())
    {
        Some(c) if cls.kind == CauseKind::Fault => {
            let sig = fatal.map_or_else(
                || crate::eventlog::signal_name(died_of.unwrap_or(0)),
                |s| s.ev.sig_name.to_string(),
            );
            let code = fatal.map(|s| s.ev.code_name.as_str()).unwrap_or("?");
            let fault = c
                .fault
                .as_deref()
                .map_or_else(|| format!(" ({code})"), |f| format!(": {f} ({code})"));
            let handled = reraise_call
                .as_deref()
                .map(|call| format!("; its handler caught it and re-raised it via {call}"))
                .unwrap_or_default();
            let core = if victim.core_dumped {
                ", core dumped"
            } else {
                ""
            };
            format!("died of {sig}{fault} in {}{handled}{core}", c.clause)
        }
        Some(c) => format!("{summary}, in {}", c.clause),
        None => summary,
    };
    // A process-sent signal that came from no kill syscall: the kernel path
    // that sent it (cgroup.kill) is the mechanism.
    let uncaptured = fatal
        .filter(|s| killer.is_some() && cx.call_of(s).is_none())
        .and_then(|s| mechanism::uncaptured_call(cx, s))
        .map(|(_, _, m)| m);
    let cause = Cause {
        kind: cls.kind,
        summary,
        signal: fatal.map(|s| signal_ref(cx.m, s)),
        handled_then_exited: cls.handled_then_exited,
        reraised: reraised.map(|s| signal_ref(cx.m, s)),
        cancelled: cls.cancelled,
        forwarded_from: forwarded_from.map(|(p, _)| p),
        mechanism: refined
            .as_ref()
            .and_then(|r| r.mechanism.clone())
            .or(uncaptured),
    };
    let last_words = p.last_words().map(|l| LastWordsRef {
        seq: l.at.seq,
        text: l.text.clone(),
        bytes_total: l.bytes_total,
        truncated: l.truncated,
        to_null: l.to_null,
        // Quoted as a terminal showed it: no colour codes, no control bytes.
        line: quote::quote_line(&crate::text::display_text(&l.text)),
    });
    // A death without a signal has no sender to name: what the process said
    // last is the best lead, so the headline (and the verdict) quote it —
    // saying so when it said it to /dev/null: no one saw it, yet a worker
    // whose parent threw its stderr away is the death tracer exists for.
    // (A short probe saying it to /dev/null gets no certificate: is_worker.)
    let said = match (cls.kind, last_words.as_ref()) {
        (CauseKind::NonzeroExit, Some(l)) => match (&l.line, l.to_null) {
            (Some(line), false) => format!(" — last words: `{line}`"),
            (Some(line), true) => format!(" — last words, to /dev/null: `{line}`"),
            (None, _) => String::new(),
        },
        _ => String::new(),
    };
    let tests = super::wording::tests_phrase(victim.test.as_ref(), killer.as_ref());
    let tests = if tests.is_empty() {
        super::wording::workers_phrase(victim.worker.as_deref(), killer.as_ref())
    } else {
        tests
    };
    let headline = format!(
        "{} {}{said}{tests}",
        proc_phrase(&victim.process),
        cause.summary
    );

    let mut evidence: Vec<u64> = Vec::new();
    evidence.extend(p.fork.as_ref().map(|f| f.seq));
    evidence.extend(p.execs.iter().map(|e| e.seq));
    evidence.extend(history.iter().map(|h| h.signal.seq));
    evidence.extend(fatal.map(|s| s.ev.at.seq));
    evidence.extend(
        fatal
            .and_then(|s| s.kill_call())
            .map(|k| m.kill_calls[k].ev.at.seq),
    );
    // The victim's own re-raise stays in the evidence: it is how it died.
    evidence.extend(reraised.map(|s| s.ev.at.seq));
    evidence.extend(
        reraised
            .and_then(|s| s.kill_call())
            .map(|k| m.kill_calls[k].ev.at.seq),
    );
    evidence.extend(cls.oom.map(|o| m.ooms[o].ev.at.seq));
    if let Some(tid) = cls.group_exit_tid {
        evidence.extend(
            p.thread_exits()
                .iter()
                .filter(|x| x.tid == tid)
                .map(|x| x.seq),
        );
    }
    evidence.extend(refined.iter().flat_map(|r| r.evidence.iter().copied()));
    evidence.push(end.seq);
    evidence.extend(last_words.as_ref().map(|l| l.seq));
    evidence.extend(crash.as_ref().map(|c| c.seq));
    evidence.sort_unstable();
    evidence.dedup();

    Certificate {
        id: 0,
        rank,
        rank_reason,
        headline,
        victim,
        cause,
        killer,
        oom,
        history,
        last_words,
        crash,
        evidence,
        consequence_of: None,
        consequences: Vec::new(),
    }
}

pub(crate) fn signal_ref(m: &Model, s: &SignalEv) -> SignalRef {
    SignalRef {
        seq: s.ev.at.seq,
        t: s.ev.at.t,
        time: m.time_at(&s.ev.at),
        sig: s.ev.sig,
        sig_name: s.ev.sig_name.to_string(),
        code: s.ev.code,
        code_name: s.ev.code_name.to_string(),
        result: s.ev.result.to_string(),
        target_tid: s.ev.target.tid,
        group: s.ev.group,
    }
}

fn killer(cx: &Ctx, s: &SignalEv, victim: ProcKey) -> Killer {
    let k = s.kill_call().map(|k| &cx.m.kill_calls[k].ev);
    let call = cx.call_of(s);
    let target_ns = call
        .as_ref()
        .and_then(|(sc, arg, _)| cx.target_ns(s.sender, sc, *arg, s.ev.at.t));
    let (aimed_at, notation) = match &call {
        Some((sc, arg, tid)) if sc == "pidfd_send_signal" => (
            w::aimed_through_pidfd(*arg, s.ev.target.pid),
            w::call_notation(sc, *arg, *tid, &s.ev.sig_name),
        ),
        Some((sc, arg, tid)) => (
            w::aimed_in_ns(&w::aimed_at(sc, *arg, *tid), target_ns.as_ref()),
            w::call_notation(sc, *arg, *tid, &s.ev.sig_name),
        ),
        None => match mechanism::uncaptured_call(cx, s) {
            Some((aimed, call, _)) => (aimed, call),
            None => (
                format!("pid {} (syscall not captured)", s.ev.target.pid),
                format!("an uncaptured call (si_code {})", s.ev.code_name),
            ),
        },
    };
    Killer {
        process: cx.proc_ref(s.sender, s.ev.at.t),
        tid: s.ev.sender.tid,
        ancestry: cx.ancestry(s.sender, s.ev.at.t),
        relation: cause::relation(cx.m, s.sender, victim),
        syscall: call.as_ref().map(|c| c.0.clone()),
        target_arg: call.as_ref().map(|c| c.1),
        tid_arg: call.as_ref().and_then(|c| c.2),
        aimed_at,
        target_ns,
        call: notation,
        call_seq: k.map(|k| k.at.seq),
        deliveries: k.map(|k| k.deliveries),
        test: cx.test_at(s.sender, Some(s.ev.sender.tid), s.ev.at.t),
        worker: cx.worker_of(s.sender),
    }
}

fn oom_info(cx: &Ctx, o: usize) -> OomInfo {
    let oom = &cx.m.ooms[o];
    OomInfo {
        seq: oom.ev.at.seq,
        time: oom.ev.at.time.clone(),
        victim_tid: oom.ev.victim_tid,
        memcg: oom.ev.memcg.clone(),
        rss: oom.ev.rss.clone(),
        oom_score_adj: oom.ev.oom_score_adj,
        limit_bytes: oom.ev.memcg.as_ref().and_then(|m| m.limit_bytes),
        trigger: cx.proc_ref(oom.trigger, oom.ev.at.t),
        trigger_tid: oom.ev.trigger.tid,
        trigger_is_victim: Some(oom.trigger) == oom.victim,
        group: super::oom_group::group_of(cx.m, o),
    }
}

fn history(cx: &Ctx, key: ProcKey, end_t: u64, fatal: Option<usize>) -> Vec<HistoryEntry> {
    let m = cx.m;
    let p = m.proc(key).expect("known");
    p.signals_in()
        .iter()
        .copied()
        .filter(|&i| m.signals[i].ev.sig != SIGCHLD && m.signals[i].ev.at.t <= end_t)
        .map(|i| {
            let s = &m.signals[i];
            let by_kernel = !cause::sent_by_process(s);
            // A timer of its own fires from whichever task is on the CPU:
            // the sender is the victim's timer, never that bystander.
            let own_timer = super::timer_source(s.ev.sig, s.ev.code).is_some();
            let sender = if own_timer { key } else { s.sender };
            HistoryEntry {
                signal: signal_ref(m, s),
                since_start_ns: s.ev.at.t.saturating_sub(key.start),
                sender: cx.proc_ref(sender, s.ev.at.t),
                raised_by_kernel: by_kernel,
                relation: (!by_kernel).then(|| cause::relation(m, s.sender, key)),
                call: cx
                    .call_of(s)
                    .map(|(sc, a, t)| w::call_notation(&sc, a, t, &s.ev.sig_name)),
                fatal: Some(i) == fatal,
            }
        })
        .collect()
}
