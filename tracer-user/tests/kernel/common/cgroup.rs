//! A uniquely named memory cgroup for one test, removed on drop.
//! cgroup v1 (`/sys/fs/cgroup/memory`) or v2 with the memory controller.
use std::{
    fs,
    path::{Path, PathBuf},
    time::{SystemTime, UNIX_EPOCH},
};

pub(crate) struct TestCgroup {
    pub dir: PathBuf,
}

impl TestCgroup {
    pub(crate) fn with_memory_limit(bytes: u64) -> TestCgroup {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("tracer-test-{}-{nanos}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let (root, v2) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.to_path_buf(), false)
        } else {
            let v2root = Path::new("/sys/fs/cgroup");
            let ctrl =
                fs::read_to_string(v2root.join("cgroup.subtree_control")).unwrap_or_default();
            assert!(
                ctrl.contains("memory"),
                "no memory cgroup controller (v1 or v2) on this machine"
            );
            (v2root.to_path_buf(), true)
        };
        let dir = root.join(name);
        fs::create_dir(&dir).unwrap();
        let cg = TestCgroup { dir };
        if v2 {
            cg.write("memory.max", &bytes.to_string());
            let _ = fs::write(cg.dir.join("memory.swap.max"), "0");
        } else {
            cg.write("memory.limit_in_bytes", &bytes.to_string());
        }
        cg
    }

    /// A cgroup v2 memory cgroup with `memory.max` and `memory.oom.group=1`
    /// (what Kubernetes 1.28+ gives every container): `None` where the
    /// memory controller is not on cgroup v2 at /sys/fs/cgroup (a host with
    /// v1 memory, like our CI machines).
    pub(crate) fn v2_oom_group(bytes: u64) -> Option<TestCgroup> {
        let root = Path::new("/sys/fs/cgroup");
        let ctrl = fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
        if !ctrl.split_whitespace().any(|c| c == "memory") {
            return None;
        }
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = root.join(format!("tracer-test-{}-{nanos}", std::process::id()));
        fs::create_dir(&dir).unwrap();
        let cg = TestCgroup { dir };
        cg.write("memory.max", &bytes.to_string());
        let _ = fs::write(cg.dir.join("memory.swap.max"), "0");
        cg.write("memory.oom.group", "1");
        Some(cg)
    }

    /// A CPU cgroup with a quota of `quota_us` per 100 ms period: the v1
    /// cpu hierarchy where it is mounted (this project's hosts), else
    /// cgroup v2 with the cpu controller.
    pub(crate) fn with_cpu_quota(quota_us: u64) -> TestCgroup {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let name = format!("tracer-test-{}-{nanos}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/cpu");
        let v2 = !v1.join("cpu.cfs_quota_us").exists();
        let root = if v2 {
            let v2root = Path::new("/sys/fs/cgroup");
            let ctrl =
                fs::read_to_string(v2root.join("cgroup.subtree_control")).unwrap_or_default();
            assert!(
                ctrl.split_whitespace().any(|c| c == "cpu"),
                "no cpu cgroup controller (v1 or v2) on this machine"
            );
            v2root
        } else {
            v1
        };
        let dir = root.join(name);
        fs::create_dir(&dir).unwrap();
        let cg = TestCgroup { dir };
        if v2 {
            cg.write("cpu.max", &format!("{quota_us} 100000"));
        } else {
            cg.write("cpu.cfs_period_us", "100000");
            cg.write("cpu.cfs_quota_us", &quota_us.to_string());
        }
        cg
    }

    pub(crate) fn name(&self) -> String {
        self.dir.file_name().unwrap().to_string_lossy().into_owned()
    }

    fn write(&self, file: &str, value: &str) {
        fs::write(self.dir.join(file), value)
            .unwrap_or_else(|e| panic!("{}/{file}: {e}", self.dir.display()));
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Its only members were the test's own children, dead by now.
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        eprintln!("warning: could not remove {}", self.dir.display());
    }
}
