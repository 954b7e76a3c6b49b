//! The output directory belongs to the run's user and the command attacks it
//! during the run: links planted under every name tracer writes, the log
//! swapped for /dev/zero, the directory moved away and replaced by a link, a
//! full disk. Root tracer must write nowhere else, never hang, and pass the
//! command's status through.
use std::{
    fs,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::{Path, PathBuf},
    process::Output,
};

use crate::common::*;

/// The unprivileged user the attacking command runs as (`nobody`).
const NOBODY: u32 = 65534;

/// base/ (root, 0711) holds a root-only victim file and a work directory the
/// command owns, with the output directory in it.
struct Stage {
    _base: tempfile::TempDir,
    base: PathBuf,
    work: PathBuf,
    out: PathBuf,
    victim: PathBuf,
}

const PRECIOUS: &[u8] = b"root's file: must never change\n";

fn stage() -> Stage {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().to_path_buf();
    fs::set_permissions(&base, fs::Permissions::from_mode(0o711)).unwrap();
    let secret = base.join("secret");
    fs::create_dir(&secret).unwrap();
    fs::set_permissions(&secret, fs::Permissions::from_mode(0o700)).unwrap();
    let victim = secret.join("victim");
    fs::write(&victim, PRECIOUS).unwrap();
    let work = base.join("work");
    let out = work.join("out");
    fs::create_dir_all(&out).unwrap();
    for d in [&work, &out] {
        std::os::unix::fs::chown(d, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    Stage {
        _base: tmp,
        base,
        work,
        out,
        victim,
    }
}

/// `tracer record --user nobody --output OUT -- bash -c SCRIPT`, with the
/// stage's paths in the script's environment.
fn attack(s: &Stage, script: &str) -> Output {
    record_command(
        &s.out,
        &["--user", &NOBODY.to_string()],
        &["bash", "-c", script],
    )
    .env("OUT", &s.out)
    .env("WORK", &s.work)
    .env("VICTIM", &s.victim)
    .env("BASE", &s.base)
    .output()
    .expect("run tracer")
}

fn assert_victim_intact(s: &Stage) {
    assert_eq!(
        fs::read(&s.victim).unwrap(),
        PRECIOUS,
        "root's file was overwritten"
    );
    let meta = fs::metadata(&s.victim).unwrap();
    assert_eq!(
        (meta.uid(), meta.mode() & 0o777),
        (0, 0o644),
        "root's file changed hands"
    );
}

/// Each report and the log: a regular file (not a link), 0600, the run's user's.
fn assert_outputs_safe(dir: &Path) {
    for name in ["events.ndjson", "report.json", "report.md", "report.html"] {
        let meta = fs::symlink_metadata(dir.join(name))
            .unwrap_or_else(|e| panic!("{name} missing in {dir:?}: {e}"));
        assert!(meta.file_type().is_file(), "{name} is not a regular file");
        assert_eq!(meta.mode() & 0o777, 0o600, "{name} mode");
        assert_eq!(meta.uid(), NOBODY, "{name} owner");
    }
}

#[test]
fn links_planted_under_every_output_name_are_replaced_not_followed() {
    let s = stage();
    fs::set_permissions(&s.victim, fs::Permissions::from_mode(0o644)).unwrap();
    // Every name tracer writes, and the temp names an older tracer used.
    let out = attack(
        &s,
        r#"cd "$OUT" || exit 99
           for n in events.ndjson report.json report.md report.html report.tmp \
                    report.json.tmp report.md.tmp report.html.tmp; do
               rm -f "$n"; ln -s "$VICTIM" "$n" || exit 98
           done
           exit 3"#,
    );
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_victim_intact(&s);
    assert_outputs_safe(&s.out);
    let report = fs::read_to_string(s.out.join("report.json")).unwrap();
    assert!(
        report.contains("\"exit_code\": 3") || report.contains("\"code\": 3"),
        "{report}"
    );
}

#[test]
fn the_log_swapped_for_dev_zero_is_never_read() {
    let s = stage();
    fs::set_permissions(&s.victim, fs::Permissions::from_mode(0o644)).unwrap();
    let out = attack(
        &s,
        r#"cd "$OUT" && rm -f events.ndjson && ln -s /dev/zero events.ndjson || exit 99
           sh -c 'kill -TERM $$'
           exit 4"#,
    );
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(4), "{stderr}");
    // The reports were built from tracer's own file: the SIGTERM is there.
    let report = fs::read_to_string(s.out.join("report.json")).unwrap();
    assert!(
        report.contains("SIGTERM"),
        "report lacks the run's events: {report}"
    );
    // The link was replaced by tracer's own copy of the log.
    assert!(
        stderr.contains("tracer's own copy was written back"),
        "{stderr}"
    );
    assert_outputs_safe(&s.out);
    let log = tracer_user::eventlog::read_log(&s.out.join("events.ndjson")).unwrap();
    assert!(!log.truncated);

    // `tracer report` on a planted /dev/zero link refuses it instead of
    // reading forever.
    let link = s.work.join("zero.ndjson");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let again = report_cmd(&link, &s.base.join("again"));
    let stderr = no_panic(&again);
    assert_eq!(again.status.code(), Some(70), "{stderr}");
    assert!(stderr.contains("zero.ndjson"), "{stderr}");
}

#[test]
fn a_swapped_output_directory_is_noticed_and_nothing_lands_in_the_decoy() {
    let s = stage();
    fs::set_permissions(&s.victim, fs::Permissions::from_mode(0o644)).unwrap();
    let decoy = s.base.join("decoy");
    fs::create_dir(&decoy).unwrap();
    let out = record_command(
        &s.out,
        &["--user", &NOBODY.to_string()],
        &[
            "bash",
            "-c",
            r#"mv "$OUT" "$WORK/moved" && ln -s "$DECOY" "$OUT" || exit 99; exit 6"#,
        ],
    )
    .env("OUT", &s.out)
    .env("WORK", &s.work)
    .env("DECOY", &decoy)
    .output()
    .unwrap();
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert!(stderr.contains("was replaced during the run"), "{stderr}");
    assert_eq!(
        fs::read_dir(&decoy).unwrap().count(),
        0,
        "tracer wrote into the decoy"
    );
    assert_outputs_safe(&s.work.join("moved"));
    assert_victim_intact(&s);
}

#[test]
fn a_directory_others_can_write_or_a_planted_link_is_refused_up_front() {
    let s = stage();
    let shared = s.base.join("shared");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let out = record_command(&shared, &[], &["true"]).output().unwrap();
    let line = one_line_failure(&out);
    assert!(
        line.contains("world-writable") && line.contains("--output"),
        "{line}"
    );

    // The command's user left a link where the output directory will be.
    let link = s.work.join("report-link");
    std::os::unix::fs::symlink(s.victim.parent().unwrap(), &link).unwrap();
    nix::unistd::fchownat(
        nix::fcntl::AT_FDCWD,
        &link,
        Some(nix::unistd::Uid::from_raw(NOBODY)),
        Some(nix::unistd::Gid::from_raw(NOBODY)),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    )
    .unwrap();
    let out = record_command(&link, &[], &["true"]).output().unwrap();
    let line = one_line_failure(&out);
    assert!(line.contains("symlink"), "{line}");
    assert_eq!(
        fs::read_dir(s.victim.parent().unwrap()).unwrap().count(),
        1,
        "tracer wrote through the planted link"
    );
}

/// A small tmpfs, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Self {
        fs::create_dir_all(at).unwrap();
        nix::mount::mount(
            Some("tracer-test"),
            at,
            Some("tmpfs"),
            nix::mount::MsFlags::empty(),
            Some(format!("size={size},mode=1777").as_str()),
        )
        .expect("mount a tmpfs");
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

#[test]
fn a_full_disk_costs_events_not_the_command_or_its_status() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let fs_dir = tmp.path().join("small");
    let _tmpfs = Tmpfs::mount(&fs_dir, "256k");
    let out_dir = fs_dir.join("out");
    // Fill the disk, make the log grow past the flush size while it is full
    // (a few hundred short-lived processes), free the space, and exit 5: the
    // command finishes, its status passes through, and the reports (written
    // once space is back) count what the log could not take.
    let out = record_command(
        &out_dir,
        &[],
        &[
            "bash",
            "-c",
            r#"head -c 1M /dev/zero > "$FS/fill" 2>/dev/null
               for i in $(seq 400); do /bin/true --a-long-argument-to-make-the-log-grow-faster-$i; done
               rm -f "$FS/fill"
               exit 5"#,
        ],
    )
    .env("FS", &fs_dir)
        .output()
        .unwrap();
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("stopped being written") && stderr.contains("No space left"),
        "{stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out_dir.join("report.json")).unwrap()).unwrap();
    let lost = &report["log"]["lost"];
    assert!(lost["unwritten"].as_u64().unwrap_or(0) > 0, "{lost}");
    assert!(
        lost["write_error"]
            .as_str()
            .unwrap_or("")
            .contains("No space left"),
        "{lost}"
    );
    let md = fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("not written to the log"), "{md}");
}

