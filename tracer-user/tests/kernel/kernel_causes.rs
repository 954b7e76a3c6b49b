//! Kernel causes named exactly, on the real kernel with real programs: the
//! `producer | head` SIGPIPE, coreutils timeout, rlimits, seccomp (filter
//! and strict mode), cgroup.kill, a terminal hangup, a parent-death signal
//! fired by a parent *thread*, and a kill of one's own process group.
use crate::common::*;
use tracer_user::{
    analysis::{CauseKind, Certificate, MechanismKind, Rank},
    report::{build_report, Report, ReportOptions},
};

fn report(r: &Recorded) -> Report {
    build_report(&r.log, &ReportOptions::default())
}

/// The one certificate whose victim runs `program` (argv[0]'s basename).
fn cert<'a>(rep: &'a Report, program: &str) -> &'a Certificate {
    let found: Vec<&Certificate> = rep
        .analysis
        .certificates
        .iter()
        .filter(|c| {
            c.victim
                .process
                .argv
                .first()
                .is_some_and(|a| a.rsplit('/').next() == Some(program))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one certificate for {program}; verdict: {}; headlines: {:?}",
        rep.verdict,
        rep.analysis
            .certificates
            .iter()
            .map(|c| &c.headline)
            .collect::<Vec<_>>()
    );
    found[0]
}

fn mechanism(c: &Certificate) -> &tracer_user::analysis::Mechanism {
    c.cause
        .mechanism
        .as_ref()
        .unwrap_or_else(|| panic!("no mechanism: {}", c.headline))
}

#[test]
fn producer_head_sigpipe_is_the_normal_end_of_a_pipeline() {
    let r = record(
        &["--fail-on", "unexpected-death"],
        &["bash", "-c", "yes | head -n 1 >/dev/null"],
    );
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let rep = report(&r);
    let c = cert(&rep, "yes");
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::Sigpipe, Rank::Expected),
        "{}",
        c.headline
    );
    let m = mechanism(c);
    assert_eq!(m.kind, MechanismKind::PipeReaderGone);
    assert_eq!(m.process.as_ref().unwrap().argv[0], "head");
    assert!(c.headline.contains("`producer | head`"), "{}", c.headline);
    assert_eq!(rep.analysis.counts.unexpected, 0, "{}", rep.verdict);
}

#[test]
fn sigpipe_after_the_reader_crashed_names_it_and_follows_from_it() {
    let reader = "import os, sys; sys.stdin.buffer.read(10); os.abort()";
    let r = record(
        &[],
        &[
            "bash",
            "-c",
            &format!("ulimit -c 0; yes | python3 -c '{reader}'"),
        ],
    );
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "yes");
    // The reader's abort is the root cause; the writer's SIGPIPE follows.
    assert_eq!(
        (c.cause.kind, c.rank),
        (CauseKind::Sigpipe, Rank::Consequence)
    );
    assert_eq!(
        c.consequence_of.as_ref().map(|l| l.of),
        Some(cert(&rep, "python3").id)
    );
    let reader = mechanism(c).process.as_ref().unwrap();
    assert!(reader.argv[0].ends_with("python3"), "{:?}", reader.argv);
    assert!(c.headline.contains("killed by SIGABRT"), "{}", c.headline);
}

#[test]
fn timeout_fired_is_said_and_its_command_was_stopped_by_timeout() {
    let r = record(&[], &["timeout", "0.3", "sleep", "30"]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(124));
    let rep = report(&r);
    let t = cert(&rep, "timeout");
    assert_eq!(
        (t.cause.kind, t.rank),
        (CauseKind::TimeoutFired, Rank::NonzeroExit)
    );
    assert!(
        t.headline
            .contains("exited with code 124: its time limit fired"),
        "{}",
        t.headline
    );
    assert_eq!(mechanism(t).process.as_ref().unwrap().argv[0], "sleep");
    let s = cert(&rep, "sleep");
    assert_eq!(s.rank, Rank::Expected, "{}", s.headline);
    assert_eq!(s.killer.as_ref().unwrap().process.argv[0], "timeout");
    assert!(
        s.headline.ends_with("a timeout fired (timeout(1))"),
        "{}",
        s.headline
    );
    assert!(
        rep.verdict.contains("its time limit fired"),
        "{}",
        rep.verdict
    );
    assert_eq!(rep.analysis.counts.unexpected, 0);
}

