//! A certificate's cause in one clause: the headline after the victim.
use super::{
    cause::Classified,
    types::*,
    wording::{self as w, proc_phrase},
};
use crate::{eventlog::ExitStatus, model::SignalEv};

/// What `summary` words a death from.
pub(super) struct Facts<'a> {
    pub victim: &'a Victim,
    pub fatal: Option<&'a SignalEv>,
    pub killer: Option<&'a Killer>,
    pub oom: Option<&'a OomInfo>,
    pub leaked: bool,
    /// The victim's re-raise of the caught signal, in C notation.
    pub reraise_call: Option<&'a str>,
    /// A signal it had caught that is not taken as the cause of its exit.
    pub earlier: Option<&'a (String, ProcRef, u64)>,
    /// The command could not be run.
    pub not_run: Option<&'a crate::model::NotRun>,
    /// The run's own process that signalled the tracer, and the signal.
    pub forwarded_from: Option<&'a (ProcRef, String)>,
    /// ", 2.0 s after a SIGTERM from X that it caught and survived": the
    /// request to stop a fatal SIGKILL followed.
    pub survived: Option<&'a str>,
}

/// The cause in one clause, following the victim's name in the headline.
pub(super) fn summary(cls: &Classified, f: &Facts) -> String {
    let (v, fatal) = (f.victim, f.fatal);
    let sig = fatal.map_or_else(
        || match &v.status {
            ExitStatus::Signaled { name, .. } => name.clone(),
            ExitStatus::Exited { .. } => "a signal".into(),
        },
        |s| s.ev.sig_name.to_string(),
    );
    let core = if v.core_dumped { ", core dumped" } else { "" };
    let chain = cls.reraised.is_some() || cls.handled_then_exited.is_some();
    let lead = if chain {
        format!("caught {sig}")
    } else {
        format!("killed by {sig}")
    };
    match (cls.kind, f.killer) {
        (CauseKind::KilledInRun | CauseKind::KilledOutsideRun, Some(k)) if chain => {
            format!("{lead} {}, {}", by_process(cls, f, k), ended(cls, f, core))
        }
        (CauseKind::KilledInRun | CauseKind::KilledOutsideRun, Some(k)) => {
            format!(
                "{lead} {}{}",
                by_process(cls, f, k),
                f.survived.unwrap_or("")
            )
        }
        (CauseKind::Tracer, Some(k)) => by_tracer(cls, f, k, &lead, chain, core),
        (CauseKind::SelfInflicted, Some(k)) => {
            format!(
                "{lead}, sent by itself via {} (abort, raise or kill of self){core}",
                k.call
            )
        }
        (CauseKind::ParentDeathSignal, Some(k)) => {
            let then = if chain {
                format!(", {}", ended(cls, f, core))
            } else {
                String::new()
            };
            format!(
                "{lead}, its parent-death signal, as its parent {} exited{then}",
                proc_phrase(&k.process)
            )
        }
        (CauseKind::Oom, _) => oom_killed(f.oom),
        (CauseKind::Fault, _) => {
            let code = fatal.map(|s| s.ev.code_name.as_str()).unwrap_or("?");
            let handled = f
                .reraise_call
                .map(|call| format!("; its handler caught it and re-raised it via {call}"))
                .unwrap_or_default();
            format!(
                "crashed: {sig} ({code}) raised by the kernel on a faulting access{handled}{core}"
            )
        }
        (CauseKind::Sigpipe, _) => format!("{lead}: it wrote to a pipe nobody was reading"),
        (CauseKind::Kernel, _) => {
            let code = fatal.map(|s| s.ev.code_name.as_str()).unwrap_or("?");
            format!("{lead} from the kernel (si_code {code}), not from a process")
        }
        (CauseKind::GroupExit, _) => format!(
            "died of {sig} when its thread {} took the whole process down (group exit)",
            cls.group_exit_tid.unwrap_or(0)
        ),
        (CauseKind::NonzeroExit, _) => nonzero_exit(cls, f),
        (CauseKind::NotRun, _) => not_run(f),
        _ => format!(
            "died of {sig}, but no signal event for it was recorded (lost events or a missing hook)"
        ),
    }
}

/// "from X, its parent, via kill(…)": the sending process, and the
/// thread it aimed at when not the leader.
fn by_process(cls: &Classified, f: &Facts, k: &Killer) -> String {
    let (v, fatal) = (f.victim, f.fatal);
    let note = match (&k.syscall, k.target_arg) {
        (Some(sc), Some(arg)) => w::aim_note(sc, arg, k.tid_arg),
        _ => String::new(),
    };
    // A signal aimed at one thread that is not the leader: say which, and
    // that it still ended the whole process.
    let thread = fatal
        .filter(|s| s.ev.target.tid != v.process.pid && !s.ev.group)
        .filter(|_| cls.reraised.is_none() && cls.handled_then_exited.is_none())
        .map(|s| {
            let aim = if note.is_empty() {
                format!(" — aimed at its thread {}", s.ev.target.tid)
            } else {
                String::new()
            };
            format!("{aim}, which took the whole process down")
        })
        .unwrap_or_default();
    format!(
        "from {}, {}, via {}{note}{thread}",
        proc_phrase(&k.process),
        w::relation_phrase(k.relation),
        k.call
    )
}

