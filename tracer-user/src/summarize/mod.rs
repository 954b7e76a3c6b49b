//! `tracer summarize`: many runs' report.json in, death signatures out. A
//! signature is (rank, victim command shape, cause class, killer command
//! shape); the same defect across runs lands in one signature with its
//! count, the runs it hit (each with its CI run, commit, branch, job and
//! attempt) and when it was first and last seen. Near misses, signals
//! across the run's boundary and leaks fold the same way. A literal target
//! pid that comes back run after run is kept and flagged: pids differ
//! between runs, so one that does not is written into the test. Format:
//! docs/summarize.md.
mod input;
mod render;

pub use crate::text::shape;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use input::ReportIn;
pub use input::{load, CiIn, Loaded, RunIn, Skipped};
pub use render::markdown;

/// Bumped on any incompatible change to the JSON output.
/// 2: dates to the second; `signature`, `repeated_targets`,
/// `foreign_signals`, the runs' `ci`.
pub const SUMMARIZE_SCHEMA_VERSION: u32 = 2;

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Summary {
    pub summarize_schema: u32,
    pub runs: Vec<RunRow>,
    pub skipped: Vec<Skipped>,
    pub signatures: Vec<Signature>,
    pub near_misses: Vec<MissFold>,
    pub foreign_signals: Vec<ForeignFold>,
    pub leaks: Vec<LeakFold>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: String,
    pub path: String,
    pub started_at: String,
    pub hostname: String,
    /// The CI run it came from, when report.json says (`run.ci`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<CiIn>,
    pub verdict: String,
    pub unexpected: usize,
    pub nonzero_exit: usize,
    pub expected: usize,
}

/// Where and when a folded finding was seen.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct Seen {
    /// Occurrences across all runs.
    pub count: usize,
    /// Distinct runs.
    pub runs: usize,
    pub run_ids: Vec<String>,
    /// `run.started_at` of the earliest and latest run it was seen in, to
    /// the second.
    pub first_seen: String,
    pub last_seen: String,
    /// Literal target pids that came back in several runs (pids of a new
    /// run are new: one that repeats is most likely written into the
    /// test), most runs first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub repeated_targets: Vec<Repeated>,
}

/// One call, pid and all, seen in `runs` of the `of` runs its finding hit.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Repeated {
    /// The call as made: `kill(4242, SIGKILL)`.
    pub call: String,
    pub runs: usize,
    pub of: usize,
}

impl Repeated {
    /// `kill(4242, SIGKILL) in 6/6 runs: a hard-coded pid?`
    pub fn note(&self) -> String {
        format!(
            "{} in {}/{} runs: a hard-coded pid?",
            self.call, self.runs, self.of
        )
    }
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Signature {
    /// The death named as its JUnit test case is (`--junit`): short
    /// command names, cause, killer relation.
    pub signature: String,
    /// `unexpected`, `nonzero_exit` or `expected`.
    pub rank: String,
    /// `cause.kind` of the certificates.
    pub cause: String,
    pub victim_shape: String,
    /// Absent when no process killed it (OOM, fault, non-zero exit...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub killer_shape: Option<String>,
    #[serde(flatten)]
    pub seen: Seen,
    /// Fatal signal names seen.
    pub signals: Vec<String>,
    /// Killer calls with pids replaced, e.g. `kill(-<pid>, SIGKILL)`.
    pub calls: Vec<String>,
    /// Relations of the killer to the victim seen.
    pub relations: Vec<String>,
    /// The headline of the earliest occurrence.
    pub example: String,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct MissFold {
    /// `kill(-<pid>)`: the syscall and whether it aimed at a group.
    pub call_shape: String,
    pub errno: String,
    pub sender_shape: String,
    /// Signal 0 liveness probes are folded apart from real attempts.
    pub probe: bool,
    #[serde(flatten)]
    pub seen: Seen,
    pub signals: Vec<String>,
}

/// Signals across the run's boundary (not tracer's own), folded by
/// direction, signal and the two shapes.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct ForeignFold {
    /// `run_to_outside` or `outside_to_run`.
    pub direction: String,
    pub signal: String,
    pub sender_shape: String,
    pub target_shape: String,
    #[serde(flatten)]
    pub seen: Seen,
    /// Calls with pids replaced.
    pub calls: Vec<String>,
}

#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct LeakFold {
    pub process_shape: String,
    #[serde(flatten)]
    pub seen: Seen,
}

