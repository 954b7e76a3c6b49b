//! Why a command that exists "was not found": execve(2) says ENOENT for a
//! script whose `#!` interpreter is missing (`#!/nonexistent/python`), and
//! "No such file or directory" about a file that is plainly there sends a
//! reader looking in the wrong place. This reads the script's first line to
//! name the missing interpreter — only what the command's own user could
//! read: no symlink followed anywhere in the path (openat2
//! RESOLVE_NO_SYMLINKS, so a link swapped in after the failure cannot point
//! it at a file of root's), a regular file whose mode bits let that user
//! read it, checked on an `O_PATH` handle before it is reopened for reading.
use std::{
    io::Read,
    path::{Path, PathBuf},
};

use nix::fcntl::{ResolveFlag, AT_FDCWD};

use super::run_as::RunAs;

/// The most of a script's first line read: the kernel itself reads at most
/// 256 bytes of a `#!` line (BINPRM_BUF_SIZE).
const SHEBANG_MAX: usize = 256;

/// "its interpreter /nonexistent/python (the script's `#!` line) was not
/// found", when `program` is a script whose interpreter does not exist;
/// `None` in every other case (the plain error then stands).
pub fn missing_interpreter(program: &str, run_as: &RunAs) -> Option<String> {
    let script = locate(program)?;
    let line = first_line(&script, run_as)?;
    let interp = line.strip_prefix("#!")?.split_whitespace().next()?;
    match std::fs::metadata(interp) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(format!(
            "its interpreter {interp} (the script's `#!` line) was not found"
        )),
        _ => None,
    }
}

/// The file execve was given: a path as is, a bare name through PATH, as
/// the command's spawn searched it.
fn locate(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The first line of `script`, if `run_as` may read it.
fn first_line(script: &Path, run_as: &RunAs) -> Option<String> {
    // O_PATH first, checked on that handle, then reopened: a FIFO or
    // device named by the command is never opened for reading.
    let mut file =
        crate::outdir::open_checked(AT_FDCWD, script, ResolveFlag::RESOLVE_NO_SYMLINKS, |st| {
            run_as
                .may_read(st.st_uid, st.st_gid, st.st_mode)
                .then_some(())
                .ok_or_else(|| "not readable by the command's user".to_string())
        })
        .ok()?;
    let mut buf = vec![0u8; SHEBANG_MAX];
    let n = file.read(&mut buf).ok()?;
    let head = String::from_utf8_lossy(&buf[..n]);
    Some(head.lines().next()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, name: &str, body: &str, mode: u32) -> String {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p.to_str().unwrap().to_string()
    }

    #[test]
    fn a_missing_interpreter_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let bad = script(
            dir.path(),
            "bad.py",
            "#!/nonexistent/python -u\nprint(1)\n",
            0o755,
        );
        assert_eq!(
            missing_interpreter(&bad, &RunAs::current()).as_deref(),
            Some("its interpreter /nonexistent/python (the script's `#!` line) was not found")
        );
        // An interpreter that exists, or no `#!` at all: nothing to add.
        let good = script(dir.path(), "good.sh", "#!/bin/sh\n", 0o755);
        assert_eq!(missing_interpreter(&good, &RunAs::current()), None);
        let bin = script(dir.path(), "plain", "\x7fELF", 0o755);
        assert_eq!(missing_interpreter(&bin, &RunAs::current()), None);
        assert_eq!(
            missing_interpreter("/nonexistent/cmd", &RunAs::current()),
            None
        );
    }

    /// The attack: a user names (or swaps in) a script they cannot read —
    /// root's own, whose first line tracer would otherwise quote. Its
    /// interpreter stays unsaid unless its mode bits let that user read it.
    #[test]
    fn a_file_the_user_may_not_read_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let nobody = RunAs::for_test(65534, 65534);
        let secret = script(dir.path(), "root-only", "#!/nonexistent/s3cr3t\n", 0o700);
        assert_eq!(missing_interpreter(&secret, &nobody), None);
        assert!(missing_interpreter(&secret, &RunAs::current()).is_some());
        let shared = script(dir.path(), "world", "#!/nonexistent/python\n", 0o755);
        assert!(missing_interpreter(&shared, &nobody).is_some());
        // Owner bits decide for the owner, group bits for the group.
        assert!(!nobody.may_read(65534, 0, 0o044));
        assert!(nobody.may_read(0, 65534, 0o040));
        assert!(!nobody.may_read(0, 65534, 0o004));
    }

    #[test]
    fn no_symlink_is_followed() {
        let dir = tempfile::tempdir().unwrap();
        let bad = script(dir.path(), "bad.py", "#!/nonexistent/python\n", 0o755);
        let link = dir.path().join("link.py");
        std::os::unix::fs::symlink(&bad, &link).unwrap();
        assert_eq!(
            missing_interpreter(link.to_str().unwrap(), &RunAs::current()),
            None,
            "a link (which the command's user could have swapped in) is not read"
        );
    }
}
