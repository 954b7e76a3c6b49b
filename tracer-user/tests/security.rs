//! Security attack tests (root, real kernel): each module performs one
//! attack as the wrapped command would and asserts it fails safely.
mod common;

#[path = "security/output_injection.rs"]
mod output_injection;
