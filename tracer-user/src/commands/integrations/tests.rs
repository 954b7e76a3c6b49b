use std::{
    collections::HashMap,
    ffi::OsString,
    os::unix::{
        ffi::{OsStrExt, OsStringExt},
        fs::{symlink, PermissionsExt},
    },
    path::Path,
    process::Command,
};

use super::*;
use crate::run::inject::{plan, write_kept};

/// Values a job could have in its `PYTHONPATH` or `NODE_OPTIONS`.
const HOSTILE: &[&str] = &[
    "/src with space:/lib",
    "it's",
    "'",
    "''\\''",
    "a\"b\\c",
    "$HOME `id` $(id) ${x:-y}",
    "--max-old-space-size=4096\nEVIL=1",
    "line\n\nlast\n",
    "--require \"/x/y.js\" --inspect",
    "\t*?[a]!#;&|<>(){}~",
];

/// What a POSIX shell holds in `name` after loading `text` as the CI
/// integrations do (`eval`), byte for byte.
fn shell_reads(text: &[u8], name: &str) -> Vec<u8> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("eval \"$1\" && printf '%s' \"${name}\""))
        .arg("sh")
        .arg(OsString::from_vec(text.to_vec()))
        .env_clear()
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every hostile value comes back from a real shell exactly as it was,
/// one variable, nothing run.
#[test]
fn shell_export_reads_back_exactly_in_a_real_shell() {
    for v in HOSTILE {
        let line = shell_export("NODE_OPTIONS", v.as_bytes());
        assert!(line.starts_with(b"export NODE_OPTIONS='"), "{v:?}");
        assert_eq!(shell_reads(&line, "NODE_OPTIONS"), v.as_bytes(), "{v:?}");
    }
    // Bytes that are not UTF-8 too: single quotes carry any byte.
    let raw = b"/opt/\xff\xfe:/x";
    assert_eq!(
        shell_reads(&shell_export("PYTHONPATH", raw), "PYTHONPATH"),
        raw
    );
}

/// `$GITHUB_ENV` as GitHub's runner reads it (`FileCommandManager`'s
/// `ReadEnvironmentFile`): `NAME=VALUE` where `=` comes before any `<<`,
/// else `NAME<<DELIM` and the lines up to one that is exactly `DELIM`,
/// joined by `\n`; a line ends at `\n` or `\r\n`.
fn github_reads(text: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if line.is_empty() {
            continue;
        }
        let eq = line.find('=');
        let here = line.find("<<");
        match (eq, here) {
            (Some(e), h) if h.is_none_or(|h| e < h) => {
                out.push((line[..e].to_string(), line[e + 1..].to_string()))
            }
            (_, Some(h)) => {
                let (name, delim) = (&line[..h], &line[h + 2..]);
                let mut body = Vec::new();
                loop {
                    let l = lines.get(i).expect("the delimiter is found");
                    i += 1;
                    if *l == delim {
                        break;
                    }
                    body.push(*l);
                }
                out.push((name.to_string(), body.join("\n")));
            }
            _ => panic!("not a variable: {line:?}"),
        }
    }
    out
}

/// Each hostile value is one variable with exactly its value; a newline
/// never starts a second variable (`EVIL=1` stays inside NODE_OPTIONS).
#[test]
fn github_env_reads_back_as_one_variable() {
    for v in HOSTILE {
        let text = github_env("NODE_OPTIONS", v.as_bytes(), || "D".repeat(3)).unwrap();
        let read = github_reads(&text);
        assert_eq!(
            read,
            [("NODE_OPTIONS".into(), v.to_string())],
            "{v:?}:\n{text}"
        );
        assert_eq!(text.contains("<<"), v.contains('\n'), "{v:?}");
    }
}

/// A delimiter the value holds is never used: the next one is asked for.
/// (A value line equal to the delimiter would end the value early and
/// make the rest the job's own variables.)
#[test]
fn github_env_never_uses_a_delimiter_the_value_holds() {
    let v = "a\nTRACER_EOF_1\nEVIL=1";
    let mut tries = ["TRACER_EOF_1", "", "TRACER_EOF_2"].into_iter();
    let text = github_env("PYTHONPATH", v.as_bytes(), || tries.next().unwrap().into()).unwrap();
    assert!(text.starts_with("PYTHONPATH<<TRACER_EOF_2\n"), "{text}");
    assert_eq!(github_reads(&text), [("PYTHONPATH".into(), v.to_string())]);
    // The real delimiter is random and tracer's own.
    let d = delimiter();
    assert!(d.starts_with("TRACER_EOF_") && d.len() == 27, "{d}");
    assert_ne!(d, delimiter());
}

/// What the runner would not read back as it is is refused, not mangled.
#[test]
fn github_env_refuses_what_the_runner_would_change() {
    assert_eq!(
        github_env("PYTHONPATH", b"/a\r\n/b", String::new),
        Err(GithubEnvRefusal::CarriageReturn)
    );
    assert_eq!(
        github_env("PYTHONPATH", b"/a\r", String::new),
        Err(GithubEnvRefusal::CarriageReturn)
    );
    assert_eq!(
        github_env("PYTHONPATH", b"/\xff", String::new),
        Err(GithubEnvRefusal::NotUtf8)
    );
    // All or nothing: render prints no variable when one is refused.
    let dir = Path::new("/tmp/tr");
    let p = plan(INTEGRATIONS, dir, |v| {
        (v == "NODE_OPTIONS").then(|| OsString::from("--a\r"))
    });
    let err = render(&p, EnvFormat::GithubEnv).unwrap_err().to_string();
    assert!(
        err.contains("NODE_OPTIONS") && err.contains("carriage return"),
        "{err}"
    );
    assert!(render(&p, EnvFormat::Shell).is_ok());
}

