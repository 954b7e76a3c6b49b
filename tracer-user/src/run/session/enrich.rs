//! The enrichment stage: between a ring record's decoding and the log,
//! what the kernel could not put in the record is added from live state
//! (/proc, the cgroup filesystem), read now because it is gone once the
//! process or cgroup is. The log is the evidence (`tracer report` never
//! reads live state), so this is the one place such facts enter it.
//!
//! One function per enrichment, each called from [`Enricher::enrich`] in
//! a fixed order; each touches one kind of record and leaves the others as
//! they are. A new runner or kernel fact that needs the living process is
//! one more function here and one more line there.
use std::collections::HashSet;

use crate::{
    capture::cgroups,
    eventlog::{ProcKey, Record},
    run::procs,
};

/// Processes remembered as named at most (16 B each, ~1 MiB).
const MAX_NAMED: usize = 1 << 16;

/// What the enrichments remember between records.
pub(super) struct Enricher {
    /// Processes of the run (forked in it, or existing in scope), and
    /// outside senders already named: neither needs its argv read. A
    /// process of the run leaves at its exit; outside senders (whose exit
    /// is not seen) are forgotten all at once past `MAX_NAMED`: the cost
    /// is one /proc read again. Before, a daemon kept every process it had
    /// ever seen here (a 10-minute soak of ~2,800 processes a second).
    named: HashSet<ProcKey>,
    /// Tracer's own pid, asked once: every signal record is checked against
    /// it, and getpid is a real syscall (two raw_syscalls programs each).
    me: u32,
}

impl Enricher {
    pub(super) fn new() -> Self {
        Self {
            named: HashSet::new(),
            me: std::process::id(),
        }
    }

    /// Every enrichment, on one decoded record before it is written (and
    /// redacted: `Session::write` masks what these add too).
    pub(super) fn enrich(&mut self, rec: &mut Record) {
        self.outside_sender_argv(rec);
        oom_memcg(rec);
        exec_test_env(rec);
    }

    /// A signal from a process the log cannot name (it was never exec'd in
    /// the run): read its argv now, while it is alive, checked against its
    /// start time. Once per process. Without it an outside killer (a CI
    /// runner, a `pkill` from another job) is only a pid in the report.
    fn outside_sender_argv(&mut self, rec: &mut Record) {
        if self.named.len() >= MAX_NAMED {
            self.named.clear();
        }
        match rec {
            Record::Fork(f) if f.thread => {}
            Record::Fork(f) => {
                self.named.insert(f.child.key());
            }
            Record::Exit(x) if x.group_dead => {
                self.named.remove(&x.task.key());
            }
            Record::Existing(x) => {
                self.named.insert(x.task.key());
            }
            Record::Signal(s)
                if s.sender.pid != self.me && !self.named.contains(&s.sender.key()) =>
            {
                self.named.insert(s.sender.key());
                if let Some((argv, cut)) = procs::argv_of(s.sender.key()) {
                    s.sender_argv = Some(argv);
                    s.sender_argv_truncated = cut;
                }
            }
            _ => {}
        }
    }
}

/// An OOM kill names its memory cgroup by id: add its path, limit and
/// `memory.oom.group` while the cgroup still exists, so the certificate
/// says which limit was hit and whether the kernel killed the whole group.
fn oom_memcg(rec: &mut Record) {
    if let Record::Oom(oom) = rec {
        if let Some(m) = oom.memcg.as_mut() {
            if let Some(info) = cgroups::resolve(m.id) {
                m.path = Some(info.path);
                m.limit_bytes = info.limit_bytes;
                m.oom_group = info.oom_group;
            }
        }
    }
}

/// An exec's test runners' variables (only those: `procs::test_env_of`
/// filters the rest out before anything leaves it), read from its
/// environment while it is this very process: they name the test a worker
/// ran (`labels/sources.rs`), which the kernel record does not carry.
fn exec_test_env(rec: &mut Record) {
    if let Record::Exec(e) = rec {
        e.test_env = procs::test_env_of(e.task.key());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A live process that is neither the test nor of any run: a `sleep`,
    /// its argv in place.
    struct Sleeper(std::process::Child, ProcKey);

    impl Sleeper {
        fn spawn() -> Self {
            let child = std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .expect("sleep runs");
            let pid = child.id();
            // `spawn` returns once the exec is past its point of no
            // return, which may be before the new argv is in place.
            let argv = || crate::snapshot::read_argv(pid).map(|(a, _)| a);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while argv().map_or(true, |a| a.is_empty()) && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let ticks = procfs::process::Process::new(pid as i32)
                .and_then(|p| p.stat())
                .expect("its stat")
                .starttime;
            let start = ticks * (1_000_000_000 / procfs::ticks_per_second());
            Self(child, ProcKey { pid, start })
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn task(k: ProcKey) -> String {
        format!(
            r#"{{"pid":{},"tid":{},"start":{},"comm":"sleep"}}"#,
            k.pid, k.pid, k.start
        )
    }

    fn record(json: &str) -> Record {
        serde_json::from_str(json).expect("a record")
    }

    fn signal_from(k: ProcKey) -> Record {
        record(&format!(
            r#"{{"type":"signal","seq":1,"t":1,"time":"2026-11-30T00:47:40Z","sender":{},"target":{},"sig":15,"sig_name":"SIGTERM","code":0,"code_name":"SI_USER","errno":0,"group":true,"result":"delivered"}}"#,
            task(k),
            task(ProcKey { pid: 1, start: 0 })
        ))
    }

    fn fork_of(k: ProcKey) -> Record {
        record(&format!(
            r#"{{"type":"fork","seq":1,"t":1,"time":"2026-11-30T00:47:40Z","parent":{},"child":{},"thread":false}}"#,
            task(ProcKey { pid: 1, start: 0 }),
            task(k)
        ))
    }

    fn exit_of(k: ProcKey) -> Record {
        record(&format!(
            r#"{{"type":"exit","seq":1,"t":1,"time":"2026-11-30T00:47:40Z","task":{},"exit_code":0,"status":{{"exited":{{"code":0}}}},"group_dead":true}}"#,
            task(k)
        ))
    }

    /// The sender's argv as the stage left it.
    fn enriched_argv(e: &mut Enricher, mut rec: Record) -> Option<Vec<String>> {
        e.enrich(&mut rec);
        match rec {
            Record::Signal(s) => s.sender_argv,
            _ => panic!("a signal"),
        }
    }

    #[test]
    fn an_outside_sender_is_named_once() {
        let s = Sleeper::spawn();
        let mut e = Enricher::new();
        let argv = enriched_argv(&mut e, signal_from(s.1));
        assert_eq!(argv, Some(vec!["sleep".to_string(), "30".to_string()]));
        assert_eq!(enriched_argv(&mut e, signal_from(s.1)), None);
    }

    #[test]
    fn a_process_of_the_run_is_not_read_until_it_exits() {
        let s = Sleeper::spawn();
        let mut e = Enricher::new();
        e.enrich(&mut fork_of(s.1));
        assert_eq!(enriched_argv(&mut e, signal_from(s.1)), None);
        e.enrich(&mut exit_of(s.1));
        assert!(enriched_argv(&mut e, signal_from(s.1)).is_some());
    }

    #[test]
    fn tracers_own_signals_are_never_read() {
        let s = Sleeper::spawn();
        let mut e = Enricher {
            me: s.1.pid,
            ..Enricher::new()
        };
        assert_eq!(enriched_argv(&mut e, signal_from(s.1)), None);
    }
}
