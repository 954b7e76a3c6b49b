//! The idioms among kernel causes: a pipeline's reader going away, a kill
//! of one's own group, coreutils timeout(1), and a parent-death signal
//! fired by a parent *thread*.
use super::{mech, refined, Refined};
use crate::{
    analysis::{
        cause::{relation, Classified},
        types::*,
        wording::{self as w, proc_phrase},
        Ctx,
    },
    eventlog::{ExitStatus, ProcKey},
    model::{End, SignalEv},
};

// SIGCONT: timeout(1) sends it after its signal; it stops nobody.
use tracer_common::signals::{SIGALRM, SIGCONT};
/// coreutils timeout(1)'s exit status when its time limit fired.
const TIMEOUT_STATUS: i32 = 124;

/// SIGPIPE: the kernel raised it because the pipe's read end was closed.
/// The reader is inferred from the pipeline's shape: a sibling or child of
/// the writer that lived alongside it and ended closest before the SIGPIPE,
/// else closest after it (within the slack above), else its parent. The
/// writer died of it, re-raised it on itself (Go), or exited on the failed
/// write (Python, Node: analysis/epipe.rs); all three rank by the reader.
pub(super) fn pipe_reader(
    cx: &Ctx,
    key: ProcKey,
    cls: &Classified,
    s: &SignalEv,
) -> Option<Refined> {
    let m = cx.m;
    let how = writer_end(cx, key, cls)?;
    let Some((rk, end)) = reader_of(cx, key, s) else {
        return exit_without_reader(&how, cls);
    };
    let r = cx.proc_ref(rk, end.t);
    let rel = w::relation_phrase(relation(m, rk, key));
    let t = s.ev.at.t;
    let apart = w::duration(t.abs_diff(end.t));
    let normal = matches!(end.status, ExitStatus::Exited { code: 0 });
    let fate = match &end.status {
        ExitStatus::Exited { code } => format!("exited with code {code}"),
        ExitStatus::Signaled { name, .. } => format!("was killed by {name}"),
    };
    let mut mech_ = mech(
        MechanismKind::PipeReaderGone,
        format!("its reader is inferred: {rel}, alive alongside it, that ended closest to the SIGPIPE ({apart} apart)"),
    );
    mech_.process = Some(r.clone());
    let (rank, summary) = if normal {
        (
            (
                Rank::Expected,
                "its pipe's reader finished first: the normal end of a `producer | head` pipeline",
            ),
            format!(
                "{how}: its reader {}, {rel}, had finished and closed the pipe (it {fate}, {apart} apart) — the normal end of a `producer | head` pipeline",
                proc_phrase(&r)
            ),
        )
    } else {
        (
            (Rank::Unexpected, "wrote to a pipe whose reader died"),
            format!(
                "{how}: its reader {}, {rel}, had died (it {fate}, {apart} apart)",
                proc_phrase(&r)
            ),
        )
    };
    let mut out = refined(CauseKind::Sigpipe, rank, summary, mech_);
    out.evidence.push(end.seq);
    Some(out)
}

/// How the writer ended, the clause before its reader: killed by the
/// kernel's SIGPIPE, by its own re-raise of it, or by its own exit.
fn writer_end(cx: &Ctx, key: ProcKey, cls: &Classified) -> Option<String> {
    let end = cx.m.proc(key)?.end.as_ref()?;
    Some(match (&end.status, cls.reraised) {
        (ExitStatus::Exited { code }, _) => format!(
            "exited with code {code} after a write to its pipe failed with EPIPE (the kernel's SIGPIPE, which it ignores or handles, came first)"
        ),
        (ExitStatus::Signaled { .. }, Some(i)) => {
            let r = &cx.m.signals[i];
            let call = cx.call_of(r).map_or_else(
                || "an uncaptured call".to_string(),
                |(sc, a, t)| w::call_notation(&sc, a, t, &r.ev.sig_name),
            );
            format!(
                "killed by SIGPIPE, which it re-raised on itself via {call} after a write to its pipe failed with EPIPE (as Go programs do)"
            )
        }
        (ExitStatus::Signaled { .. }, None) => "killed by SIGPIPE".to_string(),
    })
}

/// A write that failed with EPIPE, then an exit, and no reader in the run
/// to rank it by (the pipe went to a process outside it): a non-zero exit,
/// said as such.
fn exit_without_reader(how: &str, cls: &Classified) -> Option<Refined> {
    if cls.reraised.is_some() || !how.starts_with("exited") {
        return None;
    }
    Some(refined(
        CauseKind::NonzeroExit,
        (
            Rank::NonzeroExit,
            "exited non-zero after a write to a pipe with no reader; the reader is not in the run",
        ),
        format!("{how}; its reader is not in the run"),
        mech(
            MechanismKind::PipeReaderGone,
            "its write failed with EPIPE: the pipe's read end was closed; no process of the run was its reader".into(),
        ),
    ))
}

