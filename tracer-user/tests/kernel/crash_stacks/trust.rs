//! The parse child meets files the wrapped command wrote: forged object
//! lists, corrupt unwind tables and DWARF; it runs as the command's user
//! with its limits.
use super::*;

/// A process may name any file in its object list: tracer opens it with
/// the run's user's rights, so a file that user cannot read (a root-only
/// library with a telling symbol) never has its names parsed into the
/// user's report. As root (the control) the same forgery is named: the
/// test performs the attack both ways.
#[test]
fn a_forged_object_list_cannot_make_tracer_read_a_file_its_user_cannot() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = dir.path().join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret = compile(
        &private,
        "secret.so",
        "c",
        "void top_secret_function(void) { for (;;) ; }\n",
        &["-shared", "-fPIC", "-O2", "-g"],
    );
    let nm = std::process::Command::new("nm")
        .arg(&secret)
        .output()
        .unwrap();
    let sym = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .find(|l| l.ends_with(" top_secret_function"))
        .and_then(|l| l.split(' ').next().map(str::to_string))
        .expect("nm names the function");
    let forger = compile(dir.path(), "forger", "c", FORGER, &["-O2", "-g"]);
    let cmd = [forger.to_str().unwrap(), secret.to_str().unwrap(), &sym];
    let named = |r: &Recorded| {
        symbols(the_crash(r))
            .iter()
            .any(|s| s.contains("top_secret_function"))
    };
    let as_root = record(&[], &cmd);
    assert!(
        named(&as_root),
        "control: as root the forged object is read: {:#?}",
        the_crash(&as_root)
    );
    let as_nobody = record(&["--user", "nobody"], &cmd);
    assert_eq!(as_nobody.code(), Some(139), "{}", as_nobody.stderr());
    let c = the_crash(&as_nobody);
    assert!(!named(&as_nobody), "{c:#?}");
    assert_eq!(c.frames[0].module, None, "{c:#?}");
}

/// The file ranges of `bin`'s sections named `names`.
fn section_ranges(bin: &Path, names: &[&str]) -> Vec<(usize, usize)> {
    use object::{Object, ObjectSection};
    let bytes = std::fs::read(bin).unwrap();
    let obj = object::File::parse(&bytes[..]).unwrap();
    names
        .iter()
        .filter_map(|n| obj.section_by_name(n)?.file_range())
        .map(|(o, s)| (o as usize, s as usize))
        .collect()
}

/// A crasher whose unwind tables and DWARF are random bytes (the loader
/// needs neither, so it runs and crashes as before), and one whose section
/// headers point nowhere: the parse child (never tracer) meets them; the
/// certificate has the crash, its stack partial or said to have failed,
/// and tracer ends normally with the command's status.
#[test]
fn a_corrupt_binary_yields_a_partial_stack_or_symbolisation_failed_never_a_tracer_crash() {
    let dir = tempfile::tempdir().unwrap();
    let sections = [
        ".eh_frame",
        ".eh_frame_hdr",
        ".debug_info",
        ".debug_abbrev",
        ".debug_line",
        ".debug_str",
        ".debug_rnglists",
        ".symtab",
        ".strtab",
    ];
    for seed in 0..6u64 {
        let bin = compile(
            dir.path(),
            &format!("corrupt{seed}"),
            "c",
            NULL_DEREF,
            &["-O2", "-g"],
        );
        let ranges = section_ranges(&bin, &sections);
        assert!(ranges.len() >= 5, "{ranges:?}");
        let mut bytes = std::fs::read(&bin).unwrap();
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        if seed == 0 {
            // e_shoff (ELF64 0x28) far past the end, e_shnum (0x3c) huge.
            bytes[0x28..0x30].copy_from_slice(&u64::MAX.to_le_bytes()[..]);
            bytes[0x3c..0x3e].copy_from_slice(&0xfff0u16.to_le_bytes());
        } else {
            for &(off, size) in &ranges {
                // Odd seeds: all of each section; even ones: a few bytes.
                let n = if seed % 2 == 1 { size } else { 16.min(size) };
                for _ in 0..n {
                    bytes[off + next() as usize % size] = next() as u8;
                }
            }
        }
        std::fs::write(&bin, &bytes).unwrap();
        let r = run(&bin);
        assert_eq!(r.code(), Some(139), "seed {seed}: {}", r.stderr());
        assert!(
            !r.stderr().contains("panicked"),
            "seed {seed}: {}",
            r.stderr()
        );
        let c = the_crash(&r);
        assert_eq!(c.signal, "SIGSEGV");
        assert!(!c.frames.is_empty(), "seed {seed}: {c:#?}");
        if seed == 0 {
            assert_eq!(
                c.completeness,
                StackCompleteness::SymbolisationFailed,
                "{c:#?}"
            );
        }
        if c.completeness == StackCompleteness::SymbolisationFailed {
            let json: serde_json::Value =
                serde_json::from_slice(&std::fs::read(r.path("report.json")).unwrap()).unwrap();
            assert!(
                json.to_string().contains("symbolisation failed"),
                "seed {seed}: {json:#}"
            );
        }
        assert!(
            headline(&r).contains("address 0x0 not mapped"),
            "seed {seed}: {}",
            headline(&r)
        );
    }
}

/// The parse child runs as `PARSE_UID`, an identity no process has (so the
/// job cannot stop it), with the command's user (nobody) as its filesystem
/// ids only, without groups or capabilities, with no_new_privs and its
/// limits, as its own /proc/self/status and getrlimit say (tracer checks
/// them before it believes an answer, and logs them); as root the
/// command's user, its filesystem ids are nobody's all the same.
#[test]
fn the_parse_child_runs_as_the_commands_user_with_its_limits() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let bin = compile(dir.path(), "confined", "c", NULL_DEREF, &["-O2", "-g"]);
    let id = |flag: &str| {
        let o = std::process::Command::new("id")
            .args([flag, "nobody"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let (uid, gid) = (id("-u"), id("-g"));
    let parse = tracer_user::symbolize::sandbox::PARSE_UID.to_string();
    let log = [("TRACER_LOG", "tracer_user::symbolize=debug")];
    for extra in [&["--user", "nobody"][..], &[][..]] {
        let r = record_env(extra, &[&bin], &log);
        let err = r.stderr();
        let line = err
            .lines()
            .find(|l| l.contains("parse child: 1 crash(es)"))
            .unwrap_or_else(|| panic!("{extra:?}: no parse child line in {err}"));
        let want_uid = if extra.is_empty() { "65534" } else { &uid };
        let want_gid = if extra.is_empty() { "65534" } else { &gid };
        assert!(
            line.contains(&format!("uids: [{parse}, {parse}, {parse}, {want_uid}]"))
                && line.contains(&format!("gids: [{parse}, {parse}, {parse}, {want_gid}]"))
                && line.contains("groups: []")
                && line.contains("no_new_privs: true")
                && line.contains("no_caps: true")
                && line.contains("rlimit_cpu: 10 "),
            "{extra:?}: {line}"
        );
        assert!(line.contains("1 answered"), "{line}");
        let c = the_crash(&r);
        assert_eq!(
            c.frames[0].symbol.as_deref(),
            Some("parse_header"),
            "{c:#?}"
        );
    }
}
