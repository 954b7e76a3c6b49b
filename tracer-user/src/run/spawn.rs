//! Starting the wrapped command: adopted by the kernel side from its first
//! instruction, in its own process group (or session), in the run's cgroup,
//! as its own user.
use std::{
    os::unix::process::CommandExt,
    process::{Child, Command},
};

use tracer_common::RuntimeConfig;

use crate::{
    capture::Capture,
    error::TracerError,
    run::{
        interpreter, nofile,
        run_as::RunAs,
        run_cgroup,
        terminal::{self, Foreground},
    },
};

/// How the command is set up between fork and exec.
pub struct Spawn {
    /// A session of its own without a controlling terminal (another user's
    /// command on root's terminal: see `terminal`).
    pub detach: bool,
    /// `cgroup.procs` of the run's cgroup, joined before exec.
    pub cgroup: Option<std::ffi::CString>,
    /// Variables of tracer's environment the command does not get (the
    /// OTLP export's header secrets, when tracer exports).
    pub withhold_env: &'static [&'static str],
    /// Variables the command gets in place of tracer's (`--tests`).
    pub set_env: Vec<(&'static str, std::ffi::OsString)>,
}

/// Spawn CMD with the kernel adopting the tracer's next child, so the command
/// is in scope from its first instruction: no event of it can be missed.
/// `shown` is the command as errors may print it (redacted).
pub fn spawn_adopted(
    capture: &mut Capture,
    command: &[String],
    run_as: &RunAs,
    shown: &[String],
    how: Spawn,
) -> Result<Child, TracerError> {
    let (program, rest) = command.split_first().ok_or(TracerError::NoCommand)?;
    let mut cmd = Command::new(program);
    cmd.args(rest);
    for var in how.withhold_env {
        cmd.env_remove(var);
    }
    cmd.envs(how.set_env.iter().map(|(k, v)| (k, v)));
    run_as.set_env(&mut cmd);
    let child_creds = run_as.clone();
    let child_nofile = nofile::for_child();
    let fg = if how.detach {
        Foreground::none()
    } else {
        Foreground::take_if_terminal()
    };
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            // Own process group: a Ctrl-C or a group signal to the tracer is not
            // duplicated by our forwarding, and the tree can be signalled whole.
            // Detached: its own session (and so its own group) too.
            if how.detach {
                terminal::detach_from_terminal()?;
            } else {
                libc::setpgid(0, 0);
            }
            // The command's own RLIMIT_NOFILE, not tracer's raised one: a
            // program using select(2) must not see fds above 1024.
            if let Some(soft) = child_nofile {
                nofile::restore(soft);
            }
            // While still root: the run's cgroup is root's to write.
            if let Some(procs) = &how.cgroup {
                run_cgroup::join(procs);
            }
            // The command's own user (the tracer keeps root). No death
            // signal: the watchdog ends the whole run if tracer dies, with
            // one SIGTERM per process (a second one often means "force").
            child_creds.drop_privileges()?;
            fg.give_to_self();
            Ok(())
        });
    }
    capture.set_config(RuntimeConfig {
        adopt_children: 1,
        ..Default::default()
    })?;
    let spawned = cmd.spawn();
    capture.set_config(RuntimeConfig::default())?;
    spawned.map_err(|source| TracerError::Spawn {
        why: (source.kind() == std::io::ErrorKind::NotFound)
            .then(|| interpreter::missing_interpreter(program, run_as))
            .flatten(),
        cmd: shown.join(" "),
        as_user: if run_as.changes_user() {
            format!(" as {}", run_as.describe())
        } else {
            String::new()
        },
        source,
    })
}
