//! `tracer integrations --dir DIR [--format shell|github-env]`: the test
//! integrations `record --tests` hands its command, for the sidecar form,
//! where a daemon watches a job whose environment it cannot change. They
//! are written into DIR (`run::inject::write_kept`), and the variables
//! that load them, each joined to this process's value as `record
//! --tests` joins it to the command's (`run::inject::plan`), are printed
//! for the job to load: `export` lines for a shell, or the lines of
//! GitHub's `$GITHUB_ENV` file. Unprivileged: the CI scripts run it as
//! the job's user (kept.rs says why never as root).
use std::{io::Write as _, path::PathBuf, process::ExitCode};

use crate::{
    error::TracerError,
    run::inject::{self, Planned, INTEGRATIONS},
    text::env::{github_env, shell_export, GithubEnvRefusal},
};

#[derive(clap::Args, Debug, Clone)]
pub struct IntegrationsArgs {
    /// Where the integrations go: made 0700 when missing; an existing one
    /// must be yours and private (0700). Kept: the job's later steps load
    /// them from there.
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// How the variables are printed: `shell` (`export NAME='value'`, for
    /// `eval` or `.`) or `github-env` (lines to append to `$GITHUB_ENV`).
    #[arg(long, value_enum, default_value_t = EnvFormat::Shell)]
    pub format: EnvFormat,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvFormat {
    Shell,
    GithubEnv,
}

pub fn run(args: &IntegrationsArgs) -> Result<ExitCode, TracerError> {
    let files: Vec<(&str, &str)> = INTEGRATIONS
        .iter()
        .flat_map(|i| i.files.iter().copied())
        .collect();
    let dir = inject::write_kept(&args.dir, &files)?;
    let planned = inject::plan(INTEGRATIONS, &dir, |v| std::env::var_os(v));
    let text = render(&planned, args.format)?;
    let mut out = std::io::stdout().lock();
    // Unlike a report on stdout, this output is the point: the job's
    // environment is what it says, so a failed write fails the command.
    out.write_all(&text)
        .and_then(|()| out.flush())
        .map_err(TracerError::Stdout)?;
    let changed: Vec<String> = planned
        .iter()
        .map(|p| format!("{} {}", p.var, p.change.how))
        .collect();
    crate::say!(
        "tracer: test integrations in {}: {}",
        crate::text::terminal::line(&dir.display().to_string()),
        match changed.is_empty() {
            true => "every variable names them already".to_string(),
            false => changed.join(", "),
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The variables in `format`; all or nothing: a value the format cannot
/// carry fails the command before anything is printed.
pub fn render(planned: &[Planned], format: EnvFormat) -> Result<Vec<u8>, TracerError> {
    let mut out = Vec::new();
    for p in planned {
        let value = p.value.as_encoded_bytes();
        match format {
            EnvFormat::Shell => out.extend(shell_export(p.var, value)),
            EnvFormat::GithubEnv => {
                let line = github_env(p.var, value, delimiter).map_err(|why| {
                    TracerError::IntegrationsEnv {
                        var: p.var,
                        why: match why {
                            GithubEnvRefusal::NotUtf8 => "is not UTF-8",
                            GithubEnvRefusal::CarriageReturn => "holds a carriage return",
                        },
                    }
                })?;
                out.extend(line.into_bytes());
            }
        }
    }
    Ok(out)
}

/// A heredoc delimiter the job cannot guess: `TRACER_EOF_` and 16 random
/// hex digits (from the kernel's pool; a clock's nanoseconds if that
/// fails, still unknown to the job when it set its value).
fn delimiter() -> String {
    let hex = crate::outdir::random_hex().unwrap_or_else(|_| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        format!("{:016x}", t.as_nanos() as u64)
    });
    format!("TRACER_EOF_{hex}")
}

#[cfg(test)]
mod tests;
