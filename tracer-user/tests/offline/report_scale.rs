//! Logs shaped to make the report's work grow faster than the log: a deep
//! chain of crashing processes, tens of thousands of OOM kills, a daemon
//! that starts on tens of thousands of processes, a flood of failed kills.
//! Each log is generated here (nothing big is committed), rendered by the
//! real `tracer report`, and its report checked for being right. No test
//! here asserts a time: each prints how long `tracer report` took, for
//! comparing builds (`cargo test --release -p tracer-user --test
//! report_scale -- --nocapture`); with `TRACER_SCALE_LOGS=DIR` the logs
//! are written to DIR and kept, for timing other builds on them.
use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
    time::Instant,
};

use serde_json::{json, Value};

use crate::common::{no_panic, report_cmd};

const TRACER_PID: u32 = 1000;
const BOOT_TO_WALL: i64 = 1_787_073_920_000_000_000;
/// Every process's start: far apart enough that no two collide.
const T0: u64 = 100_000_000_000;

/// A log being written: header first, `seq` and `time` filled in per event.
struct Gen {
    text: String,
    seq: u64,
}

impl Gen {
    fn new(mode: &str) -> Gen {
        let header = json!({
            "type": "header", "schema": 1, "tracer_version": "0.1.0",
            "kernel": "6.18.0-ci", "hostname": "runner-7", "mode": mode,
            "command": if mode == "record" { json!(["sh", "run.sh"]) } else { json!([]) },
            "tracer_pid": TRACER_PID, "started_at": "2026-08-18T17:26:55Z",
            "boot_to_wall_ns": BOOT_TO_WALL,
            "hooks": [
                {"name": "signal_generate", "via": "tp_btf", "attached": true},
                {"name": "process_lifecycle", "via": "tp_btf", "attached": true},
                {"name": "kill_syscalls", "via": "tracepoint", "attached": true},
                {"name": "oom_mark_victim", "via": "tracepoint", "attached": true}
            ],
            "ring_buffer_bytes": 16_777_216, "argv_capture_bytes": 4096
        });
        Gen {
            text: format!("{header}\n"),
            seq: 0,
        }
    }

    /// One event of `kind` at kernel time `t`; `body` holds the rest.
    fn event(&mut self, kind: &str, t: u64, mut body: Value) {
        self.seq += 1;
        let obj = body.as_object_mut().expect("an object");
        obj.insert("type".into(), kind.into());
        obj.insert("seq".into(), self.seq.into());
        obj.insert("t".into(), t.into());
        obj.insert(
            "time".into(),
            tracer_user::eventlog::wall_time(t, BOOT_TO_WALL).into(),
        );
        // Keep the log's field order: type, seq, t, time first.
        let mut line = format!(
            "{{\"type\":{},\"seq\":{},\"t\":{t},\"time\":{}",
            json!(kind),
            self.seq,
            obj["time"]
        );
        for (k, v) in obj.iter() {
            if !matches!(k.as_str(), "type" | "seq" | "t" | "time") {
                let _ = write!(line, ",{}:{v}", json!(k));
            }
        }
        line.push_str("}\n");
        self.text.push_str(&line);
    }

    fn fork(&mut self, t: u64, parent: Value, child: Value) {
        self.event(
            "fork",
            t,
            json!({"parent": parent, "child": child, "thread": false}),
        );
    }

    fn exec(&mut self, t: u64, task: Value, argv: &[&str]) {
        self.event(
            "exec",
            t,
            json!({"task": task, "filename": format!("/usr/bin/{}", argv[0]), "argv": argv, "argv_truncated": false}),
        );
    }

    fn exit_signaled(&mut self, t: u64, task: Value, sig: i32, name: &str, core: bool) {
        let raw = sig | if core { 0x80 } else { 0 };
        self.event(
            "exit",
            t,
            json!({"task": task, "exit_code": raw,
                   "status": {"signaled": {"signal": sig, "name": name, "core_dumped": core}},
                   "group_dead": true}),
        );
    }

    /// The trailer, and the log on disk.
    fn finish(mut self, dir: &Path, name: &str) -> PathBuf {
        let last = T0 + 10_000_000_000_000;
        let trailer = json!({
            "type": "trailer", "ended_at": tracer_user::eventlog::wall_time(last, BOOT_TO_WALL),
            "events": self.seq,
            "lost": {"ringbuf_full": 0, "tracked_map_full": 0, "inflight_map_full": 0,
                     "undecodable": 0, "per_cpu": []}
        });
        self.text.push_str(&format!("{trailer}\n"));
        let dir = std::env::var_os("TRACER_SCALE_LOGS").map_or(dir.to_owned(), PathBuf::from);
        let path = dir.join(format!("{name}.ndjson"));
        std::fs::write(&path, &self.text).unwrap();
        path
    }
}

