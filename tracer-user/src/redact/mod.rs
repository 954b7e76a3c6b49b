//! `--redact REGEX`: keep secrets (tokens, passwords given on a command line
//! or printed in an error) out of every output.
//!
//! Applied to each record before it is written to the log, so the log, the
//! reports rendered from it and the stderr summary never hold the secret.
//! What is masked: command lines (every argv element on its own, the
//! executable path, the process name), stderr last words, and the paths of
//! open files in leak records and snapshots. Only the matched part of a
//! string is replaced by [`MASK`]: `--token=abc123` with `abc\d+` becomes
//! `--token=[REDACTED]`. Numbers, times, signals and identities are never
//! touched, so the analysis is the same with or without redaction.
use std::borrow::Cow;

use regex::Regex;

use crate::{
    error::TracerError,
    eventlog::{
        CrashFrame, CrashStack, EventLog, Exec, Existing, Exit, Fork, Header, KillCall, LastWords,
        Leak, Oom, Record, Signal, SignalSummary, SnapshotTaken, Task,
    },
};

/// What a redacted match becomes.
pub const MASK: &str = "[REDACTED]";

/// Bytes of stderr kept beyond `--last-words-bytes` while redacting, so a
/// secret that straddles the cut is matched whole before the text is cut.
pub const CUT_SLACK: usize = 1024;

/// The `--redact` patterns; without any, it changes nothing.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    patterns: Vec<Regex>,
}

impl Redactor {
    /// Compile the patterns. An invalid one is named by its position, not
    /// echoed: a pattern can be the secret itself.
    pub fn new(patterns: &[String]) -> Result<Self, TracerError> {
        let patterns = patterns
            .iter()
            .enumerate()
            .map(|(i, p)| {
                Regex::new(p).map_err(|e| TracerError::BadRedact {
                    which: i + 1,
                    of: patterns.len(),
                    reason: reason(&e),
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { patterns })
    }

    pub fn is_active(&self) -> bool {
        !self.patterns.is_empty()
    }

    /// How many patterns there are (recorded in the log header).
    pub fn count(&self) -> u32 {
        self.patterns.len() as u32
    }

    /// `s` with every non-empty match of any pattern replaced by [`MASK`].
    /// Matches are found in the original text (never in a mask already put
    /// in), and overlapping or touching matches become one mask.
    pub fn text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut spans: Vec<(usize, usize)> = self
            .patterns
            .iter()
            .flat_map(|re| re.find_iter(s))
            .filter(|m| !m.is_empty())
            .map(|m| (m.start(), m.end()))
            .collect();
        if spans.is_empty() {
            return Cow::Borrowed(s);
        }
        spans.sort_unstable();
        let mut out = String::with_capacity(s.len());
        let mut done = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end) = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 <= end {
                end = end.max(spans[i].1);
                i += 1;
            }
            out.push_str(&s[done..start]);
            out.push_str(MASK);
            done = end;
        }
        out.push_str(&s[done..]);
        Cow::Owned(out)
    }

