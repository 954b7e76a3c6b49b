//! Resolve a memory cgroup's kernfs id (its directory's inode number) to a
//! path, its limit and `memory.oom.group`, for OOM records. Done at capture time: test cgroups are
//! usually gone by the time anyone reads the report.
use std::{
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

/// Memory-controller roots: cgroup v1 `memory`, then cgroup v2 mounts.
const ROOTS: [&str; 3] = [
    "/sys/fs/cgroup/memory",
    "/sys/fs/cgroup",
    "/sys/fs/cgroup/unified",
];

pub struct MemcgInfo {
    pub path: String,
    pub limit_bytes: Option<u64>,
    /// v2 `memory.oom.group` ("1": the kernel kills the whole cgroup).
    pub oom_group: Option<bool>,
}

pub fn resolve(id: u64) -> Option<MemcgInfo> {
    ROOTS
        .iter()
        .map(Path::new)
        .filter(|r| r.is_dir())
        .find_map(|root| {
            let dir = find_inode(root, id, 0)?;
            let rel = dir.strip_prefix(root).ok()?;
            Some(MemcgInfo {
                path: format!("/{}", rel.display()),
                limit_bytes: limit(&dir),
                oom_group: std::fs::read_to_string(dir.join("memory.oom.group"))
                    .ok()
                    .map(|v| v.trim() == "1"),
            })
        })
}

fn find_inode(dir: &Path, ino: u64, depth: usize) -> Option<PathBuf> {
    if dir.metadata().ok()?.ino() == ino {
        return Some(dir.to_path_buf());
    }
    if depth >= 16 {
        return None;
    }
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let ft = e.file_type().ok()?;
        ft.is_dir()
            .then(|| find_inode(&e.path(), ino, depth + 1))
            .flatten()
    })
}

/// v1 `memory.limit_in_bytes` (huge = unlimited) or v2 `memory.max` ("max").
fn limit(dir: &Path) -> Option<u64> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let v: u64 = read("memory.limit_in_bytes")
        .or_else(|| read("memory.max"))?
        .trim()
        .parse()
        .ok()?;
    (v < (1u64 << 62)).then_some(v)
}