fn task(pid: u32, start: u64, comm: &str) -> Value {
    json!({"pid": pid, "tid": pid, "start": start, "comm": comm})
}

fn tracer_task() -> Value {
    task(TRACER_PID, T0 - 1_000_000_000, "tracer")
}

/// `tracer report` of `log`, timed; its report.json parsed.
fn report(log: &Path, what: &str) -> (Value, String) {
    let out = log.with_extension("out");
    let began = Instant::now();
    let o = report_cmd(log, &out);
    let took = began.elapsed();
    let stderr = no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{what}: {stderr}");
    let size = std::fs::metadata(log).unwrap().len();
    eprintln!(
        "report_scale: `tracer report` of {what} ({:.1} MB log): {:.2} s",
        size as f64 / 1e6,
        took.as_secs_f64()
    );
    let json = std::fs::read_to_string(out.join("report.json")).unwrap();
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    (serde_json::from_str(&json).unwrap(), md)
}

/// The analysis of `log` with every certificate (report.json folds deaths
/// of one kind: report/groups.rs), shaped as report.json is.
fn unfolded(log: &Path) -> Value {
    let log = tracer_user::eventlog::read_log(log).unwrap();
    let (_, a) = tracer_user::analysis::analyze(&log, &Default::default());
    serde_json::to_value(a).unwrap()
}

/// report.json's one group of deaths: `count` of them, the example the
/// first, 20 members listed and the rest counted.
fn one_group(rep: &Value, count: usize) -> &Value {
    let groups = rep["death_groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{:#}", rep["death_groups"]);
    let g = &groups[0];
    assert_eq!(g["count"], count);
    assert_eq!(g["members"].as_array().unwrap().len(), 20);
    assert_eq!(g["members_left_out"], count - 20);
    assert_eq!(g["example"]["id"], g["id"]);
    assert_eq!(g["members"][0]["pid"], g["example"]["victim"]["pid"]);
    g
}

/// The chain an `ancestry_id` names, nearest first, as pids.
fn chain(rep: &Value, id: &Value) -> Vec<u64> {
    let table = rep["ancestors"].as_array().unwrap();
    let mut out = Vec::new();
    let mut next = id.as_u64();
    while let Some(i) = next {
        let e = &table[i as usize];
        out.push(e["pid"].as_u64().unwrap());
        next = e["parent_id"].as_u64();
    }
    out
}

/// Pid of level `i` of a chain or of worker `i`.
fn pid_of(i: u32) -> u32 {
    2000 + i
}

fn start_of(i: u32) -> u64 {
    T0 + u64::from(i) * 1_000_000
}

/// `depth` processes, each the child of the one before; then each crashes
/// with SIGSEGV, the deepest first (as a recursion unwinds): every one gets
/// a certificate citing every level above it.
fn crash_chain(dir: &Path, depth: u32) -> PathBuf {
    let mut g = Gen::new("record");
    let mut parent = tracer_task();
    for i in 0..depth {
        let me = task(pid_of(i), start_of(i), "sh");
        g.fork(start_of(i), parent, me.clone());
        let level = i.to_string();
        g.exec(start_of(i) + 10, me.clone(), &["sh", "-c", "level", &level]);
        parent = me;
    }
    let mut t = start_of(depth) + 1_000_000_000;
    for i in (0..depth).rev() {
        let me = task(pid_of(i), start_of(i), "sh");
        g.event(
            "signal",
            t,
            json!({"sender": me, "target": me, "sig": 11, "sig_name": "SIGSEGV",
                   "code": 1, "code_name": "SEGV_MAPERR", "errno": 0, "group": false,
                   "result": "delivered"}),
        );
        g.exit_signaled(t + 100, me, 11, "SIGSEGV", true);
        t += 1_000;
    }
    g.finish(dir, "crash_chain")
}