    /// `rec` as it may be written: a copy only when something was masked.
    pub fn apply<'a>(&self, rec: &'a Record) -> Cow<'a, Record> {
        if !self.is_active() {
            return Cow::Borrowed(rec);
        }
        let mut copy = rec.clone();
        if self.record(&mut copy) {
            Cow::Owned(copy)
        } else {
            Cow::Borrowed(rec)
        }
    }

    /// Mask one record in place; true if anything changed.
    ///
    /// Every field is named on purpose: a field added to the schema does not
    /// compile here until someone decides whether it can hold a secret.
    pub fn record(&self, rec: &mut Record) -> bool {
        if !self.is_active() {
            return false;
        }
        match rec {
            Record::Header(h) => self.header(h),
            Record::Fork(Fork {
                at: _,
                parent,
                child,
                thread: _,
                // Numbers only.
                child_ns: _,
            }) => self.task(parent) | self.task(child),
            Record::Exec(e) => self.exec(e),
            Record::Exit(Exit {
                at: _,
                task,
                exit_code: _,
                status: _,
                group_dead: _,
            }) => self.task(task),
            Record::Signal(sig) => self.signal(sig),
            Record::SignalSummary(SignalSummary {
                at: _,
                sender,
                target,
                sig: _,
                sig_name: _,
                count: _,
                first_t: _,
                last_t: _,
            }) => self.task(sender) | self.task(target),
            Record::KillCall(KillCall {
                at: _,
                sender,
                syscall: _,
                sig: _,
                sig_name: _,
                target_arg: _,
                tid_arg: _,
                ret: _,
                errno: _,
                call_id: _,
                deliveries: _,
                count: _,
                first_t: _,
            }) => self.task(sender),
            // The memcg name and path are the cgroup's, not the process's.
            Record::Oom(Oom {
                at: _,
                trigger,
                victim_tid: _,
                rss: _,
                oom_score_adj: _,
                memcg: _,
            }) => self.task(trigger),
            Record::TestMark(crate::eventlog::TestMark {
                at: _,
                task,
                text,
                bytes: _,
            }) => self.task(task) | self.string(text),
            Record::TestWindow(crate::eventlog::TestWindow {
                at: _,
                format: _,
                path,
                file,
                name,
                from: _,
                until: _,
                uncertainty_ms: _,
            }) => self.string(path) | self.opt(file) | self.string(name),
            Record::LastWords(w) => self.last_words(w),
            Record::CrashStack(c) => self.crash_stack(c),
            Record::Leak(l) => self.leak(l),
            Record::Snapshot(SnapshotTaken {
                at: _,
                reason: _,
                snapshot,
            }) => self.snapshot(snapshot),
            Record::Existing(Existing {
                at: _,
                task,
                ppid: _,
                argv,
                argv_truncated,
                exe,
                ns: _,
            }) => self.task(task) | self.cut_argv(argv, *argv_truncated) | self.opt(exe),
            // The cgroup paths are the cgroup's, as an oom record's; the
            // figures are numbers. The processes' names are the run's.
            Record::Resources(crate::eventlog::Resources {
                at: _,
                memory_cgroup: _,
                memory: _,
                cpu_cgroup: _,
                cpu: _,
                pressure_from: _,
                pressure: _,
                top,
                unread: _,
            }) => top
                .iter_mut()
                .fold(false, |c, p| self.task(&mut p.task) | c),
            Record::Trailer(_) => false,
        }
    }

    /// An exec: its task, the file, the argv and the test names in its
    /// environment (the job's text, as argv is).
    fn exec(&self, e: &mut Exec) -> bool {
        let Exec {
            at: _,
            task,
            old_tid: _,
            filename,
            argv,
            argv_truncated,
            test_env,
        } = e;
        // Test names are the job's text, as argv is.
        let env = test_env
            .values_mut()
            .fold(false, |hit, v| self.string(v) | hit);
        self.task(task) | self.string(filename) | self.cut_argv(argv, *argv_truncated) | env
    }

    /// A signal: the two tasks and the sender's argv.
    fn signal(&self, sig: &mut Signal) -> bool {
        let Signal {
            at: _,
            sender,
            target,
            sig: _,
            sig_name: _,
            code: _,
            code_name: _,
            errno: _,
            group: _,
            result: _,
            call: _,
            sender_argv,
            sender_argv_truncated,
            seccomp_syscall: _,
        } = sig;
        self.task(sender)
            | self.task(target)
            | sender_argv
                .as_mut()
                .is_some_and(|a| self.cut_argv(a, *sender_argv_truncated))
    }

    /// Last words: the task and the text, its cut front masked.
    fn last_words(&self, w: &mut LastWords) -> bool {
        let LastWords {
            at: _,
            task,
            text,
            bytes_total: _,
            truncated,
            to_null: _,
        } = w;
        // Cut at the front: the first bytes may end a secret.
        let cut = *truncated && mask_cut_start(text);
        self.task(task) | self.string(text) | cut
    }

    /// A crash stack: the task, and the paths and names of its frames.
    fn crash_stack(&self, stack: &mut CrashStack) -> bool {
        let CrashStack {
            at: _,
            task,
            sig: _,
            signal: _,
            code: _,
            fault_addr: _,
            completeness: _,
            // Paths (of modules and of files that are not there).
            detail,
            frames,
            frames_left_out: _,
            withheld: _,
        } = stack;
        let mut c = self.task(task) | self.opt(detail);
        for f in frames {
            let CrashFrame {
                address: _,
                module,
                build_id: _,
                offset: _,
                symbol,
                file,
                line: _,
                inlined: _,
                jit: _,
            } = f;
            c |= self.opt(module) | self.opt(symbol) | self.opt(file);
        }
        c
    }

    /// A leaked process: its task, argv, executable and open files.
    fn leak(&self, l: &mut Leak) -> bool {
        let Leak {
            at: _,
            task,
            ppid: _,
            pgid: _,
            sid: _,
            argv,
            argv_truncated,
            exe,
            reparented: _,
            detached: _,
            fds,
            fds_left_out: _,
            // Ids only: nothing of the run's to mask.
            withheld: _,
        } = l;
        self.task(task)
            | self.cut_argv(argv, *argv_truncated)
            | self.opt(exe)
            | fds.iter_mut().fold(false, |c, f| self.fd_line(f) | c)
    }

    /// The wrapped command, and the count of patterns applied (added to any
    /// already recorded: `tracer report --redact` on a redacted log).
    pub fn header(&self, h: &mut Header) -> bool {
        if !self.is_active() {
            return false;
        }
        let Header {
            schema: _,
            tracer_version: _,
            kernel: _,
            arch: _,
            hostname: _,
            mode: _,
            command,
            tracer_pid: _,
            started_at: _,
            boot_to_wall_ns: _,
            hooks: _,
            ring_buffer_bytes: _,
            argv_capture_bytes: _,
            // What a daemon watches (a cgroup path), the user's name.
            scope: _,
            segment: _,
            pid_namespace: _,
            command_user: _,
            redactions,
            ci,
            env_changes,
        } = h;
        self.strings(command);
        // A PYTHONPATH or NODE_OPTIONS the job set may carry what a
        // pattern masks (a token in a path, an option's value).
        for c in env_changes {
            self.opt(&mut c.old);
            self.string(&mut c.new);
        }
        if let Some(ci) = ci {
            for v in ci.values_mut() {
                self.opt(v);
            }
        }
        *redactions += self.count();
        true
    }

    /// A whole log read back (`tracer report --redact`).
    pub fn log(&self, log: &mut EventLog) {
        if !self.is_active() {
            return;
        }
        self.header(&mut log.header);
        for rec in &mut log.events {
            self.record(rec);
        }
    }

    /// An argv, masked; when it was cut (by the kernel side at an exec, or
    /// when read from /proc: both keep its first `ARGV_LEN` bytes), its last
    /// bytes may begin a secret no pattern can match any more: the fragment
    /// after the last separator is masked too.
    pub(super) fn cut_argv(&self, argv: &mut [String], truncated: bool) -> bool {
        let cut = truncated && argv.last_mut().is_some_and(mask_cut_end);
        self.strings(argv) | cut
    }

    pub(super) fn task(&self, t: &mut Task) -> bool {
        self.opt(&mut t.comm)
    }

    pub(super) fn opt(&self, s: &mut Option<String>) -> bool {
        s.as_mut().is_some_and(|s| self.string(s))
    }

    pub(super) fn strings(&self, v: &mut [String]) -> bool {
        v.iter_mut().fold(false, |c, s| self.string(s) | c)
    }

    pub(super) fn string(&self, s: &mut String) -> bool {
        match self.text(s) {
            Cow::Owned(t) => {
                *s = t;
                true
            }
            Cow::Borrowed(_) => false,
        }
    }
}

