//! The environment variables a runner sets that name a test or a worker:
//! the only ones tracer ever keeps of an environment. The rest (tokens,
//! keys, passwords: a CI job's environment is where its secrets are) is
//! dropped where it is read, before anything is logged
//! (docs/security.md, "Environment at exec").
use std::collections::BTreeMap;

/// Every name tracer keeps, and nothing else: the names the exec program
/// looks for (`tracer_common::RUNNER_VARS`, each with its runner).
pub const ALLOWED: [&str; 8] = tracer_common::RUNNER_VARS;

/// Longest value kept: a pytest node id with its parameters fits; a value
/// longer is cut (a name only labels, and the log stays bounded).
pub const MAX_VALUE: usize = tracer_common::RUNNER_VALUE_MAX;

/// The allowed variables of a NUL-separated environment area, in name
/// order, each the first of its name (as getenv takes it); the rest is
/// never copied out of `area`.
pub fn filter(area: &[u8]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for var in area.split(|&b| b == 0) {
        let Some(eq) = var.iter().position(|&b| b == b'=') else {
            continue;
        };
        let (name, value) = (&var[..eq], &var[eq + 1..]);
        let Some(name) = ALLOWED.iter().find(|a| a.as_bytes() == name) else {
            continue;
        };
        let value = &value[..value.len().min(MAX_VALUE)];
        out.entry(name.to_string())
            .or_insert_with(|| String::from_utf8_lossy(value).into_owned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret beside the allowed names never leaves the area; an allowed
    /// name's prefix or suffix is another name; values are bounded.
    #[test]
    fn only_the_allowed_names_are_kept() {
        let long = "x".repeat(5000);
        let area = format!(
            "GITHUB_TOKEN=ghp_secret\0PYTEST_CURRENT_TEST=t.py::test_a (call)\0\
             XPYTEST_XDIST_WORKER=gw9\0PYTEST_XDIST_WORKER=gw1\0VITEST_POOL_ID=3\0\
             JEST_WORKER_ID={long}\0NOEQUALS\0VITEST_POOL_ID=4\0"
        );
        let kept = filter(area.as_bytes());
        assert_eq!(
            kept.keys().map(String::as_str).collect::<Vec<_>>(),
            [
                "JEST_WORKER_ID",
                "PYTEST_CURRENT_TEST",
                "PYTEST_XDIST_WORKER",
                "VITEST_POOL_ID"
            ]
        );
        assert_eq!(kept["PYTEST_XDIST_WORKER"], "gw1");
        assert_eq!(kept["JEST_WORKER_ID"].len(), MAX_VALUE);
        assert_eq!(
            kept["VITEST_POOL_ID"], "3",
            "the first of a name, as getenv"
        );
        assert!(!format!("{kept:?}").contains("ghp_secret"));
    }
}