#[test]
fn a_deep_chain_of_crashing_processes() {
    let dir = tempfile::tempdir().unwrap();
    let depth = 20_000;
    let (rep, _) = report(&crash_chain(dir.path(), depth), "a 20,000-deep crash chain");
    let certs = rep["certificates"].as_array().unwrap();
    assert_eq!(certs.len(), depth as usize, "one certificate per level");
    let table = rep["ancestors"].as_array().unwrap();
    let pid_at = |id: &Value| {
        table[id.as_u64().unwrap() as usize]["pid"]
            .as_u64()
            .unwrap()
    };
    for c in certs {
        assert_eq!(c["cause"]["kind"], "fault", "{}", c["headline"]);
        // Level i's chain is every level above it, nearest first, up to
        // the run's root; the root's own is the tracer. Its first entry is
        // checked here, every entry's parent below: together, every chain.
        let pid = c["victim"]["pid"].as_u64().unwrap() as u32;
        let want = match pid - pid_of(0) {
            0 => TRACER_PID,
            level => pid_of(level - 1),
        };
        assert_eq!(
            pid_at(&c["victim"]["ancestry_id"]),
            u64::from(want),
            "pid {pid}"
        );
    }
    for e in table {
        let pid = e["pid"].as_u64().unwrap() as u32;
        match pid {
            TRACER_PID => assert!(e["parent_id"].is_null()),
            p if p == pid_of(0) => assert!(e["parent_id"].is_null(), "the chain ends at the root"),
            p => assert_eq!(pid_at(&e["parent_id"]), u64::from(p - 1), "{e}"),
        }
    }
    // Shared tails once: one entry per level, and the tracer's.
    let entries = rep["ancestors"].as_array().unwrap().len();
    assert_eq!(entries, depth as usize, "{entries} entries");
}

/// `n` workers of one shell, each OOM-killed in turn (the victim itself was
/// allocating, as is usual): the kernel's SIGKILL, the oom record, the exit.
fn oom_kills(dir: &Path, n: u32) -> PathBuf {
    let mut g = Gen::new("record");
    let root = task(pid_of(0), start_of(0), "sh");
    g.fork(start_of(0), tracer_task(), root.clone());
    g.exec(start_of(0) + 10, root.clone(), &["sh", "run.sh"]);
    for i in 1..=n {
        let w = task(pid_of(i), start_of(i), "python3");
        g.fork(start_of(i), root.clone(), w.clone());
        let arg = format!("alloc_{i}.py");
        g.exec(start_of(i) + 10, w.clone(), &["python3", &arg]);
    }
    let mut t = start_of(n + 1) + 1_000_000_000;
    for i in 1..=n {
        let w = task(pid_of(i), start_of(i), "python3");
        g.event(
            "signal",
            t,
            json!({"sender": w, "target": w, "sig": 9, "sig_name": "SIGKILL",
                   "code": 128, "code_name": "SI_KERNEL", "errno": 0, "group": true,
                   "result": "delivered"}),
        );
        g.event(
            "oom",
            t + 20_000,
            json!({"trigger": w, "victim_tid": pid_of(i),
                   "rss": {"total_vm_kb": 2_000_000, "anon_rss_kb": 500_000, "file_rss_kb": 1200,
                           "shmem_rss_kb": 0, "pgtables_kb": 1100},
                   "oom_score_adj": 0,
                   "memcg": {"id": 7001, "name": "job-7", "path": "/ci/job-7", "limit_bytes": 536_870_912u64}}),
        );
        g.exit_signaled(t + 10_000_000, w, 9, "SIGKILL", false);
        // Further apart than the pairing window: each kill pairs with its own.
        t += 2_000_000_000;
    }
    g.finish(dir, "oom_kills")
}

#[test]
fn tens_of_thousands_of_oom_kills() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40_000;
    let (rep, _) = report(&oom_kills(dir.path(), n), "40,000 OOM kills");
    let certs = rep["certificates"].as_array().unwrap();
    assert_eq!(certs.len(), n as usize);
    for c in certs {
        assert_eq!(c["cause"]["kind"], "oom", "{}", c["headline"]);
        let pid = &c["victim"]["pid"];
        assert_eq!(&c["oom"]["victim_tid"], pid, "paired with its own kill");
        assert_eq!(c["oom"]["trigger_is_victim"], true);
        assert!(c["killer"].is_null(), "the kernel, not a process");
    }
}

