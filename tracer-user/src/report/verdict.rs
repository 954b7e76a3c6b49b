//! The verdict: the first line of every report.
use super::facts::LogFacts;
use crate::analysis::{
    cascade, wording as w, Analysis, Certificate, DeathMention, ForeignSignal, Leftover, Rank,
};

mod clip;
use clip::clip;
use clip::{clip_middle, compact_parens, compact_spans, drop_aside};

// The verdict's most characters, as report.md's first line shows it.
use crate::text::MAX_VERDICT_CHARS as MAX_VERDICT;
/// The shortest a clipped clause gets before the whole line is cut.
const MIN_CLAUSE: usize = 24;
/// The shortest a cause or leak clause gets before the lead is clipped.
const FLOOR: usize = 60;
/// A parenthesis longer than this is cut when the verdict is too long.
const PAREN: usize = 40;
/// A cause's command (code span) longer than this is cut before the cause is.
const SPAN: usize = 32;

/// What a verdict says, before it is sized to [`MAX_VERDICT`].
#[derive(Debug, Clone, Default)]
pub(super) struct Parts {
    /// Clauses that come first, in order: a kill the run sent outside it,
    /// a hang.
    pub lead: Vec<String>,
    /// The lead holds a kill outside the run: "Inside the run: …" follows.
    pub inside: bool,
    /// "2 unexpected deaths", "No unexpected deaths; 1 non-zero exit",
    /// "No unexpected deaths".
    head: String,
    /// One per cause, in rank order (the verdict names at most two).
    mentions: Vec<Mention>,
    /// The mentions are non-zero exits: under a lead clause (a kill that
    /// left the run, a hang) they are routine beside it, and go before
    /// the lead is cut.
    routine_mentions: bool,
    /// "Routine: 1 quiet helper exited non-zero …": the quiet helpers'
    /// exits, counted, never named (analysis/quiet.rs); the first clause
    /// a long verdict drops.
    routine: Option<String>,
    leaks: Option<String>,
    /// Never clipped: a verdict on lossy data says so.
    incomplete: Option<String>,
}

/// One cause as the verdict names it: its headline, and the end of it that
/// tells victim and killer apart (their tests or workers), which a cut
/// keeps.
#[derive(Debug, Clone, Default)]
struct Mention {
    body: String,
    identifies: String,
    /// " (the same call also killed pids …)": the other victims of one
    /// group kill, whose certificates name them.
    also: String,
}

impl Mention {
    fn text(&self) -> String {
        format!("{}{}{}", self.body, self.identifies, self.also)
    }

    /// At most about `max` characters: when it must be cut and has
    /// tests or workers to tell victim and killer apart, the body is cut
    /// before them (and before the other victims of its group kill, which
    /// go to the certificates when there is no room for them).
    fn clipped(&self, max: usize) -> String {
        let whole = self.text();
        let keep = self.identifies.chars().count();
        if whole.chars().count() <= max || keep == 0 || keep + MIN_CLAUSE > max {
            return clip(&whole, max);
        }
        let also = self.also.chars().count();
        if keep + also + MIN_CLAUSE <= max {
            return format!(
                "{}{}{}",
                clip(&self.body, max - keep - also),
                self.identifies,
                self.also
            );
        }
        format!("{}{}", clip(&self.body, max - keep), self.identifies)
    }
}

/// The first line of every report. Names at most two causes: the rest is a
/// scroll away. Never claims "no unexpected deaths" on lossy data unqualified.
pub fn verdict(a: &Analysis, log: &LogFacts) -> String {
    parts(a, log).render()
}