/// Accumulates one folded finding.
#[derive(Default)]
struct Acc {
    count: usize,
    runs: BTreeSet<usize>,
    signals: BTreeSet<String>,
    calls: BTreeSet<String>,
    relations: BTreeSet<String>,
    example: Option<(usize, String)>,
    /// Calls as made (pids kept), and the runs each was made in.
    literal: BTreeMap<String, BTreeSet<usize>>,
}

impl Acc {
    fn hit(&mut self, run: usize, example: &str) {
        self.hit_n(run, example, 1);
    }

    /// `n` occurrences in one run (a report that folded them already).
    fn hit_n(&mut self, run: usize, example: &str, n: u64) {
        self.count += n as usize;
        self.runs.insert(run);
        if self.example.as_ref().is_none_or(|(r, _)| run < *r) {
            self.example = Some((run, example.to_string()));
        }
    }

    /// A call with its literal target, made in `run`.
    fn call(&mut self, run: usize, literal: String) {
        self.calls.insert(shape::call(&literal));
        self.literal.entry(literal).or_default().insert(run);
    }

    /// Runs are indexed in chronological order, so first/last are the ends.
    fn seen(&self, runs: &[RunIn]) -> Seen {
        let ids: Vec<String> = self.runs.iter().map(|&i| runs[i].id.clone()).collect();
        let at = |i: Option<&usize>| i.map(|&i| date(&runs[i].started_at)).unwrap_or_default();
        let mut repeated: Vec<Repeated> = self
            .literal
            .iter()
            .filter(|(_, r)| r.len() >= 2)
            .map(|(call, r)| Repeated {
                call: call.clone(),
                runs: r.len(),
                of: self.runs.len(),
            })
            .collect();
        repeated.sort_by(|a, b| b.runs.cmp(&a.runs).then(a.call.cmp(&b.call)));
        Seen {
            count: self.count,
            runs: self.runs.len(),
            run_ids: ids,
            first_seen: at(self.runs.first()),
            last_seen: at(self.runs.last()),
            repeated_targets: repeated,
        }
    }
}

/// An RFC 3339 time to the second (`2026-08-18T17:27:05Z`): a summary
/// spans days, and report.json's nanoseconds only make its columns wide.
/// Anything else is kept as it is.
pub fn date(rfc3339: &str) -> String {
    match rfc3339.split_once('.') {
        Some((secs, frac))
            if frac.ends_with('Z')
                && frac[..frac.len() - 1].bytes().all(|b| b.is_ascii_digit()) =>
        {
            format!("{secs}Z")
        }
        _ => rfc3339.to_string(),
    }
}

fn rank_order(rank: &str) -> u8 {
    match rank {
        "unexpected" => 0,
        "nonzero_exit" => 1,
        "consequence" => 2,
        "expected" => 3,
        _ => 4,
    }
}

/// A death's signature key: (rank order, rank, victim shape, cause, killer
/// shape); the rank order sorts the map.
type SigKey = (u8, String, String, String, String);
/// A near miss's: (probe, call shape, errno, sender shape).
type MissKey = (bool, String, String, String);
/// A foreign signal's: (direction, signal, sender shape, target shape).
type ForeignKey = (String, String, String, String);

