//! Environment assignments for another program to load: `tracer
//! integrations`' output. A value holds the job's own `PYTHONPATH` or
//! `NODE_OPTIONS` joined to tracer's, so it is untrusted: quotes, `$`,
//! backquotes, spaces, newlines, any byte. Each format reads it back as
//! exactly those bytes, or the value is refused; never a second command
//! or a second variable.

/// `export NAME='value'`, for a POSIX shell's `eval` or `.`: inside single
/// quotes no byte is special but `'` itself, which ends the quotes, is
/// escaped, and starts them again (`'\''`). A newline stays a newline in
/// the value. `name` is tracer's own (a variable name, no quoting needed).
pub fn shell_export(name: &str, value: &[u8]) -> Vec<u8> {
    let mut out = format!("export {name}='").into_bytes();
    for &b in value {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.extend_from_slice(b"'\n");
    out
}

/// Why a value cannot go into a `$GITHUB_ENV` file.
#[derive(Debug, PartialEq, Eq)]
pub enum GithubEnvRefusal {
    /// The runner reads the file as UTF-8: other bytes would come back
    /// changed.
    NotUtf8,
    /// The runner takes `\r\n` as a line's end, also inside a heredoc
    /// value: a carriage return would not come back as it was.
    CarriageReturn,
}

/// One variable for the file `$GITHUB_ENV` names (GitHub's runner reads
/// it after the step): `NAME=value` on one line; a value holding a
/// newline (which would end the line, and make the rest a variable of the
/// job's choosing) in the runner's heredoc form, `NAME<<DELIM`, the value,
/// `DELIM`, with a delimiter the value does not hold (`delimiter` is asked
/// for another until it gives one: random, so the job cannot plan one).
pub fn github_env(
    name: &str,
    value: &[u8],
    mut delimiter: impl FnMut() -> String,
) -> Result<String, GithubEnvRefusal> {
    let value = std::str::from_utf8(value).map_err(|_| GithubEnvRefusal::NotUtf8)?;
    if value.contains('\r') {
        return Err(GithubEnvRefusal::CarriageReturn);
    }
    if !value.contains('\n') {
        return Ok(format!("{name}={value}\n"));
    }
    // The value's lines are compared whole with the delimiter: one that
    // is not in it at all cannot match any of them.
    let delim = loop {
        let d = delimiter();
        if !d.is_empty() && !value.contains(&d) {
            break d;
        }
    };
    Ok(format!("{name}<<{delim}\n{value}\n{delim}\n"))
}
