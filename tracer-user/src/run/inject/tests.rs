use std::{collections::HashMap, ffi::OsString, os::unix::ffi::OsStringExt, path::Path};

use super::*;

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
    let m: HashMap<String, OsString> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |k| m.get(k).cloned()
}

fn planned(p: &[Planned]) -> Vec<(&str, String, &str)> {
    p.iter()
        .map(|p| {
            (
                p.var,
                p.value.to_string_lossy().into_owned(),
                p.change.how.as_str(),
            )
        })
        .collect()
}

const DIR: &str = "/tmp/tracer-tests-0123456789abcdef";

/// With nothing set, pytest's variable and Node's are set, in table
/// order, and the header's record says they were unset. PYTEST_PLUGINS is
/// never set: a job replacing PYTHONPATH would make pytest fail on it.
#[test]
fn an_empty_environment_gets_every_integration() {
    let p = plan(INTEGRATIONS, Path::new(DIR), env(&[]));
    assert_eq!(
        planned(&p),
        [
            ("PYTHONPATH", DIR.into(), "set"),
            (
                "NODE_OPTIONS",
                format!("--require \"{DIR}/tracer-node.js\""),
                "set"
            ),
        ]
    );
    assert!(p.iter().all(|p| p.change.old.is_none()));
}

/// The job's own plugins and paths stay, in their order, with tracer's
/// joined as each runner reads the variable; the header keeps the old
/// values beside the new.
#[test]
fn existing_values_are_kept_and_joined() {
    let p = plan(
        INTEGRATIONS,
        Path::new(DIR),
        env(&[
            ("PYTEST_PLUGINS", "myplugin,other.mod"),
            ("PYTHONPATH", "/src:/lib with space"),
        ]),
    );
    assert_eq!(
        planned(&p),
        [
            (
                "PYTHONPATH",
                format!("{DIR}:/src:/lib with space"),
                "prepended"
            ),
            (
                "NODE_OPTIONS",
                format!("--require \"{DIR}/tracer-node.js\""),
                "set"
            ),
        ]
    );
    assert_eq!(p[0].change.old.as_deref(), Some("/src:/lib with space"));
    assert_eq!(p[0].change.new, p[0].value.to_string_lossy());
}

/// Set but empty is unset to every runner: no empty entry is added (an
/// empty PYTHONPATH entry would put the working directory on the path).
#[test]
fn an_empty_value_is_set_not_joined() {
    assert_eq!(
        join(Join::PathPrepend, Some("".as_ref()), DIR.as_ref()),
        Some((OsString::from(DIR), "set"))
    );
    assert_eq!(
        join(
            Join::ListAppend,
            Some("".as_ref()),
            "tracer_pytest".as_ref()
        ),
        Some((OsString::from("tracer_pytest"), "set"))
    );
}

/// A plugin the job already loads is not loaded twice; `a,` gets no
/// second comma; a name that only contains tracer's is another name.
#[test]
fn list_append_adds_a_name_once() {
    let add = "tracer_pytest".as_ref();
    assert_eq!(
        join(Join::ListAppend, Some("a,tracer_pytest".as_ref()), add),
        None
    );
    assert_eq!(
        join(Join::ListAppend, Some("a,".as_ref()), add),
        Some((OsString::from("a,tracer_pytest"), "appended"))
    );
    assert_eq!(
        join(Join::ListAppend, Some("tracer_pytest_x".as_ref()), add),
        Some((OsString::from("tracer_pytest_x,tracer_pytest"), "appended"))
    );
    // pytest does not strip names: " tracer_pytest" is another module.
    assert_eq!(
        join(Join::ListAppend, Some(" tracer_pytest".as_ref()), add),
        Some((OsString::from(" tracer_pytest,tracer_pytest"), "appended"))
    );
}

/// Bytes that are not UTF-8 in a job's PYTHONPATH reach the command as
/// they were; only the header's copy is lossy.
#[test]
fn values_are_bytes_not_text() {
    let old = OsString::from_vec(b"/src/\xff".to_vec());
    let (v, how) = join(Join::PathPrepend, Some(&old), DIR.as_ref()).unwrap();
    assert_eq!(how, "prepended");
    assert_eq!(v.into_vec(), [DIR.as_bytes(), b":/src/\xff"].concat());
}

/// A long old value reaches the command whole; the header keeps a
/// bounded copy and says so.
#[test]
fn the_header_copy_is_bounded() {
    let long = "/p".repeat(40_000);
    let p = plan(INTEGRATIONS, Path::new(DIR), env(&[("PYTHONPATH", &long)]));
    let py = p.iter().find(|p| p.var == "PYTHONPATH").unwrap();
    assert_eq!(py.value.len(), DIR.len() + 1 + long.len());
    let old = py.change.old.as_deref().unwrap();
    assert!(old.len() < MAX_SHOWN + 40, "{}", old.len());
    assert!(
        old.ends_with("… (80000 bytes in all)"),
        "{}",
        &old[old.len() - 40..]
    );
}