/// Every run's findings so far, each folded under its signature.
#[derive(Default)]
struct Folds {
    sigs: BTreeMap<SigKey, Acc>,
    /// Each signature's name, from its first death.
    names: BTreeMap<SigKey, String>,
    misses: BTreeMap<MissKey, Acc>,
    foreign: BTreeMap<ForeignKey, Acc>,
    leaks: BTreeMap<String, Acc>,
}

impl Folds {
    /// Run `i`'s deaths (a report's folded groups count each of theirs).
    fn add_deaths(&mut self, i: usize, doc: &ReportIn) {
        for (c, n) in doc.deaths() {
            let v = &c.victim.process;
            let victim = shape::command(&v.argv, &v.command);
            let killer = c
                .killer
                .as_ref()
                .map(|k| {
                    let test = k.test.as_ref().and_then(|t| t.full_name());
                    shape::with_test(
                        shape::command(&k.process.argv, &k.process.command),
                        test.as_deref(),
                    )
                })
                .unwrap_or_default();
            let key = (
                rank_order(&c.rank),
                c.rank.clone(),
                victim,
                c.cause.kind.clone(),
                killer,
            );
            self.names.entry(key.clone()).or_insert_with(|| {
                shape::death(&shape::Death {
                    victim: &key.2,
                    cause: &c.cause.kind,
                    signal: c.cause.signal.as_ref().map(|s| s.sig_name.as_str()),
                    exit_code: c
                        .cause
                        .signal
                        .is_none()
                        .then(|| c.victim.status.exited.as_ref().map(|e| e.code))
                        .flatten(),
                    relation: c.killer.as_ref().map(|k| k.relation.as_str()),
                    killer: c.killer.as_ref().map(|_| key.4.as_str()),
                })
            });
            let acc = self.sigs.entry(key).or_default();
            acc.hit_n(i, &c.headline, n);
            if let Some(s) = &c.cause.signal {
                acc.signals.insert(s.sig_name.clone());
            }
            if let Some(k) = &c.killer {
                acc.call(i, k.call.clone());
                acc.relations.insert(k.relation.clone());
            }
        }
    }

    /// Run `i`'s near misses, each call's literal target kept.
    fn add_near_misses(&mut self, i: usize, doc: &ReportIn) {
        for n in &doc.near_misses {
            let group = if n.target_arg < 0 { "-" } else { "" };
            let key = (
                n.probe,
                format!("{}({group}<pid>)", n.syscall),
                n.errno.clone().unwrap_or_else(|| "failed".into()),
                {
                    let sender = doc.miss_sender(n);
                    shape::command(&sender.argv, &sender.command)
                },
            );
            let acc = self.misses.entry(key).or_default();
            acc.hit_n(i, "", n.count.unwrap_or(1));
            acc.signals.insert(n.sig_name.clone());
            // The pid as given: a fabricated one comes back every run.
            acc.literal
                .entry(format!("{}({})", n.syscall, n.target_arg))
                .or_default()
                .insert(i);
        }
    }

    /// Run `i`'s signals across its boundary.
    fn add_foreign_signals(&mut self, i: usize, doc: &ReportIn) {
        // What --fail-on foreign-signal counts: not tracer's own signals,
        // nor a daemon's stop.
        let daemon = doc.run.mode == "daemon";
        for f in doc
            .foreign_signals
            .iter()
            .filter(|f| !(f.sender_is_tracer || daemon && f.target_is_tracer))
        {
            let key = (
                f.direction.clone(),
                f.signal.sig_name.clone(),
                shape::command(&f.sender.argv, &f.sender.command),
                shape::command(&f.target.argv, &f.target.command),
            );
            let acc = self.foreign.entry(key).or_default();
            acc.hit(i, "");
            if let Some(call) = &f.call {
                acc.call(i, call.clone());
            }
        }
    }

    /// Run `i`'s orphaned leftovers.
    fn add_leaks(&mut self, i: usize, doc: &ReportIn) {
        for l in doc.leftovers.iter().filter(|l| l.orphaned) {
            let key = shape::command(&l.process.argv, &l.process.command);
            self.leaks.entry(key).or_default().hit(i, "");
        }
    }
}