/// A daemon that starts on `n` processes: `existing` records, each but the
/// first the child of one listed before it (a tree 100 wide), then every
/// tenth of the deepest killed by SIGKILL from the first.
fn daemon_existing(dir: &Path, n: u32) -> PathBuf {
    let mut g = Gen::new("daemon");
    let parent_of = |i: u32| if i == 0 { 1 } else { (i - 1) / 100 };
    for i in 0..n {
        let me = task(pid_of(i), start_of(i), "worker");
        let arg = format!("--id={i}");
        g.event(
            "existing",
            T0 + 5_000_000_000_000,
            json!({"task": me, "ppid": if i == 0 { 1 } else { pid_of(parent_of(i)) },
                   "argv": ["worker", arg], "exe": "/usr/bin/worker"}),
        );
    }
    let killer = task(pid_of(0), start_of(0), "worker");
    let mut t = T0 + 6_000_000_000_000;
    for i in (n - n / 10)..n {
        let me = task(pid_of(i), start_of(i), "worker");
        g.event(
            "signal",
            t,
            json!({"sender": killer, "target": me, "sig": 9, "sig_name": "SIGKILL",
                   "code": 0, "code_name": "SI_USER", "errno": 0, "group": true,
                   "result": "delivered",
                   "call": {"id": u64::from(i), "syscall": "kill", "target_arg": pid_of(i)}}),
        );
        g.event(
            "kill_call",
            t + 1_000,
            json!({"sender": killer, "syscall": "kill", "sig": 9, "sig_name": "SIGKILL",
                   "target_arg": pid_of(i), "ret": 0, "call_id": u64::from(i), "deliveries": 1}),
        );
        g.exit_signaled(t + 100_000, me, 9, "SIGKILL", false);
        t += 1_000_000;
    }
    g.finish(dir, "daemon_existing")
}

#[test]
fn a_daemon_started_on_tens_of_thousands_of_processes() {
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000;
    let log = daemon_existing(dir.path(), n);
    let (rep, md) = report(&log, "a daemon started on 20,000 processes");
    // One story, 2,000 times: one group in the report, not 2,000
    // certificates (each an orderly stop by an ancestor).
    assert!(rep["certificates"].as_array().unwrap().is_empty());
    let g = one_group(&rep, (n / 10) as usize);
    assert_eq!(g["rank"], "expected");
    // (Its 18,000 processes still running are listed, as leftovers.)
    let deaths = md.matches("killed by SIGKILL").count();
    assert!(deaths < 10, "report.md names {deaths} deaths");
    // Every death's chain, from the analysis that folds nothing.
    let rep = unfolded(&log);
    let certs = rep["certificates"].as_array().unwrap();
    assert_eq!(certs.len(), (n / 10) as usize);
    for c in certs {
        let pid = c["victim"]["pid"].as_u64().unwrap() as u32;
        let i = pid - pid_of(0);
        // Every existing parent was found by its pid: the chain climbs the
        // 100-wide tree to the first process.
        let mut want = Vec::new();
        let mut j = i;
        while j != 0 {
            j = (j - 1) / 100;
            want.push(u64::from(pid_of(j)));
        }
        assert_eq!(chain(&rep, &c["victim"]["ancestry_id"]), want, "pid {pid}");
        assert_eq!(
            c["killer"]["process"]["pid"],
            pid_of(0),
            "{}",
            c["headline"]
        );
        assert_eq!(c["killer"]["relation"], "ancestor", "{}", c["headline"]);
    }
}

/// A chain as deep, each level killed by the run's root (a `kill` call):
/// every killer is an ancestor of its victim, found as such.
fn root_kills_chain(dir: &Path, depth: u32) -> PathBuf {
    let mut g = Gen::new("record");
    let mut parent = tracer_task();
    for i in 0..depth {
        let me = task(pid_of(i), start_of(i), "sh");
        g.fork(start_of(i), parent, me.clone());
        let level = i.to_string();
        g.exec(start_of(i) + 10, me.clone(), &["sh", "-c", "level", &level]);
        parent = me;
    }
    let root = task(pid_of(0), start_of(0), "sh");
    let mut t = start_of(depth) + 1_000_000_000;
    for i in (1..depth).rev() {
        let me = task(pid_of(i), start_of(i), "sh");
        g.event(
            "signal",
            t,
            json!({"sender": root, "target": me, "sig": 9, "sig_name": "SIGKILL",
                   "code": 0, "code_name": "SI_USER", "errno": 0, "group": true,
                   "result": "delivered",
                   "call": {"id": u64::from(i), "syscall": "kill", "target_arg": pid_of(i)}}),
        );
        g.event(
            "kill_call",
            t + 1_000,
            json!({"sender": root, "syscall": "kill", "sig": 9, "sig_name": "SIGKILL",
                   "target_arg": pid_of(i), "ret": 0, "call_id": u64::from(i), "deliveries": 1}),
        );
        g.exit_signaled(t + 100_000, me, 9, "SIGKILL", false);
        t += 1_000_000;
    }
    g.finish(dir, "root_kills_chain")
}