/// A command that exits 124 by itself makes timeout(1) exit 124 too: with
/// no alarm and no signal sent, no timeout fired.
#[test]
fn timeout_passing_on_its_commands_124_is_no_timeout() {
    let r = record(&[], &["timeout", "30", "sh", "-c", "exit 124"]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(124));
    let rep = report(&r);
    let t = cert(&rep, "timeout");
    assert_eq!(t.cause.kind, CauseKind::NonzeroExit, "{}", t.headline);
    assert!(!rep.verdict.contains("time limit"), "{}", rep.verdict);
}

#[test]
fn timeout_s_kill_killing_its_own_group_is_not_a_suicide() {
    let r = record(&[], &["timeout", "-s", "KILL", "0.3", "sleep", "30"]);
    assert_no_loss(&r);
    assert_eq!(r.code(), Some(137));
    let rep = report(&r);
    let t = cert(&rep, "timeout");
    assert_eq!(t.cause.kind, CauseKind::TimeoutFired, "{}", t.headline);
    assert!(
        t.headline.contains("from its own kill(0, SIGKILL)"),
        "{}",
        t.headline
    );
    assert!(!t.headline.contains("abort"), "{}", t.headline);
    assert_eq!(rep.analysis.counts.unexpected, 0, "{}", rep.verdict);
}

#[test]
fn a_kill_of_ones_own_process_group_is_worded_as_one() {
    // The group kill once sleep has exec'd: before that its fork is a second
    // `bash` the kill would catch too.
    let r = record(
        &[],
        &[
            "bash",
            "-c",
            "sleep 30 & p=$!; until [ \"$(cat /proc/$p/comm)\" = sleep ]; do :; done; kill -TERM 0",
        ],
    );
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "bash");
    assert_eq!(c.cause.kind, CauseKind::OwnGroupKill);
    assert!(
        c.headline
            .contains("from its own kill(0, SIGTERM) — a kill of its own process group"),
        "{}",
        c.headline
    );
}

#[test]
fn file_size_limit_names_rlimit_fsize() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("big");
    let script = format!("ulimit -f 1; head -c 5000 /dev/zero > '{}'", out.display());
    let r = record(&[], &["bash", "-c", &script]);
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "head");
    assert_eq!(c.cause.kind, CauseKind::Rlimit, "{}", c.headline);
    assert_eq!(mechanism(c).limit.as_deref(), Some("RLIMIT_FSIZE"));
    assert!(!c.headline.contains("uncaptured"), "{}", c.headline);
}

#[test]
fn cpu_limits_name_rlimit_cpu_soft_and_hard() {
    // Soft limit with the default action: SIGXCPU kills. Hard limit (SIGXCPU
    // ignored): the kernel's SIGKILL.
    let soft = "import resource\nresource.setrlimit(resource.RLIMIT_CPU, (1, 5))\nwhile True: pass";
    let hard = "import resource, signal\nresource.setrlimit(resource.RLIMIT_CPU, (1, 2))\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass";
    let script = format!("python3 -c '{soft}' soft; python3 -c '{hard}' hard; true");
    let r = record(&[], &["bash", "-c", &script]);
    assert_no_loss(&r);
    let rep = report(&r);
    let by_arg = |last: &str| {
        rep.analysis
            .certificates
            .iter()
            .find(|c| c.victim.process.argv.last().map(String::as_str) == Some(last))
            .unwrap_or_else(|| panic!("no certificate for {last}: {}", rep.verdict))
    };
    let s = by_arg("soft");
    assert_eq!(s.cause.kind, CauseKind::Rlimit, "{}", s.headline);
    assert!(s.headline.contains("SIGXCPU"), "{}", s.headline);
    let h = by_arg("hard");
    assert_eq!(h.cause.kind, CauseKind::Rlimit, "{}", h.headline);
    assert!(
        h.headline
            .contains("SIGKILL at its hard CPU-time limit (RLIMIT_CPU)"),
        "{}",
        h.headline
    );
    assert_eq!(mechanism(h).limit.as_deref(), Some("RLIMIT_CPU"));
}