pub(super) fn parts(a: &Analysis, log: &LogFacts) -> Parts {
    // Every death of the rank, in the ranked order: the certificates', and
    // the folded ones' mentions (an analysis folded as it ranked).
    let list = |rank: Rank| {
        let mut all: Vec<DeathMention> = a
            .certificates
            .iter()
            .filter(|c| c.rank == rank)
            .map(DeathMention::of)
            .chain(a.folded_mentions.iter().filter(|m| m.rank == rank).cloned())
            .collect();
        all.sort_by_key(|m| m.id);
        all
    };
    let routine_mentions = a.counts.unexpected == 0;
    let mut routine = None;
    let (head, mentions) = if a.counts.unexpected > 0 {
        let n = a.counts.unexpected;
        (
            w::plural(n, "unexpected death", "unexpected deaths"),
            mentions(&list(Rank::Unexpected)),
        )
    } else if a.counts.nonzero_exit > 0 {
        // A quiet helper's exit is counted, never named: the job's own
        // failure leads (analysis/quiet.rs).
        let (quiet, named): (Vec<DeathMention>, Vec<DeathMention>) =
            list(Rank::NonzeroExit).into_iter().partition(|m| m.quiet);
        routine = quiet_clause(quiet.len());
        match a.counts.nonzero_exit.saturating_sub(quiet.len()) {
            0 => ("No unexpected deaths".to_string(), Vec::new()),
            n => (
                format!(
                    "No unexpected deaths; {}",
                    w::plural(n, "non-zero exit", "non-zero exits")
                ),
                mentions(&named),
            ),
        }
    } else {
        ("No unexpected deaths".to_string(), Vec::new())
    };
    let incomplete = (log.truncated || log.lost_total > 0).then(|| {
        if log.truncated {
            "the log is truncated".to_string()
        } else if log.lost_total == log.lines_skipped {
            skipped_lines(log.lines_skipped)
        } else {
            w::plural(
                log.lost_total as usize,
                "event was lost",
                "events were lost",
            )
        }
    });
    // Sized as shown: a control byte is shown escaped, longer.
    let line = |s: String| crate::text::one_line(&s);
    Parts {
        lead: Vec::new(),
        inside: false,
        head,
        mentions: mentions
            .into_iter()
            .map(|m| Mention {
                body: line(m.body),
                identifies: line(m.identifies),
                also: line(m.also),
            })
            .collect(),
        routine_mentions,
        routine,
        leaks: leaked_phrase(&a.leftovers).map(line),
        incomplete,
    }
}

impl Parts {
    /// The verdict, at most [`MAX_VERDICT`] characters as report.md shows
    /// it: whole when it fits; else one cause named, not two; else the
    /// causes and leaks clipped ("…") as little as fits, down to
    /// [`FLOOR`] characters; else the lead clauses too, down to
    /// [`MIN_CLAUSE`]; else the line cut before its `(incomplete: …)`,
    /// which always stays.
    pub(super) fn render(&self) -> String {
        let len = |s: &str| crate::text::markdown::inline(s).chars().count();
        let fits = |s: &String| len(s) <= MAX_VERDICT;
        let whole = self.with(2, usize::MAX, usize::MAX);
        if fits(&whole) {
            return whole;
        }
        // What a reader needs first is the lead (a kill outside the run,
        // a hang: its subject and its conclusion) and the start of each
        // cause (victim, signal, killer); a long parenthesis (a command
        // line, a holder's story) goes first.
        // What identifies a death (who, by whom, in which test, the pid
        // of a victim outside the run) is kept longest; what is routine
        // beside it goes first: the examples of non-zero exits under a
        // lead clause, then the leak clause.
        let short = self.compacted();
        let lean = short.lean();
        let spans = lean.spans();
        // The leak clause goes before a cause is cut: report.md lists
        // every leftover under it.
        let bare = Parts {
            leaks: None,
            ..spans.clone()
        };
        let tries = [self.with(1, usize::MAX, usize::MAX)]
            .into_iter()
            .chain([short.with(1, usize::MAX, usize::MAX)])
            .chain([lean.with(1, usize::MAX, usize::MAX)])
            .chain(
                (FLOOR..=MAX_VERDICT)
                    .rev()
                    .map(|cap| lean.with_leaks(1, usize::MAX, usize::MAX, cap)),
            )
            .chain([spans.with_leaks(1, usize::MAX, usize::MAX, FLOOR)])
            .chain([bare.with(1, usize::MAX, usize::MAX)])
            .chain(
                (FLOOR..=MAX_VERDICT)
                    .rev()
                    .map(|cap| bare.with(1, usize::MAX, cap)),
            )
            .chain(
                (MIN_CLAUSE..=MAX_VERDICT)
                    .rev()
                    .map(|cap| bare.with(1, cap, cap.min(FLOOR))),
            );
        if let Some(v) = tries.into_iter().find(fits) {
            return v;
        }
        // Only a verdict with many lead clauses gets here: cut the line,
        // keep the qualifier.
        let tail = self.incomplete_clause();
        let v = bare.with(1, MIN_CLAUSE, MIN_CLAUSE);
        let body = v.strip_suffix(&tail).unwrap_or(&v);
        let mut room = MAX_VERDICT.saturating_sub(len(&tail));
        loop {
            let cut = clip(body, room);
            if len(&cut) + len(&tail) <= MAX_VERDICT || room == 0 {
                return cut + &tail;
            }
            room -= 1;
        }
    }

