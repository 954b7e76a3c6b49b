//! The kernel tests: the real `tracer` binary, as root, on the running
//! kernel with the real eBPF programs. One test binary, one module per
//! subject (each was a test binary of its own; each of those linked the whole
//! library again). Run one subject with a module filter:
//! `cargo xtask test -- -p tracer-user --test kernel capture::`.
//!
//! The tests that need neither root nor a kernel (fixture logs, renderers,
//! `tracer report` on bad input) are the `offline` binary.
#![expect(
    unused_crate_dependencies,
    reason = "a test binary links every dependency of the package; the library's build checks them"
)]
mod common;

mod capture;
mod cascades;
/// Helpers of the caught-then-re-raised scenarios (field_caught, field_cancel).
mod caught {
    pub(crate) mod support;
}
mod certificates;
mod ci_integrations;
mod compat;
mod crash_stacks;
mod daemon;
mod debug_ebpf;
mod errors;
mod fail_on;
mod fallback;
mod field_cancel;
mod field_caught;
mod field_hangs;
mod field_kernel;
mod field_truths;
mod hang;
mod last_words;
mod last_words_dest;
mod last_words_fd2;
mod last_words_writev;
mod leaks;
mod least_privilege;
mod metrics;
mod oom;
mod otlp;
mod pidns;
mod pipe_idiom;
mod quiet_helpers;
mod redact;
mod reliability;
mod resources;
/// Real test runners on real suites (tests/fixtures/suites).
mod runners;
mod security;
mod signal_floods;
mod snapshot;
mod teardown;
mod test_names;
mod whole_truth;
