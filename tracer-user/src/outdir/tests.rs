use std::{
    fs,
    io::Read,
    os::unix::fs::{symlink, MetadataExt, PermissionsExt},
};

use super::*;

fn policy() -> Policy {
    Policy::default()
}

/// A symlink owned by an unprivileged user, as the wrapped command would
/// plant it (when the test runs unprivileged it is so already).
fn plant_link(target: &Path, at: &Path) {
    symlink(target, at).unwrap();
    if Uid::effective().is_root() {
        unistd::fchownat(
            fcntl::AT_FDCWD,
            at,
            Some(Uid::from_raw(1000)),
            Some(Gid::from_raw(1000)),
            AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }
}

#[test]
fn creates_missing_directories_owner_only() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("a/b/c");
    let dir = OutDir::open(&path, policy()).unwrap();
    for p in [tmp.path().join("a"), tmp.path().join("a/b"), path.clone()] {
        assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o700, "{p:?}");
    }
    assert_eq!(dir.created.len(), 3);
    dir.write_atomic("x.json", b"{}").unwrap();
    let meta = fs::metadata(path.join("x.json")).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600);
}

#[test]
fn a_planted_link_is_replaced_never_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    let out = tmp.path().join("out");
    fs::create_dir(&out).unwrap();
    plant_link(&victim, &out.join("report.json"));
    plant_link(&victim, &out.join("events.ndjson"));
    let dir = OutDir::open(&out, policy()).unwrap();
    dir.write_atomic("report.json", b"report").unwrap();
    let mut log = dir.create_replacing("events.ndjson").unwrap();
    log.write_all(b"log").unwrap();
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    for name in ["report.json", "events.ndjson"] {
        let meta = fs::symlink_metadata(out.join(name)).unwrap();
        assert!(meta.file_type().is_file(), "{name} is still a link");
    }
    assert_eq!(fs::read(out.join("report.json")).unwrap(), b"report");
}

#[test]
fn reads_refuse_links_and_fifos() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    fs::write(&real, b"data").unwrap();
    plant_link(&real, &tmp.path().join("link"));
    nix::unistd::mkfifo(&tmp.path().join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
    let dir = OutDir::open(tmp.path(), policy()).unwrap();
    assert!(dir.open_read("link").is_err());
    // A FIFO would block the read forever: refused at open.
    assert!(dir.open_read("fifo").is_err());
    let mut s = String::new();
    dir.open_read("real")
        .unwrap()
        .read_to_string(&mut s)
        .unwrap();
    assert_eq!(s, "data");
}

#[test]
fn a_symlinked_directory_planted_by_a_user_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let out = tmp.path().join("out");
    plant_link(&elsewhere, &out);
    match OutDir::open(&out, policy()) {
        Err(OutDirError::Unsafe { reason, .. }) => assert!(reason.contains("symlink"), "{reason}"),
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("a planted link was followed"),
    }
    // Also as a parent of a nested output.
    assert!(OutDir::open(&out.join("nested"), policy()).is_err());
    assert!(!elsewhere.join("nested").exists());
}

#[test]
fn a_world_writable_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("shared");
    fs::create_dir(&out).unwrap();
    fs::set_permissions(&out, fs::Permissions::from_mode(0o1777)).unwrap();
    let err = OutDir::open(&out, policy()).err().expect("refused");
    assert!(err.to_string().contains("world-writable"), "{err}");
}

#[test]
fn a_swapped_directory_is_noticed_and_writes_stay_in_the_held_one() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let dir = OutDir::open(&out, policy()).unwrap();
    assert!(dir.check_in_place().is_ok());
    let moved = tmp.path().join("moved");
    fs::rename(&out, &moved).unwrap();
    let decoy = tmp.path().join("decoy");
    fs::create_dir(&decoy).unwrap();
    symlink(&decoy, &out).unwrap();
    assert!(dir.check_in_place().is_err());
    dir.write_atomic("report.md", b"md").unwrap();
    assert!(moved.join("report.md").exists());
    assert!(!decoy.join("report.md").exists());
}

#[test]
fn temp_names_are_unpredictable_and_left_nowhere() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = OutDir::open(tmp.path(), policy()).unwrap();
    assert_ne!(temp_name("r").unwrap(), temp_name("r").unwrap());
    dir.write_atomic("r", b"1").unwrap();
    dir.write_atomic("r", b"2").unwrap();
    assert_eq!(dir.names().unwrap(), vec!["r".to_string()]);
}
