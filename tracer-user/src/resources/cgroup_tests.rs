//! The parsers on files of both versions: v1 ones read on this project's
//! hybrid machine (a real OOM kill in a 32 MiB memcg, a real 10 % quota),
//! v2 ones as a v2-only runner's kernel writes them.
use super::*;

macro_rules! fixture {
    ($v:literal, $f:literal) => {
        include_str!(concat!("../../tests/fixtures/cgroup/", $v, "/", $f))
    };
}

#[test]
fn v1_memory_files() {
    assert_eq!(
        limit(fixture!("v1", "memory.limit_in_bytes")),
        Some(32 << 20)
    );
    // v1's "no limit" is PAGE_COUNTER_MAX pages, rounded down to a page.
    assert_eq!(limit("9223372036854771712\n"), None);
    assert!(number(fixture!("v1", "memory.usage_in_bytes")).is_some());
    let stat = fixture!("v1", "memory.stat");
    let (anon, file) = anon_file(stat, false);
    assert_eq!(anon, keyed(stat, "total_rss"));
    assert!(anon.is_some() && file.is_some());
    // `rss` is not `total_rss`'s prefix match: keys are whole.
    assert_eq!(keyed("total_rss 5\nrss 3\n", "rss"), Some(3));
    let ev = v1_events(
        fixture!("v1", "memory.failcnt"),
        fixture!("v1", "memory.oom_control"),
    );
    assert_eq!(ev.oom_kill, 1, "the fixture's memcg had one OOM kill");
    assert_eq!(ev.max, 83, "and hit its limit 83 times");
    assert_eq!(ev.high, 0, "v1 has no memory.high");
}

#[test]
fn v1_cpu_files() {
    let t = v1_throttling(fixture!("v1", "cpu.stat")).unwrap();
    assert_eq!((t.periods, t.throttled), (11, 11));
    assert_eq!(t.throttled_us, 722_930, "throttled_time is in ns");
    assert_eq!(
        v1_quota("10000\n", "100000\n"),
        (Some(10_000), Some(100_000))
    );
    assert_eq!(v1_quota("-1\n", "100000\n"), (None, None));
}

#[test]
fn v2_memory_files() {
    assert_eq!(limit(fixture!("v2", "memory.max")), Some(4 << 30));
    assert_eq!(limit(fixture!("v2", "memory.high")), None);
    assert_eq!(
        number(fixture!("v2", "memory.current")),
        Some(3_951_034_368)
    );
    let (anon, file) = anon_file(fixture!("v2", "memory.stat"), true);
    assert_eq!((anon, file), (Some(3_825_205_248), Some(104_857_600)));
    let ev = v2_events(fixture!("v2", "memory.events"));
    assert_eq!((ev.high, ev.max, ev.oom, ev.oom_kill), (12, 340, 2, 2));
}

#[test]
fn v2_cpu_files() {
    let (usage, t) = v2_cpu(fixture!("v2", "cpu.stat"));
    assert_eq!(usage, Some(93_000_000));
    let t = t.unwrap();
    assert_eq!(
        (t.periods, t.throttled, t.throttled_us),
        (600, 540, 41_000_000)
    );
    // Without the cpu controller: the usage only.
    let (usage, t) = v2_cpu(fixture!("v2", "cpu.stat.nocontroller"));
    assert_eq!((usage, t), (Some(244_967_616), None));
    assert_eq!(
        v2_quota(fixture!("v2", "cpu.max")),
        (Some(50_000), Some(100_000))
    );
    assert_eq!(v2_quota("max 100000\n"), (None, None));
}

#[test]
fn pressure_files() {
    let s = pressure(fixture!("v2", "memory.pressure")).unwrap();
    assert_eq!((s.some_us, s.full_us), (8_123_456, 6_543_210));
    // /proc/pressure/cpu has no `full` line before 5.13.
    let s = pressure(fixture!("v2", "cpu.pressure.system")).unwrap();
    assert_eq!((s.some_us, s.full_us), (1234, 0));
    assert_eq!(pressure(""), None);
}

#[test]
fn hybrid_membership_and_mounts() {
    let m = membership(fixture!("v1", "proc_cgroup"));
    assert_eq!(m.v2.as_deref(), Some("/"));
    assert_eq!(m.v1_memory.as_deref(), Some("/ci/job-42"));
    assert_eq!(m.v1_cpu.as_deref(), Some("/"));
    let mounts = mounts(fixture!("v1", "mountinfo"));
    assert_eq!(
        mounts.memory.as_ref().unwrap().dir,
        PathBuf::from("/sys/fs/cgroup/memory")
    );
    assert_eq!(
        mounts.cpu.as_ref().unwrap().dir,
        PathBuf::from("/sys/fs/cgroup/cpu")
    );
    assert_eq!(
        mounts.cpuacct.as_ref().unwrap().dir,
        PathBuf::from("/sys/fs/cgroup/cpuacct")
    );
    assert_eq!(
        mounts.v2.as_ref().unwrap().dir,
        PathBuf::from("/sys/fs/cgroup/unified")
    );
    assert_eq!(
        mounts.memory.unwrap().dir_of("/a/b"),
        Some(PathBuf::from("/sys/fs/cgroup/memory/a/b"))
    );
}

#[test]
fn v2_only_membership_and_mounts() {
    let m = membership(fixture!("v2", "proc_cgroup"));
    assert_eq!(
        m.v2.as_deref(),
        Some("/system.slice/runner.service/tracer-run-42-1")
    );
    assert_eq!((m.v1_memory, m.v1_cpu), (None, None));
    let mounts = mounts(fixture!("v2", "mountinfo"));
    assert!(mounts.memory.is_none() && mounts.cpu.is_none());
    assert_eq!(
        mounts.v2.unwrap().dir_of("/system.slice/x"),
        Some(PathBuf::from("/sys/fs/cgroup/system.slice/x"))
    );
    // A mount of a sub-tree (a container's) shows only what is below it.
    let sub = Mount {
        root: "/kubepods/pod1".into(),
        dir: "/sys/fs/cgroup".into(),
    };
    assert_eq!(
        sub.dir_of("/kubepods/pod1/c"),
        Some(PathBuf::from("/sys/fs/cgroup/c"))
    );
    assert_eq!(sub.dir_of("/other"), None);
    assert_eq!(sub.dir_of("/kubepods/pod1/../../x"), None);
}
