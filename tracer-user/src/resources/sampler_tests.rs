//! The sampler on cgroup trees built from fixture files: a v2-only tree (a
//! GitHub runner's: the limit on an ancestor, the cpu controller on) and
//! a v1 memory hierarchy (this project's hosts).
use std::path::Path;

use super::*;
use crate::resources::cgroup::Mount;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cgroup");

fn put(dir: &Path, name: &str, from: &str) {
    fs::create_dir_all(dir).unwrap();
    let text = fs::read_to_string(Path::new(FIX).join(from)).unwrap();
    fs::write(dir.join(name), text).unwrap();
}

fn write(dir: &Path, name: &str, text: &str) {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(name), text).unwrap();
}

#[test]
fn a_v2_tree_with_the_limit_above_the_run() {
    let t = tempfile::tempdir().unwrap();
    let (job, run) = (t.path().join("job"), t.path().join("job/run"));
    put(&job, "memory.max", "v2/memory.max");
    put(&job, "memory.events", "v2/memory.events");
    for f in [
        "memory.current",
        "memory.stat",
        "memory.high",
        "memory.swap.current",
        "cpu.stat",
        "cpu.max",
        "memory.pressure",
    ] {
        put(&run, f, &format!("v2/{f}"));
    }
    write(&run, "memory.max", "max\n");
    write(
        &run,
        "memory.events",
        "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",
    );
    put(&run, "cpu.pressure", "v2/cpu.pressure.system");
    let mounts = Mounts {
        v2: Some(Mount {
            root: "/".into(),
            dir: t.path().to_path_buf(),
        }),
        ..Default::default()
    };
    let mut s = Sampler::with_mounts(Follow::Dir(run.clone()), mounts);
    let r = s.sample(&[]);
    assert_eq!(r.memory_cgroup.as_deref(), Some("v2:/job/run"));
    let m = r.memory.unwrap();
    assert_eq!(m.usage, 3_951_034_368);
    assert_eq!(m.limit, Some(4 << 30), "the ancestor's limit");
    assert_eq!(m.limit_at.as_deref(), Some("v2:/job"));
    assert_eq!(m.high, None);
    assert_eq!(
        (m.anon, m.file, m.swap),
        (Some(3_825_205_248), Some(104_857_600), Some(0))
    );
    assert_eq!(
        (m.events.high, m.events.max, m.events.oom, m.events.oom_kill),
        (12, 340, 2, 2),
        "the limit's events, not the run's own"
    );
    assert_eq!(r.cpu_cgroup.as_deref(), Some("v2:/job/run"));
    let c = r.cpu.unwrap();
    assert_eq!(c.usage_us, 93_000_000);
    let th = c.throttling.unwrap();
    assert_eq!(
        (th.periods, th.throttled, th.throttled_us),
        (600, 540, 41_000_000)
    );
    assert_eq!((c.quota_us, c.period_us), (Some(50_000), Some(100_000)));
    assert_eq!(r.pressure_from.as_deref(), Some("v2:/job/run"));
    let p = r.pressure.unwrap();
    assert_eq!(p.memory.unwrap().some_us, 8_123_456);
    assert_eq!(p.cpu.unwrap().some_us, 1234);
    assert_eq!(p.io, None);
    assert!(r.top.is_empty() && r.unread == 0);
    // 3.7 GiB of 4 GiB: past 80 %, the fine cadence.
    assert_eq!(s.interval(), NEAR_EVERY);
}

#[test]
fn a_v1_memory_hierarchy() {
    let t = tempfile::tempdir().unwrap();
    let mem = t.path().join("memory");
    let job = mem.join("job");
    write(&mem, "memory.limit_in_bytes", "9223372036854771712\n");
    for f in [
        "memory.limit_in_bytes",
        "memory.usage_in_bytes",
        "memory.stat",
        "memory.failcnt",
        "memory.oom_control",
    ] {
        put(&job, f, &format!("v1/{f}"));
    }
    let mounts = Mounts {
        memory: Some(Mount {
            root: "/".into(),
            dir: mem.clone(),
        }),
        ..Default::default()
    };
    let mut s = Sampler::with_mounts(Follow::Dir(job), mounts);
    let r = s.sample(&[]);
    assert_eq!(r.memory_cgroup.as_deref(), Some("v1:/job"));
    let m = r.memory.unwrap();
    assert_eq!(m.limit, Some(32 << 20));
    assert_eq!(m.limit_at, None, "its own");
    assert_eq!((m.events.max, m.events.oom_kill), (83, 1));
    assert!(m.anon.is_some() && m.file.is_some());
    // No cgroup2 tree: the machine's pressure, said so.
    assert_eq!(r.pressure_from.as_deref(), Some("system"));
    assert_eq!(r.cpu, None);
    assert_eq!(s.interval(), EVERY);
}

