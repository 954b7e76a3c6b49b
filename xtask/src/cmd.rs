//! Running external commands, each echoed (shell-style) before it runs.
use std::{
    ffi::OsStr,
    os::unix::process::CommandExt,
    process::{Command, Output},
};

use anyhow::{bail, Context, Result};

/// Print `cmd` to stderr as a shell line: `+ [cd DIR &&] [VAR=val ...] prog args`.
pub(crate) fn echo(cmd: &Command) {
    eprintln!("+ {}", display(cmd));
}

pub(crate) fn display(cmd: &Command) -> String {
    let mut parts = Vec::new();
    if let Some(dir) = cmd.get_current_dir() {
        parts.push(format!("cd {} &&", quote(dir.as_os_str())));
    }
    for (key, value) in cmd.get_envs() {
        let Some(value) = value else { continue };
        // `PATH=/dir:<the current PATH>` reads better as `PATH=/dir:$PATH`.
        let value = match (key == "PATH", std::env::var_os("PATH")) {
            (true, Some(current)) => match value
                .to_string_lossy()
                .strip_suffix(&format!(":{}", current.to_string_lossy()))
            {
                Some(prefix) => format!("{}:$PATH", quote(OsStr::new(prefix))),
                None => quote(value),
            },
            _ => quote(value),
        };
        parts.push(format!("{}={value}", key.to_string_lossy()));
    }
    parts.push(quote(cmd.get_program()));
    parts.extend(cmd.get_args().map(quote));
    parts.join(" ")
}

fn quote(arg: &OsStr) -> String {
    let s = arg.to_string_lossy();
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Run to completion with inherited stdio; fail unless it exits 0.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    echo(cmd);
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{}`", display(cmd)))?;
    if !status.success() {
        bail!("`{}` failed ({status})", display(cmd));
    }
    Ok(())
}

/// Run and capture output (echoed too); the caller judges the status.
pub(crate) fn output(cmd: &mut Command) -> Result<Output> {
    echo(cmd);
    cmd.output()
        .with_context(|| format!("could not start `{}`", display(cmd)))
}

/// Replace this process with `cmd`, so its exit status (code or signal) and
/// terminal signals are exactly the caller's. Returns only on failure.
pub(crate) fn exec(cmd: &mut Command) -> anyhow::Error {
    echo(cmd);
    let err = cmd.exec();
    anyhow::Error::new(err).context(format!("could not exec `{}`", display(cmd)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_a_shell_line() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "exit 3", "it's"])
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir("/tmp");
        assert_eq!(
            display(&cmd),
            r"cd /tmp && RUSTC_BOOTSTRAP=1 sh -c 'exit 3' 'it'\''s'"
        );
    }
}
