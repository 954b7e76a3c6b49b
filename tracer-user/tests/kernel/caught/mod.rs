//! Signals a program catches: caught, then re-raised or exited
//! (`reraised`), and the run's own cancellation and timeout, by the CI
//! runner or the tracer (`cancelled`); the helpers both share (`support`).
mod cancelled;
mod reraised;
pub(crate) mod support;