/// Folds loaded runs (already in chronological order) into signatures.
pub fn summarize(loaded: &Loaded) -> Summary {
    let runs = &loaded.runs;
    let mut folds = Folds::default();
    for (i, run) in runs.iter().enumerate() {
        folds.add_deaths(i, &run.doc);
        folds.add_near_misses(i, &run.doc);
        folds.add_foreign_signals(i, &run.doc);
        folds.add_leaks(i, &run.doc);
    }
    let Folds {
        sigs,
        names,
        misses,
        foreign,
        leaks,
    } = folds;
    Summary {
        summarize_schema: SUMMARIZE_SCHEMA_VERSION,
        runs: run_rows(runs),
        skipped: loaded.skipped.clone(),
        signatures: signatures(sigs, names, runs),
        near_misses: near_misses(misses, runs),
        foreign_signals: foreign_signals(foreign, runs),
        leaks: leak_folds(leaks, runs),
    }
}

/// A set as a sorted list.
fn sorted(s: &BTreeSet<String>) -> Vec<String> {
    s.iter().cloned().collect()
}

/// The death signatures: by rank, then most runs hit first, then most
/// occurrences; the map order breaks ties, so the output is deterministic.
fn signatures(
    sigs: BTreeMap<SigKey, Acc>,
    mut names: BTreeMap<SigKey, String>,
    runs: &[RunIn],
) -> Vec<Signature> {
    let mut signatures: Vec<Signature> = sigs
        .into_iter()
        .map(|(key, a)| (names.remove(&key).unwrap_or_default(), key, a))
        .map(
            |(signature, (_, rank, victim, cause, killer), a)| Signature {
                signature,
                rank,
                cause,
                victim_shape: victim,
                killer_shape: (!killer.is_empty()).then_some(killer),
                seen: a.seen(runs),
                signals: sorted(&a.signals),
                calls: sorted(&a.calls),
                relations: sorted(&a.relations),
                example: a.example.map(|e| e.1).unwrap_or_default(),
            },
        )
        .collect();
    signatures.sort_by(|a, b| {
        rank_order(&a.rank)
            .cmp(&rank_order(&b.rank))
            .then(b.seen.runs.cmp(&a.seen.runs))
            .then(b.seen.count.cmp(&a.seen.count))
    });
    signatures
}

/// The near misses: probes after real attempts, then most runs, most
/// occurrences.
fn near_misses(misses: BTreeMap<MissKey, Acc>, runs: &[RunIn]) -> Vec<MissFold> {
    let mut near_misses: Vec<MissFold> = misses
        .into_iter()
        .map(|((probe, call, errno, sender), a)| MissFold {
            call_shape: call,
            errno,
            sender_shape: sender,
            probe,
            seen: a.seen(runs),
            signals: sorted(&a.signals),
        })
        .collect();
    near_misses.sort_by(|a, b| {
        a.probe
            .cmp(&b.probe)
            .then(b.seen.runs.cmp(&a.seen.runs))
            .then(b.seen.count.cmp(&a.seen.count))
    });
    near_misses
}

/// The signals across the boundary: most runs, then most occurrences.
fn foreign_signals(foreign: BTreeMap<ForeignKey, Acc>, runs: &[RunIn]) -> Vec<ForeignFold> {
    let mut foreign_signals: Vec<ForeignFold> = foreign
        .into_iter()
        .map(|((direction, signal, sender, target), a)| ForeignFold {
            direction,
            signal,
            sender_shape: sender,
            target_shape: target,
            seen: a.seen(runs),
            calls: sorted(&a.calls),
        })
        .collect();
    foreign_signals.sort_by(|a, b| {
        b.seen
            .runs
            .cmp(&a.seen.runs)
            .then(b.seen.count.cmp(&a.seen.count))
    });
    foreign_signals
}

