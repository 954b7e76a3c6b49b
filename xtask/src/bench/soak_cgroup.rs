//! The cgroup soak's memory cgroup: uniquely named, with a limit well
//! above what the job uses (it is watched, not squeezed), removed once its
//! last process has exited. cgroup v1 memory where mounted (this project's
//! hosts), else v2 with the memory controller.
use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};

const LIMIT: u64 = 512 << 20;

pub(crate) struct SoakCgroup {
    pub dir: PathBuf,
}

impl SoakCgroup {
    pub(crate) fn new() -> Result<SoakCgroup> {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
        let name = format!("tracer-soak-{}-{nanos}", std::process::id());
        let v1 = Path::new("/sys/fs/cgroup/memory");
        let v2 = Path::new("/sys/fs/cgroup");
        let (dir, limit_file) = if v1.join("memory.limit_in_bytes").exists() {
            (v1.join(name), "memory.limit_in_bytes")
        } else if fs::read_to_string(v2.join("cgroup.subtree_control"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == "memory")
        {
            (v2.join(name), "memory.max")
        } else {
            bail!("no memory cgroup controller (v1 or v2) on this machine");
        };
        fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let cg = SoakCgroup { dir };
        fs::write(cg.dir.join(limit_file), LIMIT.to_string())
            .with_context(|| format!("{}/{limit_file}", cg.dir.display()))?;
        Ok(cg)
    }
}

impl Drop for SoakCgroup {
    fn drop(&mut self) {
        // The job's last `sleep 5` may outlive it by five seconds.
        for _ in 0..100 {
            if fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("xtask: could not remove {}", self.dir.display());
    }
}
