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
use std::collections::{BTreeMap, HashSet, VecDeque};

use crate::{
    capture::{cgroups, decode::Wire},
    eventlog::{ProcKey, Record},
    run::procs,
};

/// Processes remembered as named at most (16 B each, ~1 MiB).
const MAX_NAMED: usize = 1 << 16;

/// Exited processes remembered at most: a process's last signals (the
/// SIGCHLD its exit sends its parent) follow its exit record closely.
const MAX_GONE: usize = 1 << 12;

/// What the enrichments remember between records.
pub(super) struct Enricher {
    /// Processes of the run (forked in it, or existing in scope), and
    /// outside senders already named: neither needs its argv read. A
    /// process of the run leaves at its exit; outside senders (whose exit
    /// is not seen) are forgotten all at once past `MAX_NAMED`: the cost
    /// is one /proc read again. Before, a daemon kept every process it had
    /// ever seen here (a 10-minute soak of ~2,800 processes a second).
    named: HashSet<ProcKey>,
    /// Processes of the run whose exit was seen, the latest ones: a signal
    /// they send after it (each child's SIGCHLD to its parent, sent after
    /// the exit hook) has no argv to read. Without this every process of a
    /// fork storm cost a failed /proc open (a 2,000-process storm: 1,952
    /// ENOENTs, strace). Forgotten all at once past `MAX_GONE`.
    gone: HashSet<ProcKey>,
    /// Tracer's own pid, asked once: every signal record is checked against
    /// it, and getpid is a real syscall (two raw_syscalls programs each).
    me: u32,
    /// The runner variables the kernel sent for execs not yet enriched.
    runner_vars: RunnerVars,
}

/// Runner variables the exec program sent (`Wire::ExecEnv`), held for
/// their exec's record, which follows them in the ring (other CPUs'
/// records may come between).
#[derive(Default)]
struct RunnerVars {
    /// (tid, ktime) of each variable and its `NAME=value`: those of an
    /// exec whose record was lost stay until pushed out by newer ones.
    held: VecDeque<((u32, u64), Vec<u8>)>,
    /// The exec of the wire record just seen, and whether the kernel read
    /// its whole environment (then its variables are all held; none: it
    /// had none).
    exec: Option<((u32, u64), bool)>,
}

/// Variables held at most: 8 per exec, and an exec's record follows its
/// variables within the records other CPUs put between them.
const MAX_HELD: usize = 256;

impl RunnerVars {
    fn hold(&mut self, tid: u32, ktime: u64, text: Vec<u8>) {
        if self.held.len() >= MAX_HELD {
            self.held.pop_front();
        }
        self.held.push_back(((tid, ktime), text));
    }

    /// The held variables of `tid`'s exec, the wire record just seen, and
    /// whether they are all its environment has.
    fn take(&mut self, tid: u32) -> (BTreeMap<String, String>, bool) {
        let Some((exec, whole)) = self.exec.take().filter(|((t, _), _)| *t == tid) else {
            return (BTreeMap::new(), false);
        };
        let mut area = Vec::new();
        self.held.retain(|(key, text)| {
            let mine = *key == exec;
            if mine {
                area.extend_from_slice(text);
                area.push(0);
            }
            !mine
        });
        // The kernel matched the names exactly; filtered again all the same.
        (crate::labels::env::filter(&area), whole)
    }
}

impl Enricher {
    pub(super) fn new() -> Self {
        Self {
            named: HashSet::new(),
            gone: HashSet::new(),
            me: std::process::id(),
            runner_vars: RunnerVars::default(),
        }
    }

    /// A wire record before it becomes a log record: true when this stage
    /// keeps it instead (a runner variable, held for its exec's record).
    pub(super) fn keep(&mut self, wire: &mut Wire) -> bool {
        match wire {
            Wire::ExecEnv { ktime, task, text } => {
                self.runner_vars
                    .hold(task.tid, *ktime, std::mem::take(text));
                true
            }
            Wire::Exec(r) => {
                let whole = r.flags & tracer_common::EXEC_ENV_SCANNED != 0;
                self.runner_vars.exec = Some(((r.task.tid, r.hdr.ktime_ns), whole));
                false
            }
            _ => false,
        }
    }