/// Where a cut string's fragment ends: text up to here may be the rest of a
/// token the cut split (whitespace and `=` separate tokens: `--key=VALUE`).
fn is_separator(c: char) -> bool {
    c.is_whitespace() || c == '='
}

/// Mask the fragment after the last separator of a string cut at its end
/// (nothing to mask when it ends on a separator).
fn mask_cut_end(s: &mut String) -> bool {
    let from = s.rfind(is_separator).map_or(0, |i| i + 1);
    if from == s.len() || s[from..].ends_with(MASK) {
        return false;
    }
    s.replace_range(from.., MASK);
    true
}

/// Mask the fragment before the first separator of a string cut at its start.
fn mask_cut_start(s: &mut String) -> bool {
    let to = s.find(is_separator).unwrap_or(s.len());
    if to == 0 || s[..to].starts_with(MASK) {
        return false;
    }
    s.replace_range(..to, MASK);
    true
}

/// The regex crate's complaint, on one line and without the pattern.
fn reason(e: &regex::Error) -> String {
    match e {
        regex::Error::Syntax(text) => text
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix("error: "))
            .unwrap_or("syntax error")
            .to_string(),
        regex::Error::CompiledTooBig(limit) => {
            format!("it compiles to more than {limit} bytes")
        }
        _ => "not a valid regex".to_string(),
    }
}

mod snapshot;
#[cfg(test)]
mod tests;
