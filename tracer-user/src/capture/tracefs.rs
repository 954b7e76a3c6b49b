//! tracefs: classic tracepoints are attached by the ids it publishes, and it is
//! not mounted on a fresh machine of ours.
use std::path::{Path, PathBuf};

const CANDIDATES: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// The tracefs root, mounting it at /sys/kernel/tracing if nothing is there.
pub fn ensure_mounted() -> Result<PathBuf, String> {
    if let Some(found) = CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| p.join("events").is_dir())
    {
        return Ok(found.to_path_buf());
    }
    let target = Path::new(CANDIDATES[0]);
    nix::mount::mount(
        Some("nodev"),
        target,
        Some("tracefs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .map_err(|e| e.desc().to_string())?;
    if target.join("events").is_dir() {
        log::info!("mounted tracefs at {}", target.display());
        Ok(target.to_path_buf())
    } else {
        Err("mounted, but it publishes no events/".into())
    }
}

/// The `format` file of a tracepoint, if it exists.
pub fn format(root: &Path, category: &str, name: &str) -> Option<String> {
    std::fs::read_to_string(root.join("events").join(category).join(name).join("format")).ok()
}