    /// The same parts, each parenthesis over [`PAREN`] characters cut, and
    /// without the quiet helpers' count (report.md's certificates list
    /// them).
    fn compacted(&self) -> Parts {
        let mut p = self.clone();
        p.routine = None;
        p.lead = p
            .lead
            .iter()
            .map(|s| compact_parens(drop_aside(s)))
            .collect();
        p.mentions = p
            .mentions
            .iter()
            .map(|m| Mention {
                body: compact_parens(&m.body),
                identifies: m.identifies.clone(),
                also: m.also.clone(),
            })
            .collect();
        p.leaks = p.leaks.as_deref().map(compact_parens);
        p
    }

    /// Each command of the causes after the victim's (the killer's) cut to
    /// [`SPAN`] characters: the pids beside them stay, and the victim's
    /// name leads whole.
    fn spans(&self) -> Parts {
        let mut p = self.clone();
        for m in &mut p.mentions {
            if let Some(i) = m.body.find(" (pid ") {
                m.body = format!("{}{}", &m.body[..i], compact_spans(&m.body[i..]));
            }
        }
        p
    }

    /// Without what is routine beside a lead clause: the examples of
    /// non-zero exits (their count stays).
    fn lean(&self) -> Parts {
        let mut p = self.clone();
        if !p.lead.is_empty() && p.routine_mentions {
            p.mentions.clear();
        }
        p
    }

    fn incomplete_clause(&self) -> String {
        self.incomplete
            .as_ref()
            .map(|why| format!(" (incomplete: {why}, so deaths may be missing)"))
            .unwrap_or_default()
    }

    /// The verdict naming `named` causes, each lead clause at most `lead`
    /// characters and each other clause at most `clause`.
    fn with(&self, named: usize, lead: usize, clause: usize) -> String {
        self.with_leaks(named, lead, clause, clause)
    }

    /// As [`Parts::with`], the leak clause at most `leaks` characters.
    fn with_leaks(&self, named: usize, lead: usize, clause: usize, leaks: usize) -> String {
        let all = &self.mentions;
        let mut items: Vec<String> = all.iter().take(named).map(|m| m.clipped(clause)).collect();
        if all.len() > named {
            items.push(format!("and {} more", all.len() - named));
        }
        let mut v = if items.is_empty() {
            format!("{}.", self.head)
        } else {
            format!("{}: {}", self.head, items.join("; "))
        };
        if let Some(routine) = &self.routine {
            v = format!("{}. {routine}", v.trim_end_matches('.'));
        }
        if let Some(self_leaks) = &self.leaks {
            v = format!(
                "{}. Leaked: {}",
                v.trim_end_matches('.'),
                clip(self_leaks, leaks)
            );
        }
        if self.incomplete.is_some() {
            v = format!("{}{}", v.trim_end_matches('.'), self.incomplete_clause());
        }
        if self.inside {
            v = format!("Inside the run: {}", lower_first(&v));
        }
        for l in self.lead.iter().rev() {
            v = format!("{}. {v}", clip_middle(l, lead));
        }
        v
    }
}