/// NODE_OPTIONS: tracer's `--require` after the job's options, its path
/// quoted as Node reads a quoted value (a `"` or `\` escaped), so a
/// space, quote or backslash in the path is one argument.
#[test]
fn node_options_append_a_quoted_require() {
    let dir = Path::new("/tmp/a b\"c\\d");
    let add = part(Part::Require("tracer-node.js"), dir);
    assert_eq!(
        add.to_string_lossy(),
        r#"--require "/tmp/a b\"c\\d/tracer-node.js""#
    );
    assert_eq!(
        join(
            Join::NodeOptionsAppend,
            Some("--max-old-space-size=4096".as_ref()),
            &add
        ),
        Some((
            OsString::from(format!(
                "--max-old-space-size=4096 {}",
                add.to_string_lossy()
            )),
            "appended"
        ))
    );
    assert_eq!(
        join(Join::NodeOptionsAppend, None, &add),
        Some((add.clone(), "set"))
    );
}

/// Two integrations on one variable join into one change, in table order
/// (a second Node integration's NODE_OPTIONS, say): the header lists the
/// variable once, with the first old value and the last new one.
#[test]
fn a_shared_variable_is_one_change() {
    const TWO: &[Integration] = &[
        Integration {
            runner: "a",
            files: &[],
            env: &[Var {
                name: "NODE_OPTIONS",
                join: Join::NodeOptionsAppend,
                part: Part::Require("a.js"),
            }],
        },
        Integration {
            runner: "b",
            files: &[],
            env: &[Var {
                name: "NODE_OPTIONS",
                join: Join::NodeOptionsAppend,
                part: Part::Require("b.js"),
            }],
        },
    ];
    let p = plan(TWO, Path::new("/d"), env(&[("NODE_OPTIONS", "--x")]));
    assert_eq!(p.len(), 1);
    assert_eq!(
        p[0].value.to_string_lossy(),
        r#"--x --require "/d/a.js" --require "/d/b.js""#
    );
    assert_eq!(p[0].change.old.as_deref(), Some("--x"));
    assert_eq!(p[0].change.how, "appended");
}

/// Every file an integration names is in the table once, and every
/// `Require` names one of them.
#[test]
fn the_table_names_its_files_once() {
    let mut names: Vec<&str> = INTEGRATIONS
        .iter()
        .flat_map(|i| i.files.iter().map(|f| f.0))
        .collect();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n);
    for v in INTEGRATIONS.iter().flat_map(|i| i.env) {
        if let Part::Require(f) = v.part {
            assert!(names.contains(&f), "{f} is not an integration file");
        }
    }
    // The pytest plugin's mark is the one labels/ parses.
    let py = INTEGRATIONS[0].files[0].1;
    assert!(py.contains(&format!("PREFIX = b\"{}\"", crate::labels::marks::PREFIX)));
    assert!(py.contains(&format!("MARK_FD = 0x{:X}", tracer_common::MARK_FD)));
    assert!(py.contains(&format!("MAX = {}", tracer_common::MARK_LEN)));
    // And so is the Node preload's.
    let node = INTEGRATIONS[1].files[0].1;
    assert!(node.contains(&format!("PREFIX = '{}'", crate::labels::marks::PREFIX)));
    assert!(node.contains(&format!("MARK_FD = 0x{:x}", tracer_common::MARK_FD)));
    assert!(node.contains(&format!("MAX = {}", tracer_common::MARK_LEN)));
}

