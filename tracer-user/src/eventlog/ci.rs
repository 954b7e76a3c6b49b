//! The CI run a capture belongs to: run URL, commit, branch, job, attempt,
//! read from the CI system's own environment variables when `record` or
//! `daemon` starts (root's environment then: trusted, docs/security.md), and
//! kept in the log header, so report.json, the JUnit file and `tracer
//! summarize` can say which run of which commit a death happened in, also
//! when the log is rendered elsewhere later.
use serde::{Deserialize, Serialize};

/// A value longer than this is cut (an environment variable can be large;
/// a header line must stay small).
const MAX_VALUE: usize = 1024;

#[cfg_attr(test, derive(schemars::JsonSchema))]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct CiContext {
    /// The CI system: `github`, `gitlab`, `buildkite`, `jenkins`, or
    /// `generic` (only `TRACER_CI_*` variables were set).
    pub system: String,
    /// The URL of the run (GitHub: of the run attempt; GitLab: of the job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_url: Option<String>,
    /// The CI system's id of the run (pipeline, build).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The repository (`owner/name`, a project path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// The commit built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The branch (for a pull or merge request: its source branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The job's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Which attempt of the run or job this is, from 1 (absent where the CI
    /// system does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<String>,
}

/// `TRACER_CI_<FIELD>`: set by hand on any CI system, each wins over what
/// was detected.
const GENERIC_PREFIX: &str = "TRACER_CI_";

impl CiContext {
    /// From the process's environment.
    pub fn from_env() -> Option<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// From variables looked up by `env` (empty values count as unset).
    pub fn from_vars(env: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let get = |k: &str| {
            env(k)
                .filter(|v| !v.is_empty())
                .map(|v| v.chars().take(MAX_VALUE).collect::<String>())
        };
        let is = |k: &str| get(k).is_some_and(|v| v == "true");
        let mut c = if is("GITHUB_ACTIONS") {
            let run = match (
                get("GITHUB_SERVER_URL"),
                get("GITHUB_REPOSITORY"),
                get("GITHUB_RUN_ID"),
            ) {
                (Some(server), Some(repo), Some(id)) => Some(format!(
                    "{server}/{repo}/actions/runs/{id}{}",
                    get("GITHUB_RUN_ATTEMPT")
                        .map(|a| format!("/attempts/{a}"))
                        .unwrap_or_default()
                )),
                _ => None,
            };
            Self {
                system: "github".into(),
                run_url: run,
                run_id: get("GITHUB_RUN_ID"),
                repository: get("GITHUB_REPOSITORY"),
                commit: get("GITHUB_SHA"),
                // A pull request's own branch, not the merge ref.
                branch: get("GITHUB_HEAD_REF").or_else(|| get("GITHUB_REF_NAME")),
                job: get("GITHUB_JOB"),
                attempt: get("GITHUB_RUN_ATTEMPT"),
            }
        } else if is("GITLAB_CI") {
            Self {
                system: "gitlab".into(),
                run_url: get("CI_JOB_URL").or_else(|| get("CI_PIPELINE_URL")),
                run_id: get("CI_PIPELINE_ID"),
                repository: get("CI_PROJECT_PATH"),
                commit: get("CI_COMMIT_SHA"),
                branch: get("CI_MERGE_REQUEST_SOURCE_BRANCH_NAME")
                    .or_else(|| get("CI_COMMIT_REF_NAME")),
                job: get("CI_JOB_NAME"),
                // GitLab numbers no retries; a retried job has a new CI_JOB_ID.
                attempt: None,
            }
        } else if is("BUILDKITE") {
            Self {
                system: "buildkite".into(),
                run_url: get("BUILDKITE_BUILD_URL").map(|u| match get("BUILDKITE_JOB_ID") {
                    Some(job) => format!("{u}#{job}"),
                    None => u,
                }),
                run_id: get("BUILDKITE_BUILD_NUMBER"),
                repository: get("BUILDKITE_PIPELINE_SLUG"),
                commit: get("BUILDKITE_COMMIT"),
                branch: get("BUILDKITE_BRANCH"),
                job: get("BUILDKITE_LABEL").or_else(|| get("BUILDKITE_STEP_KEY")),
                // BUILDKITE_RETRY_COUNT counts retries: 0 is the first attempt.
                attempt: get("BUILDKITE_RETRY_COUNT")
                    .and_then(|n| n.parse::<u64>().ok())
                    .map(|n| (n + 1).to_string()),
            }
        } else if get("JENKINS_URL").is_some() {
            Self {
                system: "jenkins".into(),
                run_url: get("BUILD_URL"),
                run_id: get("BUILD_NUMBER"),
                repository: get("GIT_URL"),
                commit: get("GIT_COMMIT"),
                branch: get("BRANCH_NAME").or_else(|| get("GIT_BRANCH")),
                job: get("JOB_NAME"),
                attempt: None,
            }
        } else {
            Self {
                system: "generic".into(),
                ..Default::default()
            }
        };
        let generic = |field: &str| get(&format!("{GENERIC_PREFIX}{field}"));
        let overrides = [
            (&mut c.run_url, generic("RUN_URL")),
            (&mut c.run_id, generic("RUN_ID")),
            (&mut c.repository, generic("REPOSITORY")),
            (&mut c.commit, generic("COMMIT")),
            (&mut c.branch, generic("BRANCH")),
            (&mut c.job, generic("JOB")),
            (&mut c.attempt, generic("ATTEMPT")),
        ];
        for (field, value) in overrides {
            if value.is_some() {
                *field = value;
            }
        }
        let known = c.pairs().count() > 1;
        known.then_some(c)
    }