/// The quiet helpers' exits, counted: "Routine: 2 quiet helpers exited
/// non-zero (their stderr to /dev/null).".
fn quiet_clause(n: usize) -> Option<String> {
    (n > 0).then(|| {
        let (who, whose) = if n == 1 {
            ("quiet helper", "its")
        } else {
            ("quiet helpers", "their")
        };
        format!("Routine: {n} {who} exited non-zero ({whose} stderr to /dev/null).")
    })
}

/// "No unexpected deaths." → "no unexpected deaths.", after a colon.
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) if f.is_ascii_uppercase() => f.to_ascii_lowercase().to_string() + c.as_str(),
        _ => s.to_string(),
    }
}

/// The verdict's first clause when the run sent a killing signal to a
/// process outside it (a fabricated pid that was someone else's, a
/// `kill -9 $pid` of a stranger, a `pkill -f` matching the tracer): what a
/// shared runner most needs to know comes before everything else.
pub(super) fn outbound_clause(a: &Analysis) -> Option<String> {
    let out: Vec<&ForeignSignal> = a
        .foreign_signals
        .iter()
        .filter(|f| f.outbound_kill)
        .collect();
    let f = out.first()?;
    let target = if f.target_is_tracer {
        format!("the tracer (pid {})", f.target.pid)
    } else {
        w::proc_phrase(&f.target)
    };
    let via = f
        .call
        .as_ref()
        .map(|c| format!(", via {c}"))
        .unwrap_or_default();
    let more = match out.len() {
        1 => String::new(),
        n => format!(
            " (and {} outside the run)",
            w::plural(n - 1, "more such signal", "more such signals")
        ),
    };
    let tracer = if f.target_is_tracer {
        ": no CI cancellation, the run stopped itself through the tracer"
    } else {
        ""
    };
    Some(format!(
        "{} in the run sent {} to {target}, outside the run{via}{more}{tracer}",
        w::proc_phrase(&f.sender),
        f.signal.sig_name
    ))
}

/// The rank the verdict leads with: unexpected deaths, else non-zero exits.
fn leading(a: &Analysis) -> Option<Rank> {
    if a.counts.unexpected > 0 {
        Some(Rank::Unexpected)
    } else if a.counts.nonzero_exit > 0 {
        Some(Rank::NonzeroExit)
    } else {
        None
    }
}

/// The chains started by the deaths the verdict leads with, one `then:`
/// line each (at most two, as the verdict names at most two causes): said
/// right under the verdict in report.md and the stderr summary.
pub(super) fn then_lines(a: &Analysis) -> Vec<String> {
    let Some(rank) = leading(a) else {
        return Vec::new();
    };
    let roots: Vec<&Certificate> = a
        .certificates
        .iter()
        // A quiet helper's chain is not named on line 1: no line under it.
        .filter(|c| c.rank == rank && !c.consequences.is_empty() && !c.quiet_helper)
        .take(2)
        .collect();
    let several = roots.len() > 1;
    roots
        .into_iter()
        .filter_map(|c| {
            let line = cascade::then_line(&a.certificates, c)?;
            Some(if several {
                format!("#{} {line}", c.id)
            } else {
                line
            })
        })
        .collect()
}

/// The verdict's leak clause. `leak` records say exactly which processes
/// outlived the command; a log without them only shows orphans with no end.
/// None when every recorded one is routine (`Leftover::routine`).
fn leaked_phrase(leftovers: &[Leftover]) -> Option<String> {
    // A runner's workers winding down just after it are routine: listed
    // under "Leaked" below, not named here.
    let recorded: Vec<&Leftover> = leftovers
        .iter()
        .filter(|l| l.leak.is_some() && !l.routine)
        .collect();
    let inferred: Vec<&Leftover> = leftovers.iter().filter(|l| l.orphaned).collect();
    let any_recorded = leftovers.iter().any(|l| l.leak.is_some());
    let (list, recorded) = if !any_recorded {
        (inferred, false)
    } else {
        (recorded, true)
    };
    let first = list.first()?;
    let more = match list.len() {
        1 => String::new(),
        n => format!(" and {} more", n - 1),
    };
    if !recorded {
        return Some(format!(
            "{}{more} outlived its parent and was still running when the log ended.",
            w::proc_phrase(&first.process)
        ));
    }
    let mut facts = String::new();
    if first.leak.as_ref().is_some_and(|l| l.detached) {
        facts.push_str(", detached via setsid");
    }
    if let Some(by) = &first.spawned_by {
        facts.push_str(&format!(", spawned by {}", w::proc_phrase(by)));
    }
    let verb = if list.len() == 1 { "was" } else { "were" };
    let sep = if facts.is_empty() { "" } else { "," };
    Some(format!(
        "{}{facts}{sep}{more} {verb} still running when the command exited.",
        w::proc_phrase(&first.process)
    ))
}