/// The leaks: most runs first.
fn leak_folds(leaks: BTreeMap<String, Acc>, runs: &[RunIn]) -> Vec<LeakFold> {
    let mut leaks: Vec<LeakFold> = leaks
        .into_iter()
        .map(|(shape, a)| LeakFold {
            process_shape: shape,
            seen: a.seen(runs),
        })
        .collect();
    leaks.sort_by_key(|l| std::cmp::Reverse(l.seen.runs));
    leaks
}

/// One row per run read, in order.
fn run_rows(runs: &[RunIn]) -> Vec<RunRow> {
    runs.iter()
        .map(|r| RunRow {
            id: r.id.clone(),
            path: r.path.clone(),
            started_at: date(&r.started_at),
            hostname: r.doc.run.hostname.clone(),
            ci: r.doc.run.ci.clone(),
            verdict: r.doc.verdict.clone(),
            unexpected: r.doc.counts.unexpected,
            nonzero_exit: r.doc.counts.nonzero_exit,
            expected: r.doc.counts.expected,
        })
        .collect()
}

/// JSON output: pretty, newline-terminated.
pub fn json(s: &Summary) -> String {
    let mut o = serde_json::to_string_pretty(s).expect("summary types always serialize");
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{eventlog::read_log, report};

    fn run(id: &str, fixture: &str, started_at: &str) -> RunIn {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(fixture);
        let r = report::build_report(&read_log(&path).unwrap(), &Default::default());
        let doc: input::ReportIn = serde_json::from_str(&report::render_json(&r)).unwrap();
        RunIn {
            id: id.into(),
            path: format!("{id}/report.json"),
            started_at: started_at.into(),
            doc,
        }
    }

    #[test]
    fn folds_across_runs_and_puts_unexpected_first() {
        let loaded = Loaded {
            runs: vec![
                run("a", "seed000_group_kill.ndjson", "2026-08-18T17:27:00Z"),
                run("b", "crashes.ndjson", "2026-08-18T18:00:00Z"),
                run("c", "seed000_group_kill.ndjson", "2026-08-19T09:00:00Z"),
            ],
            skipped: Vec::new(),
        };
        let s = summarize(&loaded);
        let g = &s.signatures[0];
        assert_eq!(
            (g.rank.as_str(), g.victim_shape.as_str()),
            ("unexpected", "node worker.js")
        );
        assert_eq!((g.seen.runs, g.seen.count), (2, 4));
        assert_eq!(g.seen.run_ids, ["a", "c"]);
        assert_eq!(g.seen.first_seen, "2026-08-18T17:27:00Z");
        assert_eq!(g.seen.last_seen, "2026-08-19T09:00:00Z");
        let first_other = s.signatures.iter().position(|g| g.rank != "unexpected");
        assert!(s.signatures[first_other.unwrap()..]
            .iter()
            .all(|g| g.rank != "unexpected"));
        assert_eq!(s.near_misses[0].seen.runs, 2);
        assert_eq!(markdown(&s), markdown(&summarize(&loaded)));
    }

    /// A report that folded deaths of one kind counts each of them.
    #[test]
    fn a_folded_group_counts_its_deaths() {
        let mut r = run("a", "crashes.ndjson", "2026-08-18T17:27:00Z");
        let n = r.doc.certificates.len();
        let example = r.doc.certificates.remove(0);
        let headline = example.headline.clone();
        r.doc.death_groups = vec![input::GroupIn { count: 7, example }];
        let s = summarize(&Loaded {
            runs: vec![r],
            skipped: Vec::new(),
        });
        let g = s.signatures.iter().find(|g| g.example == headline).unwrap();
        assert_eq!(g.seen.count, 7);
        let total: usize = s.signatures.iter().map(|g| g.seen.count).sum();
        assert_eq!(total, n - 1 + 7);
    }
}
