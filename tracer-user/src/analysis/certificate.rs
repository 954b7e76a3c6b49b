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
    model::{End, Model, Process, SignalEv},
};

pub(crate) fn build(cx: &Ctx, key: ProcKey) -> Certificate {
    let d = Death::new(cx, key);
    let (m, p, end, cls) = (cx.m, d.p, d.end, &d.cls);
    let (fatal, reraised) = (d.fatal, d.reraised);
    let victim = d.victim();
    let killer = fatal
        .filter(|_| blames_sender(cls.kind))
        .map(|s| killer(cx, s, key));
    let oom = cls.oom.map(|o| oom_info(cx, o));
    let history = history(cx, key, end.t, cls.fatal);
    let (rank, rank_reason) = d.rank(killer.as_ref());
    let reraise_call = reraised.map(|s| {
        cx.call_of(s).map_or_else(
            || format!("an uncaptured call (si_code {})", s.ev.code_name),
            |(sc, a, t)| w::call_notation(&sc, a, t, &s.ev.sig_name),
        )
    });
    let forwarded_from = cls.forwarded_from.map(|i| {
        let s = &m.signals[i];
        (cx.proc_ref(s.sender, s.ev.at.t), s.ev.sig_name.to_string())
    });
    let summary = d.summary(
        &victim,
        killer.as_ref(),
        oom.as_ref(),
        reraise_call.as_deref(),
        forwarded_from.as_ref(),
    );
    // Where it crashed, from the crash_stack record of the signal it died
    // of. An interpreter's native frames are its own machinery: its words
    // (last words) say more, so its headline stays as it was.
    let died_of = match &end.status {
        ExitStatus::Signaled { signal, .. } => Some(*signal),
        ExitStatus::Exited { .. } => None,
    };
    let crash = super::crash::crash_ref(p, died_of);
    let summary = d.in_crash(
        summary,
        crash.as_ref(),
        died_of,
        &victim,
        reraise_call.as_deref(),
    );
    let cause = d.cause(summary, killer.is_some(), forwarded_from.map(|(p, _)| p));
    let last_words = last_words_ref(p);
    let headline = headline(&victim, &cause, killer.as_ref(), last_words.as_ref());
    let evidence = d.evidence(&history, last_words.as_ref(), crash.as_ref());

    Certificate {
        id: 0,
        rank,
        rank_reason,
        // Known once the cascades are linked (quiet.rs, analyze_model).
        quiet_helper: false,
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

/// One ended process as the classifier and the mechanisms see it: what
/// every part of its certificate is built from.
struct Death<'c, 'm> {
    cx: &'c Ctx<'m>,
    key: ProcKey,
    p: &'m Process,
    end: &'m End,
    cls: Classified,
    /// A kernel path or idiom recognised (mechanism.rs).
    refined: Option<mechanism::Refined>,
    fatal: Option<&'m SignalEv>,
    reraised: Option<&'m SignalEv>,
    /// Killed by `--leaks kill` after being logged as leaked.
    leaked: bool,
}

impl<'c, 'm> Death<'c, 'm> {
    fn new(cx: &'c Ctx<'m>, key: ProcKey) -> Self {
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
            .is_some_and(|(l, s)| l.at.seq < s.ev.at.seq && m.is_tracer(s.sender));
        cls.cancelled &= !leaked;
        cls.timed_out &= !leaked;
        let reraised = cls.reraised.map(|i| &m.signals[i]);
        Death {
            cx,
            key,
            p,
            end,
            cls,
            refined,
            fatal,
            reraised,
            leaked,
        }
    }

    fn victim(&self) -> Victim {
        let (cx, key, p, end, m) = (self.cx, self.key, self.p, self.end, self.cx.m);
        let mut process = cx.proc_ref(key, end.t);
        // The tracer's fork that failed to exec the command: named by the
        // command it was to become (it never exec'd, as the prose says).
        if let Some(nr) = m
            .not_run
            .as_ref()
            .filter(|_| self.cls.kind == CauseKind::NotRun)
        {
            process.command = nr.command.join(" ");
            process.argv = nr.command.clone();
            process.argv_inherited = true;
        }
        Victim {
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
            // At the fatal signal, not at the end: a SIGKILL ends the
            // threads one by one, and the thread that ran the test may exit
            // before the last (a vitest forks worker's main thread did, 1.1
            // ms before the last of its 11 threads).
            test: cx.test_at(key, None, self.fatal.map_or(end.t, |s| s.ev.at.t)),
            worker: cx.worker_of(key),
        }
    }

    /// A mechanism's rank, or the classifier's from the cause and killer.
    fn rank(&self, killer: Option<&Killer>) -> (Rank, String) {
        match self.refined.as_ref().and_then(|r| r.rank.clone()) {
            Some(r) => r,
            None => super::rank::rank(
                &self.cls,
                killer.map(|k| k.relation),
                self.fatal.map(|s| s.ev.sig),
            ),
        }
    }

    /// The cause: its kind and clause, the signals, and the mechanism.
    fn cause(&self, summary: String, has_killer: bool, forwarded_from: Option<ProcRef>) -> Cause {
        let (cx, cls, fatal) = (self.cx, &self.cls, self.fatal);
        // A process-sent signal that came from no kill syscall: the kernel path
        // that sent it (cgroup.kill) is the mechanism.
        let uncaptured = fatal
            .filter(|s| has_killer && cx.call_of(s).is_none())
            .and_then(|s| mechanism::uncaptured_call(cx, s))
            .map(|(_, _, m)| m);
        Cause {
            kind: cls.kind,
            summary,
            signal: fatal.map(|s| signal_ref(cx.m, s)),
            handled_then_exited: cls.handled_then_exited,
            reraised: self.reraised.map(|s| signal_ref(cx.m, s)),
            cancelled: cls.cancelled,
            forwarded_from,
            mechanism: self
                .refined
                .as_ref()
                .and_then(|r| r.mechanism.clone())
                .or(uncaptured),
        }
    }

    /// The cause's clause: a mechanism's own, or the classifier's with a
    /// mechanism's suffix.
    fn summary(
        &self,
        victim: &Victim,
        killer: Option<&Killer>,
        oom: Option<&OomInfo>,
        reraise_call: Option<&str>,
        forwarded_from: Option<&(ProcRef, String)>,
    ) -> String {
        let (cx, m) = (self.cx, self.cx.m);
        let earlier = self.cls.caught_earlier.map(|i| {
            let s = &m.signals[i];
            (
                s.ev.sig_name.to_string(),
                cx.proc_ref(s.sender, s.ev.at.t),
                s.ev.at.t,
            )
        });
        let survived = self.survived();
        let facts = summary::Facts {
            forwarded_from,
            survived: survived.as_deref(),
            victim,
            fatal: self.fatal,
            killer,
            oom,
            leaked: self.leaked,
            reraise_call,
            earlier: earlier.as_ref(),
            not_run: m.not_run.as_ref(),
        };
        match &self.refined {
            Some(mechanism::Refined {
                summary: Some(s), ..
            }) => s.clone(),
            _ => {
                let s = summary::summary(&self.cls, &facts);
                let suffix = self.refined.as_ref().and_then(|r| r.suffix.as_deref());
                // The runner's cancellation (cancel.rs) says who stopped the job.
                let cancel = match self.cls.kind {
                    CauseKind::NonzeroExit => None,
                    _ => self.cls.cancel_reason.as_deref().map(|r| format!(": {r}")),
                };
                format!("{s}{}{}", suffix.unwrap_or(""), cancel.unwrap_or_default())
            }
        }
    }

    /// A SIGKILL that came after a request to stop the victim survived (it
    /// caught or ignored a SIGTERM): the headline says so, or the reader
    /// wonders why a SIGKILL was needed.
    fn survived(&self) -> Option<String> {
        let (cx, m, p, fatal) = (self.cx, self.cx.m, self.p, self.fatal);
        fatal
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
            })
    }

    /// The summary with where it crashed: a fault's whole clause, another
    /// cause's summary followed by the place.
    fn in_crash(
        &self,
        summary: String,
        crash: Option<&CrashRef>,
        died_of: Option<i32>,
        victim: &Victim,
        reraise_call: Option<&str>,
    ) -> String {
        let fatal = self.fatal;
        let interpreter = self
            .p
            .comm
            .as_deref()
            .is_some_and(super::crash::is_interpreter);
        match crash.filter(|c| !interpreter && !c.clause.is_empty()) {
            Some(c) if self.cls.kind == CauseKind::Fault => {
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
            // An interpreter's native stack is its own machinery, but a
            // crash in a native module (an extension, libc under ctypes)
            // is named by that module, unless the interpreter's own words
            // say more.
            None => match crash.filter(|_| interpreter) {
                Some(c)
                    if !self
                        .p
                        .last_words()
                        .is_some_and(|l| super::crash::interpreter_said(&l.text)) =>
                {
                    match super::crash::native_module(c) {
                        Some(m) => format!("{summary}, in native module {m}"),
                        None => summary,
                    }
                }
                _ => summary,
            },
        }
    }

    /// The sequence numbers of every record the certificate rests on.
    fn evidence(
        &self,
        history: &[HistoryEntry],
        last_words: Option<&LastWordsRef>,
        crash: Option<&CrashRef>,
    ) -> Vec<u64> {
        let (m, p, fatal, reraised) = (self.cx.m, self.p, self.fatal, self.reraised);
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
        evidence.extend(self.cls.oom.map(|o| m.ooms[o].ev.at.seq));
        if let Some(tid) = self.cls.group_exit_tid {
            evidence.extend(
                p.thread_exits()
                    .iter()
                    .filter(|x| x.tid == tid)
                    .map(|x| x.seq),
            );
        }
        evidence.extend(self.refined.iter().flat_map(|r| r.evidence.iter().copied()));
        evidence.push(self.end.seq);
        evidence.extend(last_words.map(|l| l.seq));
        evidence.extend(crash.map(|c| c.seq));
        evidence.sort_unstable();
        evidence.dedup();
        evidence
    }
}

/// The kinds whose fatal signal's sender is the one to blame: the killer.
fn blames_sender(kind: CauseKind) -> bool {
    matches!(
        kind,
        CauseKind::KilledInRun
            | CauseKind::KilledOutsideRun
            | CauseKind::Tracer
            | CauseKind::SelfInflicted
            | CauseKind::ParentDeathSignal
            | CauseKind::OwnGroupKill
            | CauseKind::TimeoutFired
    )
}

fn last_words_ref(p: &Process) -> Option<LastWordsRef> {
    p.last_words().map(|l| LastWordsRef {
        seq: l.at.seq,
        text: l.text.clone(),
        bytes_total: l.bytes_total,
        truncated: l.truncated,
        to_null: l.to_null,
        // Quoted as a terminal showed it: no colour codes, no control bytes.
        line: quote::quote_line(&crate::text::display_text(&l.text)),
    })
}

/// Who died, of what, what it said last, and the tests involved.
fn headline(
    victim: &Victim,
    cause: &Cause,
    killer: Option<&Killer>,
    last_words: Option<&LastWordsRef>,
) -> String {
    // A death without a signal has no sender to name: what the process said
    // last is the best lead, so the headline (and the verdict) quote it.
    // Never words it said to /dev/null: no one saw them, and they may not
    // be its program's at all (a version manager's shim says its own to
    // /dev/null, then execs the real program, which fails saying nothing
    // on stderr). The certificate's last words still show them, labelled.
    let said = match (cause.kind, last_words) {
        (CauseKind::NonzeroExit, Some(l)) if !l.to_null => l
            .line
            .as_ref()
            .map(|line| format!(" — last words: `{line}`"))
            .unwrap_or_default(),
        _ => String::new(),
    };
    let tests = super::wording::tests_phrase(victim.test.as_ref(), killer);
    let tests = if tests.is_empty() {
        super::wording::workers_phrase(victim.worker.as_deref(), killer)
    } else {
        tests
    };
    format!(
        "{} {}{said}{tests}",
        proc_phrase(&victim.process),
        cause.summary
    )
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
        memory: memory_growth(cx, oom.ev.at.t),
    }
}

/// The curve before the kill at `t`, its largest process's test named.
fn memory_growth(cx: &Ctx, t: u64) -> Option<crate::resources::story::MemoryGrowth> {
    let mut g = crate::resources::story::memory_growth(&cx.m.resources, t)?;
    if let Some(l) = &mut g.largest {
        let key = ProcKey {
            pid: l.pid,
            start: l.start,
        };
        l.test = cx.test_at(key, None, t).map(|a| a.plain());
    }
    Some(g)
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
