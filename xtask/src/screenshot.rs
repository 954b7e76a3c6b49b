//! `cargo xtask screenshot`: regenerate docs/images/report.png, the picture of
//! report.html in the README, from a fixture log, so it never goes stale: the
//! page is what today's `tracer report` renders, photographed by Debian's
//! headless Chromium (installed when missing, like the test tools).
use std::{fs, path::Path, process::Command};

use anyhow::{bail, Context, Result};

use crate::{build, cmd, privilege, test_deps, workspace::Workspace};

/// The run the README's picture shows: seed incident 000, a test's fork that
/// SIGKILLs a sibling worker's process group (tests/fixtures/seed000_group_kill.ndjson).
const FIXTURE: &str = "tracer-user/tests/fixtures/seed000_group_kill.ndjson";
const IMAGE: &str = "docs/images/report.png";
/// Wide enough for a certificate's table, tall enough for the verdict, the
/// timeline and the first certificate: the part of the page a reader sees first.
const WINDOW: &str = "1400,900";
/// The same Chromium the report.html browser tests drive (tests/offline/html_chromium.rs).
const CHROMIUM: (&str, &str) = ("chromium", "chromium");

pub(crate) fn run(ws: &Workspace) -> Result<()> {
    test_deps::ensure_programs(&[CHROMIUM])?;
    let tracer = build::run(ws, false)?;
    let out = ws.target_dir.join("screenshot");
    // A fresh directory each run: nothing of an earlier rendering is photographed.
    if out.exists() {
        fs::remove_dir_all(&out).with_context(|| format!("removing {}", out.display()))?;
    }
    cmd::run(
        Command::new(&tracer)
            .arg("report")
            .arg(ws.root.join(FIXTURE))
            .arg("--output")
            .arg(&out),
    )?;
    let html = out.join("report.html");
    crate::workspace::require_file(&html, "report.html")?;
    let image = ws.root.join(IMAGE);
    let mut chromium = Command::new("/usr/bin/chromium");
    // Chromium's sandbox refuses to start as root; the page is our own
    // rendering of a fixture in the repository.
    if privilege::is_root()? {
        chromium.arg("--no-sandbox");
    }
    let profile = out.join("chromium-profile");
    chromium
        .args([
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--force-device-scale-factor=1",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={WINDOW}"))
        .arg(format!("--screenshot={}", image.display()))
        .arg(file_url(&html)?);
    cmd::run(&mut chromium)?;
    let len = fs::metadata(&image)
        .with_context(|| format!("{} was not written", image.display()))?
        .len();
    if len == 0 {
        bail!("{} is empty: Chromium rendered nothing", image.display());
    }
    eprintln!("xtask: wrote {} ({len} bytes)", image.display());
    Ok(())
}

fn file_url(path: &Path) -> Result<String> {
    let path = path
        .canonicalize()
        .with_context(|| format!("resolving {}", path.display()))?;
    let s = path
        .to_str()
        .with_context(|| format!("{} is not UTF-8", path.display()))?;
    // Percent-encode what a URL path cannot hold as is.
    let mut url = String::from("file://");
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            url.push(b as char);
        } else {
            url.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_escape_what_a_path_may_hold() {
        let dir = std::env::temp_dir().join("xtask shot #1");
        fs::create_dir_all(&dir).unwrap();
        let url = file_url(&dir).unwrap();
        assert!(url.starts_with("file:///"), "{url}");
        assert!(url.ends_with("/xtask%20shot%20%231"), "{url}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