/// A tiny seccomp filter: getpid (39 on x86-64) kills the process.
const SECCOMP_FILTER: &str = r#"import ctypes, os, struct
libc = ctypes.CDLL(None, use_errno=True)
prog = [(0x20, 0, 0, 0), (0x15, 0, 1, 39), (0x06, 0, 0, 0x80000000), (0x06, 0, 0, 0x7fff0000)]
buf = ctypes.create_string_buffer(b"".join(struct.pack("HBBI", *i) for i in prog))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fp = Fprog(len(prog), ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0
assert libc.prctl(22, 2, ctypes.byref(fp), 0, 0) == 0
os.getpid()
"#;

#[test]
fn seccomp_filter_kill_names_the_syscall() {
    if !cfg!(target_arch = "x86_64") {
        panic!("the seccomp filter here uses x86-64 syscall numbers");
    }
    let r = record(&[], &["python3", "-c", SECCOMP_FILTER]);
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "python3");
    assert_eq!(c.cause.kind, CauseKind::Seccomp, "{}", c.headline);
    let m = mechanism(c);
    assert_eq!(
        (m.syscall_nr, m.syscall.as_deref()),
        (Some(39), Some("getpid"))
    );
    assert!(
        c.headline
            .contains("a seccomp filter forbade the syscall getpid (39)"),
        "{}",
        c.headline
    );
}

#[test]
fn seccomp_strict_mode_is_a_kernel_exit_not_a_lost_event() {
    let strict = "import ctypes, os\nctypes.CDLL(None).prctl(22, 1, 0, 0, 0)\nos.getpid()";
    let r = record(&[], &["python3", "-c", strict]);
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "python3");
    assert_eq!(c.cause.kind, CauseKind::KernelExit, "{}", c.headline);
    assert!(c.headline.contains("seccomp strict mode"), "{}", c.headline);
    assert!(!c.headline.contains("lost events"), "{}", c.headline);
}

/// Where cgroup v2 is mounted (hybrid hosts: /sys/fs/cgroup/unified).
fn cgroup2_mount() -> std::path::PathBuf {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    info.lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            right
                .starts_with("cgroup2 ")
                .then(|| left.split(' ').nth(4).unwrap().into())
        })
        .expect("cgroup v2 is mounted")
}

