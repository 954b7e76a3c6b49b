//! Root or not, and how to become root.
use std::{env, fs, path::PathBuf};

use anyhow::{Context, Result};

/// True when the effective uid is 0.
pub(crate) fn is_root() -> Result<bool> {
    let status = fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let euid = effective_uid(&status).context("no Uid line in /proc/self/status")?;
    Ok(euid == 0)
}

/// The `Uid:` line lists real, effective, saved and fs uids: take the effective one.
fn effective_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// `sudo` on PATH, if any.
pub(crate) fn sudo() -> Option<PathBuf> {
    crate::bootstrap::which("sudo", &env::var_os("PATH").unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::effective_uid;

    #[test]
    fn reads_effective_uid() {
        let status = "Name:\tx\nUid:\t1000\t0\t0\t0\nGid:\t1000\t1000\t1000\t1000\n";
        assert_eq!(effective_uid(status), Some(0));
        assert_eq!(effective_uid("Name:\tx\n"), None);
    }
}
