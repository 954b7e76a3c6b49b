//! The tests that need neither root nor a kernel: the analysis over fixture
//! logs (hand-made, and real captures under tests/fixtures/), the renderers
//! under hostile strings, report.html in a real browser, `tracer report` on
//! bad logs and `tracer summarize`. Every machine runs them, as any user
//! (`cargo test -p tracer-user --test offline`); the kernel tests are the
//! `kernel` binary.
#![expect(
    unused_crate_dependencies,
    reason = "a test binary links every dependency of the package; the library's build checks them"
)]
mod analysis_fixtures;
mod bad_logs;
mod cancel_fixtures;
mod cascade_fixtures;
mod caught_fixtures;
mod common;
mod crash_stack_fixtures;
mod field_fixtures;
mod floors;
mod html_chromium;
mod next_step_fixtures;
mod oom_group_fixtures;
mod output_fuzz;
#[path = "../shared/records.rs"]
mod records;
mod report_scale;
mod resources_fixtures;
mod summarize;
mod verdict_budget;
mod verdict_fixtures;