/// The process that read `key`'s pipe and ended by the SIGPIPE `s`, with
/// its end.
fn reader_of<'a>(cx: &'a Ctx, key: ProcKey, s: &SignalEv) -> Option<(ProcKey, &'a End)> {
    let m = cx.m;
    let p = m.proc(key)?;
    let siblings = p
        .parent
        .and_then(|pp| m.proc(pp))
        .map(|pp| pp.children.clone())
        .unwrap_or_default();
    let t = s.ev.at.t;
    // A child that ended before the writer became the image that wrote
    // did not read what that image wrote: a version manager's shim
    // (pyenv's `python3` is bash that execs pyenv, then python3) runs its
    // helpers (`pyenv-hooks`) as children first. Ended before the SIGPIPE,
    // such a helper once beat `head`, whose exit the kernel reported just
    // after it (CI's run, at load).
    let image = p.last_exec().map_or(key.start, |e| e.t);
    siblings
        .into_iter()
        .map(|k| (k, 0u8, key.start))
        .chain(p.children.iter().map(|&k| (k, 0u8, image)))
        .chain(p.parent.map(|k| (k, 1u8, key.start)))
        .filter(|&(k, _, _)| k != key)
        .filter_map(|(k, tier, from)| Some((k, tier, from, m.proc(k)?.end.as_ref()?)))
        .filter(|(_, _, from, e)| e.t >= *from && e.t <= t + super::READER_EXIT_AFTER_NS)
        .min_by_key(|(_, tier, _, e)| (*tier, e.t > t, e.t.abs_diff(t), e.seq))
        .map(|(k, _, _, e)| (k, e))
}

/// kill(0, …), kill(-pgid, …) or kill(-1, …) that reached the caller too.
/// A shell's kill of its own group is its cleanup (`trap 'kill 0' EXIT`,
/// `kill -- -$$`): expected, as the shell meant to stop its jobs and
/// itself; any other program killing its own group is a mistake worth a
/// look. A shell catches the signal while its trap runs and re-raises it
/// after (bash): the re-raise is said, as for any caught signal.
pub(super) fn own_group_kill(
    cx: &Ctx,
    key: ProcKey,
    cls: &Classified,
    s: &SignalEv,
) -> Option<Refined> {
    let (sc, arg, tid) = cx.call_of(s)?;
    if sc != "kill" || arg > 0 {
        return None;
    }
    let call = w::call_notation(&sc, arg, tid, &s.ev.sig_name);
    let what = if arg == -1 {
        "a kill of every process it could signal, itself included"
    } else {
        "a kill of its own process group, which includes itself"
    };
    let reraised = cls.reraised.map(|i| {
        let r = &cx.m.signals[i];
        let how = cx.call_of(r).map_or_else(
            || "an uncaptured call".to_string(),
            |(sc, a, t)| w::call_notation(&sc, a, t, &r.ev.sig_name),
        );
        format!("; it caught it and re-raised it on itself via {how}")
    });
    let end_t = cx.m.proc(key)?.end.as_ref()?.t;
    let shell = runs_shell(cx, key, end_t);
    let (rank, cleanup) = if shell {
        (
            (
                Rank::Expected,
                "cleanup: a shell's kill of its own process group (as `trap 'kill 0' EXIT` does) stops its jobs and the shell",
            ),
            ": the shell's cleanup of its jobs (as `trap 'kill 0' EXIT` does)",
        )
    } else {
        (
            (Rank::Unexpected, "killed by its own process-group kill"),
            "",
        )
    };
    Some(refined(
        CauseKind::OwnGroupKill,
        rank,
        format!(
            "killed by {} from its own {call} — {what}{cleanup}{}",
            s.ev.sig_name,
            reraised.unwrap_or_default()
        ),
        mech(MechanismKind::OwnGroupKill, format!("{call}: {what}")),
    ))
}

/// The program `key` runs at `t` is a shell (by its exec'd file or argv[0]);
/// a shell's subshell (a fork that never exec'd) runs its parent's shell.
fn runs_shell(cx: &Ctx, key: ProcKey, t: u64) -> bool {
    let r = cx.proc_ref(key, t);
    r.filename
        .as_deref()
        .or(r.argv.first().map(String::as_str))
        .is_some_and(crate::text::command::is_shell)
}

fn is_timeout(cx: &Ctx, key: ProcKey, t: u64) -> bool {
    let r = cx.proc_ref(key, t);
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    !r.argv_inherited
        && (r.argv.first().map(|a| base(a)).as_deref() == Some("timeout")
            || r.filename.as_deref().map(base).as_deref() == Some("timeout"))
}

/// The signals timeout(1) sent once its limit fired: the first one aimed
/// at a single pid is its command.
fn timeout_victim<'a>(cx: &'a Ctx, key: ProcKey) -> Option<(&'a SignalEv, ProcRef)> {
    // The first such kill call's first signal (ties keep the first).
    let (_, s) =
        cx.m.signals
            .iter()
            .filter_map(|s| {
                let i = s.kill_call()?;
                let k = &cx.m.kill_calls[i];
                (k.sender() == key && k.ev.target_arg > 0 && k.ev.sig != SIGCONT).then_some((i, s))
            })
            .min_by_key(|&(i, _)| i)?;
    Some((s, cx.proc_ref(s.target, s.ev.at.t)))
}

