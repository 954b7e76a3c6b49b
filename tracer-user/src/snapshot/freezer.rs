//! Whether a process sits in a frozen cgroup: cgroup v2 `cgroup.freeze`
//! (effective state in `cgroup.events`: `frozen 1`) or the v1 freezer
//! controller (`freezer.state` FREEZING/FROZEN). A frozen worker looks
//! merely asleep in /proc, so without this a hang has no explanation.
use std::path::{Path, PathBuf};

/// Where the cgroup hierarchies that can freeze are mounted, read once per
/// snapshot from our own mountinfo.
#[derive(Default)]
pub(crate) struct Mounts {
    v2: Option<PathBuf>,
    v1_freezer: Option<PathBuf>,
}

impl Mounts {
    pub(super) fn read() -> Mounts {
        let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        parse_mountinfo(&text)
    }

    /// "cgroup v2 /sys/fs/cgroup/unified/job (cgroup.freeze)" when `pid`'s
    /// cgroup is frozen, from its /proc/PID/cgroup.
    pub(super) fn frozen(&self, pid: u32) -> Option<String> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            let rel = path.trim_start_matches('/');
            if controllers.is_empty() {
                if let Some(root) = &self.v2 {
                    let dir = root.join(rel);
                    if read(&dir.join("cgroup.events"))
                        .is_some_and(|e| e.lines().any(|l| l.trim() == "frozen 1"))
                    {
                        return Some(format!("cgroup v2 {} (cgroup.freeze)", dir.display()));
                    }
                }
            } else if controllers.split(',').any(|c| c == "freezer") {
                if let Some(root) = &self.v1_freezer {
                    // The root cgroup has no freezer.state: never frozen.
                    let dir = root.join(rel);
                    let state = read(&dir.join("freezer.state")).unwrap_or_default();
                    let state = state.trim();
                    if !state.is_empty() && state != "THAWED" {
                        return Some(format!(
                            "v1 freezer {} (freezer.state {state})",
                            dir.display()
                        ));
                    }
                }
            }
        }
        None
    }
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

/// mountinfo: `id parent maj:min root mountpoint opts [tags] - fstype src superopts`.
fn parse_mountinfo(text: &str) -> Mounts {
    let mut m = Mounts::default();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mountpoint = left.split(' ').nth(4).unwrap_or("");
        let mut r = right.split(' ');
        let (fstype, _src, opts) = (r.next().unwrap_or(""), r.next(), r.next().unwrap_or(""));
        match fstype {
            "cgroup2" if m.v2.is_none() => m.v2 = Some(mountpoint.into()),
            "cgroup" if opts.split(',').any(|o| o == "freezer") => {
                m.v1_freezer = Some(mountpoint.into())
            }
            _ => {}
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_both_hierarchies() {
        let text = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n\
                    31 25 0:27 / /sys/fs/cgroup/freezer rw,nosuid shared:9 - cgroup cgroup rw,freezer\n\
                    32 25 0:28 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.v2.as_deref(), Some(Path::new("/sys/fs/cgroup/unified")));
        assert_eq!(
            m.v1_freezer.as_deref(),
            Some(Path::new("/sys/fs/cgroup/freezer"))
        );
    }
}