    /// Every enrichment, on one decoded record before it is written (and
    /// redacted: `Session::write` masks what these add too).
    pub(super) fn enrich(&mut self, rec: &mut Record) {
        self.outside_sender_argv(rec);
        oom_memcg(rec);
        self.exec_test_env(rec);
    }

    /// An exec's test runners' variables (only those): the ones the kernel
    /// sent for it, found where the kernel put its environment
    /// (`tracer-ebpf/src/exec_env.rs`). Where it could not read all of it
    /// (past `RUNNER_SCAN_VARS` variables, or no `mm->start_stack`), the
    /// names it did not find are read from /proc while it is this very
    /// process (`procs::test_env_of` filters the rest out before anything
    /// leaves it). They name the test a worker ran (`labels/sources.rs`).
    fn exec_test_env(&mut self, rec: &mut Record) {
        if let Record::Exec(e) = rec {
            let (mut vars, whole) = self.runner_vars.take(e.task.tid);
            if !whole {
                for (name, value) in procs::test_env_of(e.task.key()) {
                    vars.entry(name).or_insert(value);
                }
            }
            e.test_env = vars;
        }
    }

    /// A process of the run has exited: from `named` to `gone`.
    fn exited(&mut self, key: ProcKey) {
        if !self.named.remove(&key) {
            return;
        }
        if self.gone.len() >= MAX_GONE {
            self.gone.clear();
        }
        self.gone.insert(key);
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
            Record::Exit(x) if x.group_dead => self.exited(x.task.key()),
            Record::Existing(x) => {
                self.named.insert(x.task.key());
            }
            Record::Signal(s)
                if s.sender.pid != self.me
                    && !self.named.contains(&s.sender.key())
                    && !self.gone.contains(&s.sender.key()) =>
            {
                self.named.insert(s.sender.key());
                let argv = match &s.sender.comm {
                    Some(comm) => procs::argv_of_named(s.sender.key(), s.sender.tid, comm),
                    None => procs::argv_of(s.sender.key()),
                };
                if let Some((argv, cut)) = argv {
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
        task_named(k, "sleep")
    }

    fn task_named(k: ProcKey, comm: &str) -> String {
        format!(
            r#"{{"pid":{},"tid":{},"start":{},"comm":"{comm}"}}"#,
            k.pid, k.pid, k.start
        )
    }

    fn record(json: &str) -> Record {
        serde_json::from_str(json).expect("a record")
    }

    fn signal_from(k: ProcKey) -> Record {
        signal_from_named(k, "sleep")
    }

    fn signal_from_named(k: ProcKey, comm: &str) -> Record {
        record(&format!(
            r#"{{"type":"signal","seq":1,"t":1,"time":"2026-11-30T00:47:40Z","sender":{},"target":{},"sig":15,"sig_name":"SIGTERM","code":0,"code_name":"SI_USER","errno":0,"group":true,"result":"delivered"}}"#,
            task_named(k, comm),
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

    /// A sender whose name is no longer the one it signalled under has
    /// exec'd another image since: its argv would name the wrong program.
    #[test]
    fn a_sender_that_has_execd_since_is_not_named_by_its_new_image() {
        let s = Sleeper::spawn();
        let mut e = Enricher::new();
        assert_eq!(enriched_argv(&mut e, signal_from_named(s.1, "bash")), None);
    }

    #[test]
    fn a_process_of_the_run_is_never_read() {
        let s = Sleeper::spawn();
        let mut e = Enricher::new();
        e.enrich(&mut fork_of(s.1));
        assert_eq!(enriched_argv(&mut e, signal_from(s.1)), None);
        // Its SIGCHLD to its parent comes after its exit record.
        e.enrich(&mut exit_of(s.1));
        assert_eq!(enriched_argv(&mut e, signal_from(s.1)), None);
        assert!(e.named.is_empty(), "an exited process leaves `named`");
    }

    /// Exited processes are remembered boundedly: past `MAX_GONE` they are
    /// forgotten, and a late signal from one costs a /proc read again.
    #[test]
    fn exited_processes_are_remembered_boundedly() {
        let s = Sleeper::spawn();
        let mut e = Enricher::new();
        e.enrich(&mut fork_of(s.1));
        e.enrich(&mut exit_of(s.1));
        for pid in 0..MAX_GONE as u32 {
            let k = ProcKey {
                pid: 1_000_000 + pid,
                start: 1,
            };
            e.enrich(&mut fork_of(k));
            e.enrich(&mut exit_of(k));
        }
        assert!(e.gone.len() <= MAX_GONE);
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

    fn exec_wire(tid: u32, ktime: u64, flags: u32) -> Wire {
        // SAFETY: ExecRecord is Pod: all-zero is a valid value.
        let mut r: tracer_common::ExecRecord = unsafe { std::mem::zeroed() };
        r.task = wire_task(tid);
        r.hdr.ktime_ns = ktime;
        r.flags = flags;
        Wire::Exec(Box::new(r))
    }

    fn env_wire(tid: u32, ktime: u64, text: &str) -> Wire {
        Wire::ExecEnv {
            ktime,
            task: wire_task(tid),
            text: text.as_bytes().to_vec(),
        }
    }

    /// The wire task of a process's main thread `tid`.
    fn wire_task(tid: u32) -> tracer_common::TaskId {
        tracer_common::TaskId {
            tid,
            tgid: tid,
            start_ns: 1,
        }
    }

    /// What the stage adds to the exec record of `wire`.
    fn test_env_of(e: &mut Enricher, mut wire: Wire) -> BTreeMap<String, String> {
        assert!(!e.keep(&mut wire));
        let mut rec = wire.into_record(crate::eventlog::Stamp::default()).unwrap();
        e.enrich(&mut rec);
        match rec {
            Record::Exec(x) => x.test_env,
            _ => panic!("an exec"),
        }
    }

    /// The kernel's variables go to their own exec (same tid and time),
    /// the first of a name wins, and those of an exec whose record never
    /// came are not taken by the next one.
    #[test]
    fn runner_variables_go_to_their_own_exec() {
        let scanned = tracer_common::EXEC_ENV_SCANNED;
        let mut e = Enricher::new();
        for w in [
            env_wire(7, 100, "PYTEST_CURRENT_TEST=t.py::a (call)"),
            env_wire(7, 100, "PYTEST_CURRENT_TEST=t.py::b (call)"),
            env_wire(8, 100, "JEST_WORKER_ID=2"),
            // An exec of tid 7 whose record was lost.
            env_wire(7, 90, "PYTEST_XDIST_WORKER=gw0"),
        ] {
            let mut w = w;
            assert!(e.keep(&mut w));
        }
        let env = test_env_of(&mut e, exec_wire(7, 100, scanned));
        assert_eq!(
            env.into_iter().collect::<Vec<_>>(),
            [(
                "PYTEST_CURRENT_TEST".to_string(),
                "t.py::a (call)".to_string()
            )]
        );
        let env = test_env_of(&mut e, exec_wire(8, 100, scanned));
        assert_eq!(env.get("JEST_WORKER_ID").map(String::as_str), Some("2"));
        // Scanned whole and nothing held: none, and /proc is not read
        // (pid 9 is nobody's here).
        assert!(test_env_of(&mut e, exec_wire(9, 110, scanned)).is_empty());
        assert!(e.runner_vars.held.len() == 1, "the lost exec's variable");
    }

    /// The held variables are bounded whatever arrives without its exec.
    #[test]
    fn held_variables_are_bounded() {
        let mut e = Enricher::new();
        for t in 0..10 * MAX_HELD as u64 {
            let mut w = env_wire(1, t, "JEST_WORKER_ID=1");
            assert!(e.keep(&mut w));
        }
        assert_eq!(e.runner_vars.held.len(), MAX_HELD);
    }
}
