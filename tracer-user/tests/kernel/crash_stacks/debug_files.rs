//! Stripped binaries named from their separate debug files: found by
//! build id under a debug directory, or by their debug link.
use super::*;

/// A stripped binary whose debug file (`objcopy --only-keep-debug`) is
/// installed by build id under a debug directory, as distributions do
/// (`.build-id/xx/yyyy.debug`): named in full, file and line, from that
/// file; the same binary without the directory is named by nothing
/// (`a_stripped_binary_keeps_its_frames_without_names`).
#[test]
fn a_stripped_binary_is_named_from_its_debug_file_found_by_build_id() {
    use object::Object;
    use std::os::unix::fs::PermissionsExt;
    assert!(
        have("objcopy"),
        "objcopy (binutils, beside cc) is needed: the kernel tests fail rather than skip"
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = compile(dir.path(), "split", "c", NULL_DEREF, &["-O2", "-g"]);
    let bytes = std::fs::read(&bin).unwrap();
    let id: String = object::File::parse(&bytes[..])
        .unwrap()
        .build_id()
        .unwrap()
        .expect("cc gives a build id")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let debug_dir = dir.path().join("debug");
    let sub = debug_dir.join(".build-id").join(&id[..2]);
    std::fs::create_dir_all(&sub).unwrap();
    for d in [&debug_dir, &debug_dir.join(".build-id"), &sub] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let debug_file = sub.join(format!("{}.debug", &id[2..]));
    let o = std::process::Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin)
        .arg(&debug_file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::set_permissions(&debug_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    strip(&bin);
    let r = record(&["--debug-dir", debug_dir.to_str().unwrap()], &[&bin]);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let c = the_crash(&r);
    assert_calls(c, &["parse_header", "load_file", "main"]);
    let top = &c.frames[0];
    assert_eq!(top.symbol.as_deref(), Some("parse_header"), "{c:#?}");
    assert!(top.file.as_deref().unwrap().ends_with("split.c"), "{c:#?}");
    assert_eq!(top.line, Some(5), "{c:#?}");
    assert_eq!(top.module.as_deref(), bin.to_str(), "{c:#?}");
}

/// `objcopy` as the test's setup runs it.
fn objcopy(args: &[&std::ffi::OsStr]) {
    let o = std::process::Command::new("objcopy")
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A stripped binary with no build id whose `.gnu_debuglink` names its debug
/// file beside it (`objcopy --add-gnu-debuglink`, as Debian's dh_strip did
/// before build ids): named in full, file and line, from that file. Another
/// build's debug file under the same name (its CRC-32 not the link's) is
/// never used: it would name the wrong functions, so the frames keep their
/// addresses and no names.
#[test]
fn a_stripped_binary_is_named_from_its_debug_link_and_never_from_a_mismatched_file() {
    use std::os::unix::fs::PermissionsExt;
    assert!(have("objcopy"), "objcopy (binutils, beside cc) is needed");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let flags = ["-O2", "-g", "-Wl,--build-id=none"];
    let bin = compile(dir.path(), "linked", "c", NULL_DEREF, &flags);
    let debug_file = dir.path().join("linked.debug");
    objcopy(&[
        "--only-keep-debug".as_ref(),
        bin.as_os_str(),
        debug_file.as_os_str(),
    ]);
    strip(&bin);
    let link = format!("--add-gnu-debuglink={}", debug_file.display());
    objcopy(&[link.as_ref(), bin.as_os_str()]);
    std::fs::set_permissions(&debug_file, std::fs::Permissions::from_mode(0o644)).unwrap();

    let r = record(&[], &[&bin]);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let c = the_crash(&r);
    assert_calls(c, &["parse_header", "load_file", "main"]);
    let top = &c.frames[0];
    assert!(top.build_id.is_none(), "{c:#?}");
    assert!(top.file.as_deref().unwrap().ends_with("linked.c"), "{c:#?}");
    assert_eq!(top.line, Some(5), "{c:#?}");
    assert!(
        headline(&r).contains(" in parse_header"),
        "{}",
        headline(&r)
    );

    // Another build (-O0: other addresses) of the same source, its debug
    // file put where the link points.
    let other = compile(dir.path(), "other", "c", NULL_DEREF, &["-O0", "-g"]);
    objcopy(&[
        "--only-keep-debug".as_ref(),
        other.as_os_str(),
        debug_file.as_os_str(),
    ]);
    let r = record(&[], &[&bin]);
    assert_eq!(r.code(), Some(139), "{}", r.stderr());
    let c = the_crash(&r);
    let own: Vec<_> = c
        .frames
        .iter()
        .filter(|f| f.module.as_deref() == bin.to_str())
        .collect();
    assert!(!own.is_empty(), "{c:#?}");
    assert!(
        own.iter().all(|f| f.symbol.is_none() && f.file.is_none()),
        "named from a mismatched file: {c:#?}"
    );
}
