//! The verdict tells the whole truth: what leads line 1 and what it keeps
//! (`whole_truth`), and the smaller field truths (`small_truths`: a
//! short-lived worker that says why it fails, a command that cannot run).
mod small_truths;
mod whole_truth;