    /// The fields that are set, named `ci.<field>`, in a fixed order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("ci.system", Some(&self.system)),
            ("ci.run_url", self.run_url.as_ref()),
            ("ci.run_id", self.run_id.as_ref()),
            ("ci.repository", self.repository.as_ref()),
            ("ci.commit", self.commit.as_ref()),
            ("ci.branch", self.branch.as_ref()),
            ("ci.job", self.job.as_ref()),
            ("ci.attempt", self.attempt.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v.as_str())))
    }

    /// Every value, for `--redact` (a branch or job name is the job's to
    /// choose and may carry a secret as well as any argv).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Option<String>> {
        [
            &mut self.run_url,
            &mut self.run_id,
            &mut self.repository,
            &mut self.commit,
            &mut self.branch,
            &mut self.job,
            &mut self.attempt,
        ]
        .into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn github_run_url_names_the_attempt() {
        let c = CiContext::from_vars(vars(&[
            ("GITHUB_ACTIONS", "true"),
            ("GITHUB_SERVER_URL", "https://github.com"),
            ("GITHUB_REPOSITORY", "o/r"),
            ("GITHUB_RUN_ID", "99"),
            ("GITHUB_RUN_ATTEMPT", "2"),
            ("GITHUB_SHA", "abc"),
            ("GITHUB_REF_NAME", "main"),
            ("GITHUB_HEAD_REF", ""),
            ("GITHUB_JOB", "test"),
        ]))
        .unwrap();
        assert_eq!(c.system, "github");
        assert_eq!(
            c.run_url.as_deref(),
            Some("https://github.com/o/r/actions/runs/99/attempts/2")
        );
        assert_eq!(c.branch.as_deref(), Some("main"));
        assert_eq!(c.attempt.as_deref(), Some("2"));
        assert_eq!(c.job.as_deref(), Some("test"));
    }

    #[test]
    fn gitlab_buildkite_jenkins_and_generic() {
        let gl = CiContext::from_vars(vars(&[
            ("GITLAB_CI", "true"),
            ("CI_JOB_URL", "https://gl/j/1"),
            ("CI_COMMIT_SHA", "c"),
            ("CI_COMMIT_REF_NAME", "feature"),
            ("CI_JOB_NAME", "test"),
        ]))
        .unwrap();
        assert_eq!(
            (gl.system.as_str(), gl.run_url.as_deref(), gl.attempt),
            ("gitlab", Some("https://gl/j/1"), None)
        );
        let bk = CiContext::from_vars(vars(&[
            ("BUILDKITE", "true"),
            ("BUILDKITE_BUILD_URL", "https://bk/b/7"),
            ("BUILDKITE_JOB_ID", "j"),
            ("BUILDKITE_RETRY_COUNT", "0"),
        ]))
        .unwrap();
        assert_eq!(bk.run_url.as_deref(), Some("https://bk/b/7#j"));
        assert_eq!(bk.attempt.as_deref(), Some("1"));
        let jk = CiContext::from_vars(vars(&[
            ("JENKINS_URL", "https://j/"),
            ("BUILD_URL", "https://j/job/x/3/"),
            ("GIT_BRANCH", "origin/main"),
        ]))
        .unwrap();
        assert_eq!(jk.system, "jenkins");
        assert_eq!(jk.branch.as_deref(), Some("origin/main"));
        // A hand-set variable wins over what the system says.
        let over = CiContext::from_vars(vars(&[
            ("JENKINS_URL", "https://j/"),
            ("BUILD_URL", "https://j/job/x/3/"),
            ("TRACER_CI_ATTEMPT", "4"),
        ]))
        .unwrap();
        assert_eq!(over.attempt.as_deref(), Some("4"));
        let generic = CiContext::from_vars(vars(&[("TRACER_CI_COMMIT", "deadbeef")])).unwrap();
        assert_eq!(generic.system, "generic");
        assert_eq!(generic.commit.as_deref(), Some("deadbeef"));
    }

    #[test]
    fn no_ci_is_none() {
        assert_eq!(CiContext::from_vars(|_| None), None);
        assert_eq!(CiContext::from_vars(vars(&[("CI", "true")])), None);
    }
}