/// timeout(1) itself: exit 124, or killed by its own group kill (`-s KILL`:
/// coreutils signals its command, then its whole process group).
pub(super) fn timeout_itself(
    cx: &Ctx,
    key: ProcKey,
    cls: &Classified,
    fatal: Option<&SignalEv>,
) -> Option<Refined> {
    let p = cx.m.proc(key)?;
    let end = p.end.as_ref()?;
    if !is_timeout(cx, key, end.t) {
        return None;
    }
    let own_group = fatal.filter(|s| {
        s.sender == key
            && cx
                .call_of(s)
                .is_some_and(|(sc, arg, _)| sc == "kill" && arg <= 0)
    });
    let exit_124 = cls.kind == CauseKind::NonzeroExit
        && matches!(
            end.status,
            ExitStatus::Exited {
                code: TIMEOUT_STATUS
            }
        );
    if own_group.is_none() && !exit_124 {
        return None;
    }
    let alarm = p
        .signals_in()
        .iter()
        .map(|&i| &cx.m.signals[i])
        .find(|s| s.ev.sig == SIGALRM && s.ev.at.t <= end.t);
    let stopped = timeout_victim(cx, key);
    // Its command may exit 124 by itself: without its alarm or a signal it
    // sent, nothing says the limit fired.
    if alarm.is_none() && stopped.is_none() {
        return None;
    }
    let after = alarm.map_or(String::new(), |a| {
        format!(
            " after {}",
            w::duration(a.ev.at.t.saturating_sub(key.start))
        )
    });
    let cmd = stopped.as_ref().map_or(String::new(), |(s, r)| {
        format!(
            " and stopped its command {} with {}",
            proc_phrase(r),
            s.ev.sig_name
        )
    });
    let summary = match own_group {
        Some(s) => {
            let (sc, arg, tid) = cx.call_of(s).unwrap_or(("kill".into(), 0, None));
            format!(
                "killed by {} from its own {}: its time limit fired{after}{cmd}, then, as coreutils timeout(1) does, it signalled its whole process group, itself included",
                s.ev.sig_name,
                w::call_notation(&sc, arg, tid, &s.ev.sig_name)
            )
        }
        None => format!("exited with code 124: its time limit fired{after}{cmd}"),
    };
    let mut m = mech(
        MechanismKind::Timeout,
        "timeout(1)'s time limit fired (SIGALRM), it signalled its command and exited 124 or died of its own group kill".into(),
    );
    m.process = stopped.as_ref().map(|(_, r)| r.clone());
    let mut out = refined(
        CauseKind::TimeoutFired,
        (
            Rank::NonzeroExit,
            "a timeout fired: timeout(1) stopped its command",
        ),
        summary,
        m,
    );
    out.evidence.extend(alarm.map(|a| a.ev.at.seq));
    out.evidence.extend(stopped.map(|(s, _)| s.ev.at.seq));
    Some(out)
}

/// A process killed by timeout(1): same class and rank (its parent or
/// ancestor stopping it), but the certificate says a timeout fired.
pub(super) fn killed_by_timeout(cx: &Ctx, s: &SignalEv) -> Option<Refined> {
    if !is_timeout(cx, s.sender, s.ev.at.t) {
        return None;
    }
    let limit = cx.proc_ref(s.sender, s.ev.at.t);
    let mut m = mech(
        MechanismKind::Timeout,
        format!(
            "{} stopped it when its time limit fired",
            proc_phrase(&limit)
        ),
    );
    m.process = Some(limit);
    Some(Refined {
        kind: CauseKind::KilledInRun,
        rank: None,
        summary: None,
        suffix: Some(": a timeout fired (timeout(1))".into()),
        mechanism: Some(m),
        evidence: Vec::new(),
    })
}

/// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits,
/// not the parent process: a worker thread that spawns a child and ends
/// kills it while the parent lives on.
pub(super) fn parent_thread_exit(cx: &Ctx, s: &SignalEv) -> Option<Refined> {
    let parent = cx.m.proc(s.sender)?;
    let tid = s.ev.sender.tid;
    let thread_exit = parent.thread_exits().iter().find(|x| x.tid == tid)?;
    if parent.end.as_ref().is_some_and(|e| e.t <= s.ev.at.t) {
        return None;
    }
    let pr = cx.proc_ref(s.sender, s.ev.at.t);
    let mut m = mech(
        MechanismKind::ParentThreadExit,
        format!("thread {tid} of its parent exited; PR_SET_PDEATHSIG fires on the exit of the thread that forked, not of the process"),
    );
    m.process = Some(pr.clone());
    m.thread = Some(tid);
    let mut out = refined(
        CauseKind::ParentDeathSignal,
        (
            Rank::Unexpected,
            "parent-death signal fired by the exit of its parent's forking thread while the parent lived on",
        ),
        format!(
            "killed by {}, its parent-death signal, when thread {tid} of its parent {} — the thread that forked it — exited; the parent process itself lived on",
            s.ev.sig_name,
            proc_phrase(&pr)
        ),
        m,
    );
    out.evidence.push(thread_exit.seq);
    Some(out)
}
