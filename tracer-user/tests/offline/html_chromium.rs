//! report.html in a real browser: headless Chromium loads the page, runs its
//! script without a console message, and the DOM it builds holds the timeline
//! the fixture calls for. Needs /usr/bin/chromium (Debian: `apt-get install
//! -y chromium`); without it these tests fail, loudly, rather than pass.
use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use tracer_user::{
    eventlog::read_log,
    report::{write, Loaded, ReportOptions},
};

const CHROMIUM: &str = "/usr/bin/chromium";

fn chromium() -> &'static str {
    assert!(
        Path::new(CHROMIUM).exists(),
        "{CHROMIUM} is missing: the report.html browser tests need it. Install it with \
         `apt-get install -y chromium` (Debian/Ubuntu), then re-run."
    );
    CHROMIUM
}

struct Page {
    dom: String,
    /// Console messages and uncaught exceptions Chromium logged.
    console: Vec<String>,
}

/// Loads `url` headless; `extra` adds e.g. `--dump-dom` or `--screenshot=`.
fn load(url: &str, extra: &[String]) -> Page {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish loading {url} within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "chromium failed on {url}: {:?}",
        out.status
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    Page {
        dom: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught"))
            .map(str::to_string)
            .collect(),
    }
}

fn url(p: &Path) -> String {
    format!("file://{}", p.display())
}

fn render_fixture(name: &str, dir: &Path) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    let log = read_log(&path).unwrap();
    let out = tracer_user::outdir::OutDir::open(dir, Default::default()).unwrap();
    write(Loaded::of(&log), &out, &ReportOptions::default(), |_| None)
        .rendered
        .unwrap();
    let html = dir.join("report.html");
    assert!(html.exists(), "report::write wrote no report.html");
    html
}

#[test]
fn seed000_group_kill_page_loads_and_draws_the_fan_out() {
    let dir = tempfile::tempdir().unwrap();
    let html = render_fixture("seed000_group_kill.ndjson", dir.path());
    let page = load(&url(&html), &["--dump-dom".to_string()]);
    assert!(
        page.console.is_empty(),
        "console output: {:#?}",
        page.console
    );
    assert!(
        page.dom.contains("data-js=\"ok\""),
        "the page's script did not run to its end"
    );
    // Lanes: root 4000, the killer 4100, victims 4242/4243/4244, and 4343
    // (outside the run, signalled from inside).
    assert_eq!(page.dom.matches("<g class=\"lane ").count(), 6, "lanes");
    // SIGTERM + SIGKILL to 4242, SIGKILL to 4243 and 4244, SIGTERM to 4343.
    assert_eq!(page.dom.matches("<path class=\"arrow").count(), 5, "arrows");
    // The three SIGKILLs of kill(-4242, SIGKILL) leave one call dot.
    assert!(
        page.dom.contains("×3</text>"),
        "no fan-out dot for the group kill"
    );
    assert_eq!(
        page.dom.matches("<g class=\"miss\">").count(),
        1,
        "near misses"
    );
    assert_eq!(page.dom.matches("<article class=\"cert ").count(), 4);
    assert!(page
        .dom
        .contains("id=\"verdict\" class=\"verdict unexpected\""));
}

#[test]
fn screenshot_renders_at_the_requested_size() {
    let dir = tempfile::tempdir().unwrap();
    let html = render_fixture("oom.ndjson", dir.path());
    let png = dir.path().join("shot.png");
    let page = load(
        &url(&html),
        &[
            format!("--screenshot={}", png.display()),
            "--window-size=1400,900".to_string(),
        ],
    );
    assert!(
        page.console.is_empty(),
        "console output: {:#?}",
        page.console
    );
    let bytes = std::fs::read(&png).expect("no screenshot written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let dim = |o: usize| u32::from_be_bytes(bytes[o..o + 4].try_into().unwrap());
    assert_eq!((dim(16), dim(20)), (1400, 900));
}

/// The console check itself: a page that throws must be caught, or the
/// assertions above prove nothing.
#[test]
fn a_throwing_page_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.html");
    std::fs::write(
        &bad,
        "<!DOCTYPE html><html><body><script>null.f();</script></body></html>",
    )
    .unwrap();
    let page = load(&url(&bad), &["--dump-dom".to_string()]);
    assert!(
        page.console
            .iter()
            .any(|l| l.contains("Uncaught TypeError")),
        "an uncaught exception went unnoticed: {:#?}",
        page.console
    );
}