/// A v1 cpu controller (throttling) with no readable CPU time (no cpuacct
/// hierarchy): no CPU sample, and no cgroup named for one — the reports
/// then say "not sampled" instead of drawing zeros.
#[test]
fn throttling_without_cpu_time_names_no_cpu_cgroup() {
    let t = tempfile::tempdir().unwrap();
    let top = t.path().join("cpu");
    let job = top.join("job");
    write(
        &job,
        "cpu.stat",
        "nr_periods 10\nnr_throttled 2\nthrottled_time 5000\n",
    );
    write(&job, "cpu.cfs_quota_us", "50000\n");
    write(&job, "cpu.cfs_period_us", "100000\n");
    let mounts = Mounts {
        cpu: Some(Mount {
            root: "/".into(),
            dir: top.clone(),
        }),
        ..Default::default()
    };
    let mut s = Sampler::with_mounts(Follow::Dir(job.clone()), mounts.clone());
    let r = s.sample(&[]);
    assert_eq!((r.cpu.as_ref(), r.cpu_cgroup.as_deref()), (None, None));
    // With the usage readable (cpuacct co-mounted), the throttling
    // cgroup is the one named, as docs/event-log.md says.
    write(&job, "cpuacct.usage", "2000000\n");
    let mounts = Mounts {
        cpuacct: mounts.cpu.clone(),
        ..mounts
    };
    let mut s = Sampler::with_mounts(Follow::Dir(job), mounts);
    let r = s.sample(&[]);
    assert_eq!(r.cpu_cgroup.as_deref(), Some("v1:/job"));
    let c = r.cpu.unwrap();
    assert_eq!(c.usage_us, 2000);
    assert_eq!(c.throttling.unwrap().throttled, 2);
}

/// The run's own processes, identities checked: this test process (as a
/// tracked one) is read; a wrong start time is not.
#[test]
fn the_largest_processes_are_read_by_identity() {
    let me = std::process::id();
    let (comm, ticks, rss) = stat_of(me).unwrap();
    assert!(!comm.is_empty() && rss > 0);
    let ns_per_tick = 1_000_000_000 / procfs::ticks_per_second();
    let key = ProcKey {
        pid: me,
        start: ticks * ns_per_tick,
    };
    let wrong = ProcKey {
        pid: me,
        start: (ticks + 100) * ns_per_tick,
    };
    let s = Sampler::with_mounts(Follow::Dir("/nonexistent".into()), Mounts::default());
    let (top, unread) = s.top(&[key]);
    assert_eq!(top.len(), 1);
    assert_eq!(top[0].task.key(), key);
    assert!(top[0].rss >= rss * s.page / 2);
    assert!(s.top(&[wrong]).0.is_empty(), "a recycled pid is not read");
    assert_eq!(unread, 0);
}

#[test]
fn ancestor_labels() {
    let w = Where {
        dir: Some("/sys/fs/cgroup/memory/a/b/c".into()),
        label: Some("v1:/a/b/c".into()),
        v2: false,
    };
    let d = Path::new("/sys/fs/cgroup/memory/a");
    assert_eq!(label_of(d, &w).as_deref(), Some("v1:/a"));
    let root = Path::new("/sys/fs/cgroup/memory");
    assert_eq!(label_of(root, &w).as_deref(), Some("v1:/"));
}

/// A zombie reads as in the root cgroup on v1: the sampler must see it as
/// exiting, a live child not.
#[test]
fn a_zombie_is_exiting_a_live_child_is_not() {
    let mut live = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    assert!(!exiting(live.id()), "a sleeping child is not exiting");
    // Not reaped: a zombie until `wait`. Poll its state, not the clock.
    let zombie = (0..2000).any(|_| {
        let z = procfs::process::Process::new(dead.id() as i32)
            .and_then(|p| p.stat())
            .is_ok_and(|s| s.state == 'Z');
        if !z {
            std::thread::sleep(Duration::from_millis(5));
        }
        z
    });
    assert!(zombie, "`true` became a zombie");
    assert!(exiting(dead.id()), "a zombie is exiting");
    live.kill().unwrap();
    live.wait().unwrap();
    dead.wait().unwrap();
}