mod directory {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    use super::super::dir::open_base;
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
    }

    /// The directory is 0700 under the given TMPDIR, its files 0444 with
    /// the table's text; removal takes what the command added (Python's
    /// `__pycache__`, a link to a file outside) without following a link.
    #[test]
    fn made_private_and_removed_whole() {
        let base = tempfile::tempdir().unwrap();
        let outside = base.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let files = [
            ("tracer_pytest.py", "print(1)\n"),
            ("b.js", "x"),
            ("d.dist-info/METADATA", "m"),
            ("d.dist-info/entry_points.txt", "e"),
        ];
        let d = IntegrationDir::create(&files, None, Some(base.path().as_os_str())).unwrap();
        let path = d.path().to_owned();
        assert_eq!(path.parent(), Some(base.path()));
        assert!(path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("tracer-tests-"));
        assert_eq!(mode(&path), 0o700);
        assert_eq!(mode(&path.join("b.js")), 0o444);
        assert_eq!(mode(&path.join("d.dist-info")), 0o755);
        assert_eq!(mode(&path.join("d.dist-info/entry_points.txt")), 0o444);
        assert_eq!(
            std::fs::read_to_string(path.join("d.dist-info/METADATA")).unwrap(),
            "m"
        );
        assert_eq!(
            std::fs::read_to_string(path.join("tracer_pytest.py")).unwrap(),
            "print(1)\n"
        );
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.uid(), nix::unistd::Uid::effective().as_raw());
        std::fs::create_dir_all(path.join("__pycache__/deeper")).unwrap();
        std::fs::write(path.join("__pycache__/tracer_pytest.pyc"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, path.join("__pycache__/link")).unwrap();
        std::os::unix::fs::symlink(base.path(), path.join("dirlink")).unwrap();
        drop(d);
        assert!(!path.exists());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
    }

    /// A name deeper than one directory, or one that climbs, makes nothing.
    #[test]
    fn only_one_level_of_subdirectory() {
        let base = tempfile::tempdir().unwrap();
        for bad in ["a/b/c", "../x", "/x", "./x"] {
            let made = IntegrationDir::create(&[(bad, "x")], None, Some(base.path().as_os_str()));
            assert!(made.is_err(), "{bad}");
        }
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 0);
    }

    /// Two runs never share a directory.
    #[test]
    fn each_run_has_its_own() {
        let base = tempfile::tempdir().unwrap();
        let a = IntegrationDir::create(&[], None, Some(base.path().as_os_str())).unwrap();
        let b = IntegrationDir::create(&[], None, Some(base.path().as_os_str())).unwrap();
        assert_ne!(a.path(), b.path());
    }

    /// A TMPDIR others may write into (and that is not sticky), or whose
    /// path would not survive PYTHONPATH's `:`, is refused and /tmp used.
    #[test]
    fn an_unsafe_tmpdir_falls_back_to_tmp() {
        let base = tempfile::tempdir().unwrap();
        let open = base.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let why = open_base(&open, false).unwrap_err();
        assert!(why.contains("writable by others"), "{why}");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(open_base(&open, false).is_ok(), "sticky, as /tmp");
        let colon = base.path().join("a:b");
        std::fs::create_dir(&colon).unwrap();
        assert!(open_base(&colon, false).is_err());
        let d = IntegrationDir::create(&[], None, Some(colon.as_os_str())).unwrap();
        assert_eq!(d.path().parent(), Some(Path::new("/tmp")));
        // Another user's command: never root's TMPDIR.
        let owner = Some((
            nix::unistd::Uid::from_raw(65534),
            nix::unistd::Gid::from_raw(65534),
        ));
        let d =
            IntegrationDir::create(&[("f", "x")], owner, Some(base.path().as_os_str())).unwrap();
        assert_eq!(d.path().parent(), Some(Path::new("/tmp")));
        let meta = std::fs::metadata(d.path()).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid(), mode(d.path())),
            (65534, 65534, 0o700)
        );
    }
}

/// `--runtime-stacks`: faulthandler on and V8's perf map asked for where
/// the command has not chosen; a value it set stays (`=0` keeps it off),
/// the flag already in NODE_OPTIONS is not added twice, and with `--tests`
/// both join NODE_OPTIONS in table order.
#[test]
fn runtime_stacks_set_what_the_command_left_unset() {
    let p = plan(RUNTIME_STACKS, Path::new("/"), env(&[]));
    assert_eq!(
        planned(&p),
        [
            ("PYTHONFAULTHANDLER", "1".into(), "set"),
            (
                "NODE_OPTIONS",
                "--perf-basic-prof-only-functions".into(),
                "set"
            ),
        ]
    );
    let p = plan(
        RUNTIME_STACKS,
        Path::new("/"),
        env(&[
            ("PYTHONFAULTHANDLER", "0"),
            ("NODE_OPTIONS", "--max-old-space-size=4096"),
        ]),
    );
    assert_eq!(
        planned(&p),
        [(
            "NODE_OPTIONS",
            "--max-old-space-size=4096 --perf-basic-prof-only-functions".into(),
            "appended"
        )]
    );
    let p = plan(
        RUNTIME_STACKS,
        Path::new("/"),
        env(&[("NODE_OPTIONS", "--perf-basic-prof-only-functions --x")]),
    );
    assert_eq!(planned(&p), [("PYTHONFAULTHANDLER", "1".into(), "set")]);
    let both: Vec<Integration> = INTEGRATIONS.iter().chain(RUNTIME_STACKS).copied().collect();
    let p = plan(&both, Path::new(DIR), env(&[]));
    let node = p.iter().find(|p| p.var == "NODE_OPTIONS").unwrap();
    assert_eq!(
        node.value.to_string_lossy(),
        format!("--require \"{DIR}/tracer-node.js\" --perf-basic-prof-only-functions")
    );
    assert_eq!(node.change.how, "set");
}