/// The plan the command prints is `record --tests`' plan for the
/// caller's environment: PYTHONPATH prepended, NODE_OPTIONS appended, an
/// empty value set, in both formats; a shell that loads the output gets
/// the joined values, the job's part kept exactly.
#[test]
fn render_prints_the_joined_values_in_both_formats() {
    let dir = Path::new("/home/runner/work/_temp/tracer tests");
    let env: HashMap<&str, &str> = [
        ("PYTHONPATH", "/src:/it's $HOME"),
        ("NODE_OPTIONS", "--max-old-space-size=4096"),
    ]
    .into();
    let p = plan(INTEGRATIONS, dir, |v| env.get(v).map(OsString::from));
    let want_py = format!("{}:/src:/it's $HOME", dir.display());
    let want_node = format!(
        "--max-old-space-size=4096 --require \"{}/tracer-node.js\"",
        dir.display()
    );
    let sh = render(&p, EnvFormat::Shell).unwrap();
    assert_eq!(shell_reads(&sh, "PYTHONPATH"), want_py.as_bytes());
    assert_eq!(shell_reads(&sh, "NODE_OPTIONS"), want_node.as_bytes());
    let gh = String::from_utf8(render(&p, EnvFormat::GithubEnv).unwrap()).unwrap();
    assert_eq!(
        github_reads(&gh),
        [
            ("PYTHONPATH".to_string(), want_py),
            ("NODE_OPTIONS".to_string(), want_node)
        ]
    );
    // Empty is unset to every runner: set, not joined.
    let p = plan(INTEGRATIONS, dir, |_| Some(OsString::new()));
    let gh = String::from_utf8(render(&p, EnvFormat::GithubEnv).unwrap()).unwrap();
    assert_eq!(
        gh,
        format!(
            "PYTHONPATH={0}\nNODE_OPTIONS=--require \"{0}/tracer-node.js\"\n",
            dir.display()
        )
    );
}

fn files() -> Vec<(&'static str, &'static str)> {
    INTEGRATIONS
        .iter()
        .flat_map(|i| i.files.iter().copied())
        .collect()
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// A fresh DIR is made 0700 holding exactly `record --tests`' files; a
/// second run into it replaces them (a job's re-run, a newer tracer),
/// writing through no link planted there.
#[test]
fn write_kept_makes_a_private_directory_and_replaces_in_it() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("tracer tests");
    let got = write_kept(&dir, &files()).unwrap();
    assert_eq!(got, dir);
    assert_eq!(mode(&dir), 0o700);
    for (name, text) in files() {
        assert_eq!(
            std::fs::read_to_string(dir.join(name)).unwrap(),
            text,
            "{name}"
        );
        assert_eq!(mode(&dir.join(name)), 0o444, "{name}");
    }
    assert_eq!(mode(&dir.join("tracer_pytest.dist-info")), 0o755);
    // A link planted where a file goes is replaced, its target untouched.
    let victim = base.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::fs::remove_file(dir.join("tracer-node.js")).unwrap();
    symlink(&victim, dir.join("tracer-node.js")).unwrap();
    write_kept(&dir, &files()).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(!std::fs::symlink_metadata(dir.join("tracer-node.js"))
        .unwrap()
        .file_type()
        .is_symlink());
    // No temporary name is left behind.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.as_bytes().starts_with(b"."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A relative DIR is named absolute in the variables (each process reads
/// a relative PYTHONPATH entry against its own working directory).
#[test]
fn write_kept_names_a_relative_directory_absolutely() {
    let base = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "commands::integrations::tests::relative_child",
            "--nocapture",
        ])
        .env("TRACER_KEPT_BASE", base.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(base.path().join("rel/tracer_pytest.py").is_file());
}

/// The child of the test above: changes its own working directory, which
/// a test must not do in the shared test process.
#[test]
fn relative_child() {
    let Some(base) = std::env::var_os("TRACER_KEPT_BASE") else {
        return;
    };
    std::env::set_current_dir(&base).unwrap();
    let got = write_kept(Path::new("./rel"), &files()).unwrap();
    assert_eq!(got, Path::new(&base).join("rel"));
}

/// DIR is refused, and nothing written, when it is not the caller's
/// alone: open to others, a link, a file, under a directory others can
/// write, with `..`, or with a `:` PYTHONPATH cannot carry.
#[test]
fn write_kept_refuses_a_directory_that_is_not_private() {
    let base = tempfile::tempdir().unwrap();
    let refused = |p: &Path, why: &str| {
        let err = write_kept(p, &files()).unwrap_err().to_string();
        assert!(err.contains(why), "{}: {err}", p.display());
    };
    let open = base.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
    refused(&open, "others can enter it (mode 0755)");
    assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);

    let real = base.path().join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    symlink(&real, base.path().join("link")).unwrap();
    refused(&base.path().join("link"), "a link or not a directory");
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0);
    std::fs::write(base.path().join("file"), "").unwrap();
    refused(&base.path().join("file"), "a link or not a directory");

    let shared = base.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    refused(&shared.join("t"), "is writable by others (mode 0777)");
    assert!(!shared.join("t").exists());
    // Sticky, as /tmp: nobody else can rename what is made there.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    write_kept(&shared.join("t"), &files()).unwrap();
    // Two levels up counts as much as one.
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::create_dir(shared.join("deeper")).unwrap();
    refused(&shared.join("deeper/t"), "deeper/.. is writable by others");

    refused(&base.path().join("a/../b"), "without `..`");
    refused(&base.path().join("a:b"), "has a `:`");
}
