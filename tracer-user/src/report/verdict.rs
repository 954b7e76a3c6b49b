//! The verdict: the first line of every report.
use super::facts::LogFacts;
use crate::analysis::{
    cascade, wording as w, Analysis, Certificate, DeathMention, ForeignSignal, Leftover, Rank,
};

// The verdict's most characters, as report.md's first line shows it.
use crate::text::MAX_VERDICT_CHARS as MAX_VERDICT;
/// The shortest a clipped clause gets before the whole line is cut.
const MIN_CLAUSE: usize = 24;
/// The shortest a cause or leak clause gets before the lead is clipped.
const FLOOR: usize = 60;
/// A parenthesis longer than this is cut when the verdict is too long.
const PAREN: usize = 40;

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
    mentions: Vec<String>,
    leaks: Option<String>,
    /// Never clipped: a verdict on lossy data says so.
    incomplete: Option<String>,
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
        mentions(&all)
    };
    let (head, mentions) = if a.counts.unexpected > 0 {
        let n = a.counts.unexpected;
        (
            w::plural(n, "unexpected death", "unexpected deaths"),
            list(Rank::Unexpected),
        )
    } else if a.counts.nonzero_exit > 0 {
        let n = a.counts.nonzero_exit;
        (
            format!(
                "No unexpected deaths; {}",
                w::plural(n, "non-zero exit", "non-zero exits")
            ),
            list(Rank::NonzeroExit),
        )
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
        mentions: mentions.into_iter().map(line).collect(),
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
        let short = self.compacted();
        let tries = [self.with(1, usize::MAX, usize::MAX)]
            .into_iter()
            .chain(
                (FLOOR..=MAX_VERDICT)
                    .rev()
                    .map(|cap| short.with(1, usize::MAX, cap)),
            )
            .chain(
                (MIN_CLAUSE..=MAX_VERDICT)
                    .rev()
                    .map(|cap| short.with(1, cap, cap.min(FLOOR))),
            );
        if let Some(v) = tries.into_iter().find(fits) {
            return v;
        }
        // Only a verdict with many lead clauses gets here: cut the line,
        // keep the qualifier.
        let tail = self.incomplete_clause();
        let v = short.with(1, MIN_CLAUSE, MIN_CLAUSE);
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

    /// The same parts, each parenthesis over [`PAREN`] characters cut.
    fn compacted(&self) -> Parts {
        let mut p = self.clone();
        p.lead = p
            .lead
            .iter()
            .map(|s| compact_parens(drop_aside(s)))
            .collect();
        p.mentions = p.mentions.iter().map(|s| compact_parens(s)).collect();
        p.leaks = p.leaks.as_deref().map(compact_parens);
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
        let all = &self.mentions;
        let mut items: Vec<String> = all.iter().take(named).map(|m| clip(m, clause)).collect();
        if all.len() > named {
            items.push(format!("and {} more", all.len() - named));
        }
        let mut v = if items.is_empty() {
            format!("{}.", self.head)
        } else {
            format!("{}: {}", self.head, items.join("; "))
        };
        if let Some(leaks) = &self.leaks {
            v = format!(
                "{}. Leaked: {}",
                v.trim_end_matches('.'),
                clip(leaks, clause)
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

/// "No unexpected deaths." → "no unexpected deaths.", after a colon.
fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) if f.is_ascii_uppercase() => f.to_ascii_lowercase().to_string() + c.as_str(),
        _ => s.to_string(),
    }
}

/// Each parenthesis of `s` (outside code spans) longer than [`PAREN`]
/// characters cut to its start: `(/root/.pyenv/versions/3.11.7/bin/python3 -c
/// import …)` becomes `(python3 -c import subprocess;…)`.
fn compact_parens(s: &str) -> String {
    let c: Vec<char> = s.chars().collect();
    let mut o = String::with_capacity(s.len());
    let mut i = 0;
    let mut in_code = false;
    while i < c.len() {
        if c[i] == '`' {
            in_code = !in_code;
        }
        if c[i] == '(' && !in_code {
            // Its matching close, skipping code spans inside.
            let (mut depth, mut j, mut code) = (0usize, i, false);
            let mut end = None;
            while j < c.len() {
                match c[j] {
                    '`' => code = !code,
                    '(' if !code => depth += 1,
                    ')' if !code => {
                        depth -= 1;
                        if depth == 0 {
                            end = Some(j);
                            break;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            if let Some(j) = end.filter(|&j| j - i > PAREN) {
                let inner: String = c[i + 1..j].iter().collect();
                // A command's program by its name, not its directory.
                let inner = match inner.split_once(' ') {
                    Some((prog, rest)) if prog.starts_with('/') => {
                        format!("{} {rest}", crate::text::command::program(prog))
                    }
                    _ => inner,
                };
                o.push('(');
                o.push_str(&clip(&inner, PAREN - 2));
                o.push(')');
                i = j + 1;
                continue;
            }
        }
        o.push(c[i]);
        i += 1;
    }
    o
}

/// A clause without its closing aside (` — the read ends only when …`):
/// what the snapshot explains at length.
fn drop_aside(s: &str) -> &str {
    match s.rfind(" — ") {
        Some(i) => {
            let aside = &s[i..];
            let balanced = aside.matches('(').count() == aside.matches(')').count()
                && aside.matches('`').count().is_multiple_of(2);
            if balanced {
                &s[..i]
            } else {
                s
            }
        }
        None => s,
    }
}

/// `s` in at most `max` characters, its start and its end kept (a lead
/// clause says what happened first and what it means last).
fn clip_middle(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let tail_len = max / 2;
    let head = clip(s, max.saturating_sub(tail_len).max(1));
    let used = head.chars().count();
    let room = max.saturating_sub(used);
    let tail: String = s.chars().skip(n - room.min(n)).collect();
    // Start the tail at a word, outside any code span it would cut.
    let tail = match tail.find(' ') {
        Some(i) if i < tail.len() / 2 => tail[i + 1..].to_string(),
        _ => tail,
    };
    if tail.matches('`').count() % 2 == 1 {
        return head;
    }
    format!("{head} {tail}")
}

/// `s` in at most `max` characters: cut at a space when one is near the
/// end, "…" added, and a code span the cut left open closed again (its
/// backtick run repeated), so report.md shows the rest as prose.
pub(super) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let keep = max.saturating_sub(1);
    let mut cut: String = s.chars().take(keep).collect();
    if let Some(sp) = cut.rfind(' ') {
        if cut[..sp].chars().count() * 4 >= keep * 3 {
            cut.truncate(sp);
        }
    }
    // Backtick runs alternate open, close: an odd count leaves one open.
    let mut open: Option<usize> = None;
    let mut run = 0;
    for ch in cut.chars().chain(std::iter::once(' ')) {
        if ch == '`' {
            run += 1;
            continue;
        }
        if run > 0 {
            open = match open {
                Some(n) if n == run => None,
                Some(n) => Some(n),
                None => Some(run),
            };
            run = 0;
        }
    }
    cut.push('…');
    if let Some(n) = open {
        cut.push_str(&"`".repeat(n));
    }
    cut
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
        .filter(|c| c.rank == rank && !c.consequences.is_empty())
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
fn leaked_phrase(leftovers: &[Leftover]) -> Option<String> {
    let recorded: Vec<&Leftover> = leftovers.iter().filter(|l| l.leak.is_some()).collect();
    let inferred: Vec<&Leftover> = leftovers.iter().filter(|l| l.orphaned).collect();
    let (list, recorded) = if recorded.is_empty() {
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
fn mentions(certs: &[DeathMention]) -> Vec<String> {
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
            match (others.len(), kill) {
                (0, _) => rep.headline.clone(),
                (_, Some(OneKill::OomGroup(_))) => {
                    oom_group_mention(rep, &format!("{pids} {listed}"))
                }
                _ => format!(
                    "{} (the same call also killed {pids} {listed})",
                    rep.headline
                ),
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