/// `--junit PATH` outside the output directory, in a directory the command
/// owns: a link planted at the file's name during the run is replaced,
/// never followed (a plain write would have overwritten root's file), and
/// the file is the run's user's, 0600; the directory moved away and
/// replaced by a link to root's during the run gets nothing: tracer writes
/// into the directory it held from the start.
#[test]
fn a_junit_file_outside_the_output_directory_gets_the_same_care() {
    let s = stage();
    fs::set_permissions(&s.victim, fs::Permissions::from_mode(0o644)).unwrap();
    let jdir = s.work.join("junit");
    fs::create_dir(&jdir).unwrap();
    std::os::unix::fs::chown(&jdir, Some(NOBODY), Some(NOBODY)).unwrap();
    let run = |script: &str| {
        tracer()
            .args(["record", "--user", &NOBODY.to_string(), "--output"])
            .arg(&s.out)
            .arg("--junit")
            .arg(jdir.join("junit.xml"))
            .args(["--", "bash", "-c", script])
            .env("JDIR", &jdir)
            .env("WORK", &s.work)
            .env("VICTIM", &s.victim)
            .env("SECRET", s.victim.parent().unwrap())
            .output()
            .unwrap()
    };
    let out = run(r#"ln -sf "$VICTIM" "$JDIR/junit.xml" || exit 99; exit 5"#);
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert_victim_intact(&s);
    let meta = fs::symlink_metadata(jdir.join("junit.xml")).unwrap();
    assert!(
        meta.file_type().is_file(),
        "junit.xml is not a regular file"
    );
    assert_eq!((meta.mode() & 0o777, meta.uid()), (0o600, NOBODY));
    assert!(fs::read_to_string(jdir.join("junit.xml"))
        .unwrap()
        .contains("<testsuites"));

    fs::remove_file(jdir.join("junit.xml")).unwrap();
    let out = run(r#"mv "$JDIR" "$WORK/moved" && ln -s "$SECRET" "$JDIR" || exit 99; exit 6"#);
    let stderr = no_panic(&out);
    assert_eq!(out.status.code(), Some(6), "{stderr}");
    assert_victim_intact(&s);
    assert!(
        !s.victim.parent().unwrap().join("junit.xml").exists(),
        "tracer wrote the JUnit file through the planted link"
    );
    assert!(s.work.join("moved/junit.xml").exists(), "{stderr}");
}

/// A `--junit` path through a link the command's user planted before the
/// run is refused before the command runs, as `--output` would be.
#[test]
fn a_junit_path_through_a_planted_link_is_refused_up_front() {
    let s = stage();
    let link = s.work.join("j");
    std::os::unix::fs::symlink(s.victim.parent().unwrap(), &link).unwrap();
    std::os::unix::fs::lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let out = tracer()
        .args(["record", "--user", &NOBODY.to_string(), "--output"])
        .arg(&s.out)
        .arg("--junit")
        .arg(link.join("junit.xml"))
        .args(["--", "true"])
        .output()
        .unwrap();
    let stderr = one_line_failure(&out);
    assert_eq!(out.status.code(), Some(70), "{stderr}");
    assert!(stderr.contains("symlink"), "{stderr}");
    assert!(!s.victim.parent().unwrap().join("junit.xml").exists());
}