/// How a process that caught the signal ended: the chain in words.
fn ended(cls: &Classified, f: &Facts, core: &str) -> String {
    let (v, fatal) = (f.victim, f.fatal);
    match (f.reraise_call, cls.handled_then_exited) {
        (Some(call), _) => format!("and re-raised it on itself via {call}{core}"),
        (None, Some(code)) => {
            let after = fatal.map_or(0, |s| v.end_t.saturating_sub(s.ev.at.t));
            format!("and exited with code {code} {} later", w::duration(after))
        }
        (None, None) => String::new(),
    }
}

/// Killed by the tracer itself: how, and why it did (a leak, a
/// cancellation, a forwarded signal, its timeout).
fn by_tracer(
    cls: &Classified,
    f: &Facts,
    k: &Killer,
    lead: &str,
    chain: bool,
    core: &str,
) -> String {
    let via = k
        .syscall
        .as_ref()
        .map(|_| format!(" via {}", k.call))
        .unwrap_or_default();
    let inside = f.forwarded_from.map(|(p, sig)| {
        format!(
            "it forwarded the {sig} that {}, a process of the run, sent to the tracer \
             (no CI cancellation)",
            proc_phrase(p)
        )
    });
    let why = if f.leaked {
        "it outlived the command and `--leaks kill` removed it"
    } else if let Some(inside) = &inside {
        inside
    } else if cls.cancelled {
        "the run was cancelled (a signal to the tracer, forwarded to the job)"
    } else if cls.timed_out {
        "its `--timeout` expired and the tracer stopped the run"
    } else {
        "a forwarded signal or the tracer's timeout"
    };
    let then = if chain {
        format!(", {}", ended(cls, f, core))
    } else {
        f.survived.unwrap_or("").to_string()
    };
    format!(
        "{lead} from the tracer (pid {}){via}{then}: {why}",
        k.process.pid
    )
}

/// The OOM killer's kill, with its memcg, group kill, limit and rss.
fn oom_killed(oom: Option<&OomInfo>) -> String {
    let mut s = "killed by the kernel OOM killer".to_string();
    if let Some(o) = oom {
        let mut facts = Vec::new();
        let memcg = o
            .memcg
            .as_ref()
            .map(|mc| mc.path.as_deref().unwrap_or(&mc.name));
        match (&o.group, memcg) {
            (Some(g), Some(path)) => {
                s = format!("{s} in one group kill of memcg {path}");
                facts.push(format!(
                    "memory.oom.group: its {} processes at once",
                    g.victims
                ));
            }
            (_, Some(path)) => facts.push(format!("memcg {path}")),
            (_, None) => {}
        }
        if let Some(l) = o.limit_bytes {
            facts.push(format!("limit {}", w::bytes(l)));
        }
        if let Some(r) = &o.rss {
            let rss = (r.anon_rss_kb + r.file_rss_kb + r.shmem_rss_kb) * 1024;
            facts.push(format!("rss {}", w::bytes(rss)));
        }
        if !facts.is_empty() {
            s = format!("{s} ({})", facts.join(", "));
        }
    }
    s
}

/// An exit with a nonzero code: the status, a shell's 128+N, and whatever
/// signal came before it.
fn nonzero_exit(cls: &Classified, f: &Facts) -> String {
    let v = f.victim;
    // Shells report a child killed by signal N as 128+N: say so, or
    // a reader hunts for a signal this process never received.
    let hint = match v.status {
        ExitStatus::Exited { code } if code > 128 && code < 128 + 65 => format!(
            " (128+{}: how shells report a child killed by that signal)",
            crate::eventlog::signal_name(code - 128)
        ),
        _ => String::new(),
    };
    // A caught signal is never "no signal involved", even when it
    // came too long before the exit to be blamed.
    let signals = match f.earlier {
        Some((name, from, t)) => format!(
            "; it had caught {name} from {} {} before",
            proc_phrase(from),
            w::duration(v.end_t.saturating_sub(*t))
        ),
        None if cls.cancelled => ", after the run was cancelled".into(),
        None if f.forwarded_from.is_some() => {
            let (p, sig) = f.forwarded_from.expect("checked");
            format!(
                ", after {}, a process of the run, sent {sig} to the tracer, which \
                 stopped the run",
                proc_phrase(p)
            )
        }
        None => ", no signal involved".into(),
    };
    format!(
        "{}{hint} after {}{signals}",
        w::status_phrase(&v.status),
        w::duration(v.lifetime_ns)
    )
}

/// The command that could not be run, and what executing it failed with.
fn not_run(f: &Facts) -> String {
    let nr = f.not_run.expect("a not-run cause has its facts");
    let interpreter = nr.reason.starts_with("its interpreter");
    let shell = match nr.code {
        Some(127) if interpreter => {
            "; tracer exited 127, as a shell does for a script whose interpreter is missing"
        }
        Some(127) => "; tracer exited 127, as a shell does for a command not found",
        Some(126) => "; tracer exited 126, as a shell does for a command it cannot execute",
        _ => "",
    };
    let program = nr.command.first().map_or("", String::as_str);
    // The tracer's own explanation ("its interpreter … was not
    // found") reads as a sentence; an OS error as what it failed with.
    let how = if nr.reason.starts_with("its ") {
        ": "
    } else {
        " with "
    };
    format!(
        "could not be run: executing `{}` failed{how}{}{shell}",
        w::short_command(program),
        nr.reason
    )
}
