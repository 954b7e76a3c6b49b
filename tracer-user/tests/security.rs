//! Issue 12's attacks, each performed for real against the real tracer (root,
//! real kernel) and asserted to fail safely. One module per hole.
mod common;

#[path = "security/bounds.rs"]
mod bounds;
#[path = "security/ci_tmp.rs"]
mod ci_tmp;