#[test]
fn a_deep_chain_killed_by_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let depth = 20_000;
    let log = root_kills_chain(dir.path(), depth);
    let (rep, _) = report(&log, "a 20,000-deep chain killed by its root");
    // The parent's kill is a story, the ancestor's 19,998 another.
    let kept = rep["certificates"].as_array().unwrap();
    assert_eq!(kept.len(), 1, "the root's child");
    assert_eq!(kept[0]["killer"]["relation"], "parent");
    one_group(&rep, depth as usize - 2);
    let rep = unfolded(&log);
    let certs = rep["certificates"].as_array().unwrap();
    assert_eq!(certs.len(), depth as usize - 1);
    for c in certs {
        let level = c["victim"]["pid"].as_u64().unwrap() as u32 - pid_of(0);
        let want = if level == 1 { "parent" } else { "ancestor" };
        assert_eq!(c["killer"]["relation"], want, "level {level}");
        assert_eq!(c["killer"]["process"]["pid"], pid_of(0));
    }
}

/// One worker calls `kill(tracer, SIGTERM)` `same` times (EPERM each), then
/// `kill(pid, SIGKILL)` once each at `distinct` pids that do not exist.
fn failed_kills(dir: &Path, same: u32, distinct: u32) -> PathBuf {
    let mut g = Gen::new("record");
    let root = task(pid_of(0), start_of(0), "sh");
    g.fork(start_of(0), tracer_task(), root.clone());
    g.exec(start_of(0) + 10, root.clone(), &["sh", "run.sh"]);
    let w = task(pid_of(1), start_of(1), "python3");
    g.fork(start_of(1), root.clone(), w.clone());
    g.exec(start_of(1) + 10, w.clone(), &["python3", "flood.py"]);
    let mut t = start_of(2);
    for i in 0..same {
        g.event(
            "kill_call",
            t,
            json!({"sender": w, "syscall": "kill", "sig": 15, "sig_name": "SIGTERM",
                   "target_arg": TRACER_PID, "ret": -1, "call_id": u64::from(i),
                   "deliveries": 0, "errno": "EPERM"}),
        );
        t += 1_000;
    }
    for i in 0..distinct {
        g.event(
            "kill_call",
            t,
            json!({"sender": w, "syscall": "kill", "sig": 9, "sig_name": "SIGKILL",
                   "target_arg": 100_000 + i, "ret": -3, "call_id": u64::from(same + i),
                   "deliveries": 0, "errno": "ESRCH"}),
        );
        t += 1_000;
    }
    g.finish(dir, "failed_kills")
}

#[test]
fn a_flood_of_failed_kills_is_folded_and_capped() {
    let dir = tempfile::tempdir().unwrap();
    let (same, distinct) = (200_000, 1_500);
    let log = failed_kills(dir.path(), same, distinct);
    let (rep, md) = report(
        &log,
        "200,000 failed kills of the tracer and 1,500 of dead pids",
    );
    let misses = rep["near_misses"].as_array().unwrap();
    let cap = tracer_user::analysis::MAX_NEAR_MISSES;
    assert_eq!(misses.len(), cap);
    // The 200,000 identical calls are one entry, first to last.
    let flood = &misses[0];
    assert_eq!(flood["count"], same);
    assert_eq!(
        (&flood["target_arg"], &flood["errno"]),
        (&json!(TRACER_PID), &json!("EPERM"))
    );
    assert_eq!(
        flood["last_seq"].as_u64().unwrap() - flood["seq"].as_u64().unwrap(),
        u64::from(same) - 1
    );
    // The sender is named once, through the ancestors table, for all.
    let ids: std::collections::BTreeSet<u64> = misses
        .iter()
        .map(|n| n["sender_id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let sender = &rep["ancestors"][*ids.first().unwrap() as usize];
    assert_eq!(sender["pid"], pid_of(1));
    assert_eq!(chain(&rep, &sender["parent_id"]), [u64::from(pid_of(0))]);
    assert!(misses.iter().all(|n| n.get("sender").is_none()));
    // Past the cap: counted, and said.
    let left = &rep["near_misses_left_out"];
    assert_eq!(left["entries"], distinct as usize + 1 - cap);
    assert_eq!(left["events"], distinct as usize + 1 - cap);
    assert!(md.contains("`kill(1000, SIGTERM)`"), "{md}");
    assert!(
        md.contains(&format!("| {same} |")),
        "the count is in the table"
    );
    assert!(
        md.contains("501 more kinds of failed calls (501 calls) are not listed"),
        "{md}"
    );
    // Bounded: the log is 40 MB; the old report listed every call.
    let json = std::fs::metadata(log.with_extension("out").join("report.json"))
        .unwrap()
        .len();
    assert!(json < 2 << 20, "report.json is {json} bytes");
}