/// What killed several processes at once: one call (a group kill, several
/// deliveries), or one OOM group kill of a `memory.oom.group` cgroup.
#[derive(Clone, Copy, PartialEq)]
enum OneKill {
    Call(u64),
    OomGroup(u64),
}

/// Pids a mention lists beside its own victim.
const MAX_ALSO: usize = 4;

/// One mention per cause: the victims of one group kill (one call, several
/// deliveries; one OOM group kill) are named together, led by the process
/// the call aimed at.
fn mentions(certs: &[DeathMention]) -> Vec<Mention> {
    let mut groups: Vec<(Option<OneKill>, Vec<&DeathMention>)> = Vec::new();
    for c in certs {
        let call = c
            .kill_call
            .map(OneKill::Call)
            .or_else(|| c.oom_group.map(OneKill::OomGroup));
        match groups.iter_mut().find(|g| call.is_some() && g.0 == call) {
            Some(g) => g.1.push(c),
            None => groups.push((call, vec![c])),
        }
    }
    groups
        .into_iter()
        .map(|(kill, cs)| {
            let rep = cs.iter().find(|c| c.aimed).unwrap_or(&cs[0]);
            let others: Vec<String> = cs
                .iter()
                .filter(|c| c.id != rep.id)
                .map(|c| c.pid.to_string())
                .collect();
            // A group kill of hundreds names a few: the verdict is one line.
            let listed = match others.len() {
                n if n > MAX_ALSO => format!(
                    "{} and {} more",
                    others[..MAX_ALSO].join(", "),
                    n - MAX_ALSO
                ),
                _ => others.join(", "),
            };
            let pids = if others.len() == 1 { "pid" } else { "pids" };
            // An OOM group kill's pids go inside the mention's body, right
            // after the victim (oom_group_mention); a call's go after it.
            let (headline, also) = match (others.len(), kill) {
                (0, _) => (rep.headline.clone(), String::new()),
                (_, Some(OneKill::OomGroup(_))) => (
                    oom_group_mention(rep, &format!("{pids} {listed}")),
                    String::new(),
                ),
                _ => (
                    rep.headline.clone(),
                    format!(" (the same call also killed {pids} {listed})"),
                ),
            };
            let body = headline
                .strip_suffix(&rep.identifies)
                .filter(|_| !rep.identifies.is_empty())
                .unwrap_or(&headline);
            let identifies = if body.len() < headline.len() {
                rep.identifies.as_str()
            } else {
                ""
            };
            Mention {
                body: body.to_string(),
                identifies: identifies.to_string(),
                also,
            }
        })
        .collect()
}

/// An OOM group kill's victims named together, right after the one whose
/// allocation hit the limit: "`dd …` (pid 9) and pids 5, 7, 8 killed by the
/// kernel OOM killer in one group kill of memcg /job (…)". The pids and the
/// memcg come before the headline's facts, which a long line loses first
/// (appended, they were cut off on 6.12).
fn oom_group_mention(rep: &DeathMention, others: &str) -> String {
    match rep.headline.strip_prefix(&rep.victim) {
        Some(rest) => format!("{} and {others}{rest}", rep.victim),
        None => format!(
            "{} (the same OOM group kill also killed {others})",
            rep.headline
        ),
    }
}

/// "1 line over the 64 MiB line limit skipped", as the loss line says it.
pub(crate) fn skipped_lines(n: u64) -> String {
    format!(
        "{} over the {} MiB line limit skipped",
        w::plural(n as usize, "line", "lines"),
        crate::eventlog::MAX_LINE_BYTES >> 20
    )
}