#[test]
fn cgroup_kill_names_the_writer_and_the_mechanism() {
    let cg = cgroup2_mount().join(format!("tracer-h5-kill-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap();
    assert!(
        cg.join("cgroup.kill").exists(),
        "this kernel has no cgroup.kill (Linux >= 5.14 needed)"
    );
    let script = format!(
        // Killed once it is `sleep` (a fork killed before its exec is a
        // second `bash`).
        "sleep 30 & p=$!; until [ \"$(cat /proc/$p/comm)\" = sleep ]; do :; done; \
         echo $p > '{0}/cgroup.procs'; echo 1 > '{0}/cgroup.kill'; wait",
        cg.display()
    );
    let r = record(&[], &["bash", "-c", &script]);
    let removed = std::fs::remove_dir(&cg);
    assert_no_loss(&r);
    removed.unwrap();
    let rep = report(&r);
    let c = cert(&rep, "sleep");
    assert_eq!(
        mechanism(c).kind,
        MechanismKind::CgroupKill,
        "{}",
        c.headline
    );
    let k = c.killer.as_ref().unwrap();
    assert_eq!(k.process.argv[0], "bash");
    assert_eq!(k.call, "a write to cgroup.kill (no kill syscall)");
    assert!(!c.headline.contains("uncaptured"), "{}", c.headline);
    assert_eq!(
        c.rank,
        Rank::Expected,
        "its parent's SIGKILL: {}",
        c.headline
    );
}

#[test]
fn terminal_hangup_is_said_and_names_who_closed_it() {
    // Once the child runs `sleep` (its /proc comm says so), the parent
    // closes the pty master: the tty layer hangs up the child's session.
    let hup = "import os, pty\npid, fd = pty.fork()\nif pid == 0:\n    os.execvp(\"sleep\", [\"sleep\", \"30\"])\nwhile open(f\"/proc/{pid}/comm\").read().strip() != \"sleep\": pass\nos.close(fd)\nos.waitpid(pid, 0)";
    let r = record(&[], &["python3", "-c", hup]);
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "sleep");
    assert_eq!(c.cause.kind, CauseKind::TerminalHangup, "{}", c.headline);
    assert!(
        c.headline.contains("its terminal hung up"),
        "{}",
        c.headline
    );
    let closer = mechanism(c).process.as_ref().unwrap();
    assert!(closer.argv[0].ends_with("python3"), "{:?}", closer.argv);
    assert_eq!(
        c.rank,
        Rank::Expected,
        "its parent closed it: {}",
        c.headline
    );
}

#[test]
fn parent_death_signal_from_a_parent_thread_says_the_thread_exited() {
    let pdeath = "import ctypes, signal, subprocess, threading\nlibc = ctypes.CDLL(None)\nprocs = []\ndef spawn():\n    procs.append(subprocess.Popen([\"sleep\", \"30\"], preexec_fn=lambda: libc.prctl(1, signal.SIGTERM)))\nt = threading.Thread(target=spawn); t.start(); t.join()\nprocs[0].wait()";
    let r = record(&[], &["python3", "-c", pdeath]);
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "sleep");
    assert_eq!(c.cause.kind, CauseKind::ParentDeathSignal);
    let m = mechanism(c);
    assert_eq!(m.kind, MechanismKind::ParentThreadExit);
    let parent = m.process.as_ref().unwrap();
    assert_ne!(m.thread, Some(parent.pid), "a thread, not the main thread");
    assert!(
        c.headline.contains("the parent process itself lived on"),
        "{}",
        c.headline
    );
    assert_eq!(c.rank, Rank::Unexpected);
}

/// pidfd_send_signal names a pidfd, not a pid: the delivered call is
/// resolved by the signal it produced; a missed one says it is unresolved.
#[test]
fn pidfd_send_signal_is_resolved_to_its_target() {
    let py = "import os, signal, subprocess\np = subprocess.Popen([\"sleep\", \"30\"])\nfd = os.pidfd_open(p.pid)\nsignal.pidfd_send_signal(fd, signal.SIGTERM)\np.wait()\nq = subprocess.Popen([\"true\"])\nfd2 = os.pidfd_open(q.pid)\nq.wait()\ntry:\n    signal.pidfd_send_signal(fd2, signal.SIGTERM)\nexcept ProcessLookupError:\n    pass";
    let r = record(&[], &["python3", "-c", py]);
    assert_no_loss(&r);
    let rep = report(&r);
    let c = cert(&rep, "sleep");
    let k = c.killer.as_ref().unwrap();
    assert_eq!(k.syscall.as_deref(), Some("pidfd_send_signal"));
    let fd = k.target_arg.unwrap();
    assert_eq!(
        k.aimed_at,
        format!("pid {} through pidfd {fd}", c.victim.process.pid)
    );
    let miss = rep
        .analysis
        .near_misses
        .iter()
        .find(|n| n.syscall == "pidfd_send_signal")
        .expect("the call on a reaped child's pidfd failed");
    assert_eq!(miss.errno.as_deref(), Some("ESRCH"));
    assert_eq!(
        miss.aimed_at,
        format!("pidfd {} (unresolved)", miss.target_arg)
    );
}
