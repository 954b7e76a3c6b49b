//! Root integration tests of the capture layer on the real kernel.
use std::{
    os::unix::process::{CommandExt, ExitStatusExt},
    process::Command,
};

use crate::common::*;
use nix::{
    sys::signal::{kill, killpg, Signal},
    unistd::Pid,
};
use tracer_user::eventlog::{ExitStatus, Record};

/// Above any pid_max Linux allows (2^22): kill() on it can only fail with
/// ESRCH, so the test can never hit a stranger.
const NO_SUCH_PID: i32 = 2_000_000_000;

fn long_argv(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("argument-{i:04}-of-a-long-command-line"))
        .collect()
}

/// Forks, execs with a long argv, SIGTERMs a child, kill(-pgid)s a group of
/// three, kill()s a pid that cannot exist, exits 7.
#[test]
fn core_events_with_identities() {
    let sc = scenario(|| {
        // exec with a long argv (~3.9 KB, below the 4 KiB capture limit)
        let st = Command::new("/bin/true")
            .args(long_argv(100))
            .status()
            .unwrap();
        assert!(st.success());
        // SIGTERM to one child
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        kill(Pid::from_raw(c.id() as i32), Signal::SIGTERM).unwrap();
        assert_eq!(c.wait().unwrap().signal(), Some(15));
        // a process group of three: sh and two sleeps, ready once it says so
        let mut g = Command::new("sh");
        g.args(["-c", "sleep 30 & sleep 30 & echo ready; wait"])
            .process_group(0);
        let (mut g, _) = spawn_ready(g);
        killpg(Pid::from_raw(g.id() as i32), Signal::SIGKILL).unwrap();
        assert_eq!(g.wait().unwrap().signal(), Some(9));
        // a pid that does not exist
        assert_eq!(
            kill(Pid::from_raw(NO_SUCH_PID), Signal::SIGTERM),
            Err(nix::errno::Errno::ESRCH)
        );
        std::process::exit(7);
    });
    let r = sc.record(&[]);
    assert_eq!(
        r.code(),
        Some(7),
        "exit status passes through; stderr: {}",
        r.stderr()
    );
    assert_no_loss(&r);
    let root = root(&r);
    let trailer = r.log.trailer.as_ref().unwrap();
    assert_eq!(trailer.command_status, Some(ExitStatus::Exited { code: 7 }));

    // Every process we see a signal or exit for was forked inside the run,
    // with the same (pid, start) identity.
    let forked: Vec<_> = r
        .events()
        .forks()
        .filter(|f| !f.thread)
        .map(|f| f.child.key())
        .collect();

    // exec with its whole argv
    let want: Vec<String> = std::iter::once("/bin/true".to_string())
        .chain(long_argv(100))
        .collect();
    let exec = r
        .events()
        .execs()
        .find(|x| x.filename == "/bin/true")
        .expect("exec of /bin/true");
    assert_eq!(exec.argv, want);
    assert!(!exec.argv_truncated);
    assert!(forked.contains(&exec.task.key()));

    // SIGTERM to the sleep child, joined to its kill() call
    let term = r
        .events()
        .signals()
        .find(|s| s.sig == 15 && s.sender.key() == root.key())
        .expect("SIGTERM from the root");
    assert_eq!(
        (term.code_name.as_str(), term.result.as_str()),
        ("SI_USER", "delivered")
    );
    let call = term.call.as_ref().expect("joined to its syscall");
    assert_eq!(
        (call.syscall.as_str(), call.target_arg),
        ("kill", term.target.pid as i64)
    );
    assert!(forked.contains(&term.target.key()));
    let term_exit = exit_of(&r, term.target.key()).expect("the SIGTERMed child exits");
    assert_eq!(
        term_exit,
        ExitStatus::Signaled {
            signal: 15,
            name: "SIGTERM".into(),
            core_dumped: false
        }
    );

    // kill(-pgid): one call, three deliveries, three deaths
    let group_call = r
        .events()
        .kill_calls()
        .find(|k| k.target_arg < 0 && k.sig == 9)
        .expect("kill(-pgid, SIGKILL) call");
    assert_eq!((group_call.ret, group_call.deliveries), (0, 3));
    let victims: Vec<_> = r
        .events()
        .signals()
        .filter(|s| s.call.as_ref().is_some_and(|c| c.id == group_call.call_id))
        .collect();
    assert_eq!(victims.len(), 3);
    for v in &victims {
        assert_eq!(v.call.as_ref().unwrap().target_arg, group_call.target_arg);
        assert!(
            forked.contains(&v.target.key()),
            "group member {:?} forked in the run",
            v.target
        );
        assert!(matches!(
            exit_of(&r, v.target.key()),
            Some(ExitStatus::Signaled { signal: 9, .. })
        ));
    }
    assert_eq!(
        victims
            .iter()
            .filter(|v| v.target.pid as i64 == -group_call.target_arg)
            .count(),
        1
    );

    // the kill() that hit nothing: only the syscall saw it
    let miss = r
        .events()
        .kill_calls()
        .find(|k| k.target_arg == NO_SUCH_PID as i64)
        .expect("failed kill() call recorded");
    assert_eq!(
        (miss.ret, miss.errno.as_deref(), miss.deliveries),
        (-3, Some("ESRCH"), 0)
    );
    assert_eq!(miss.sender.key(), root.key());

    // and the root's own exit
    assert_eq!(
        exit_of(&r, root.key()),
        Some(ExitStatus::Exited { code: 7 })
    );
}

/// Threads that made a kill call and exited, more of them than the kernel's
/// table of calls in flight holds (8,192): a thread's entry is kept for its
/// next call and freed at its exit, so none is lost, and every call is
/// counted.
#[test]
fn kill_calls_of_many_exited_threads_lose_nothing() {
    const THREADS: usize = 9_200;
    let sc = scenario(|| {
        for _ in 0..THREADS {
            std::thread::spawn(|| {
                assert_eq!(
                    kill(Pid::from_raw(NO_SUCH_PID), Signal::SIGTERM),
                    Err(nix::errno::Errno::ESRCH)
                );
            })
            .join()
            .unwrap();
        }
    });
    let r = sc.record(&[]);
    assert_eq!(r.code(), Some(0), "stderr: {}", r.stderr());
    assert_no_loss(&r);
    let calls: u64 = r
        .events()
        .kill_calls()
        .filter(|k| k.target_arg == NO_SUCH_PID as i64)
        .map(|k| k.count)
        .sum();
    assert_eq!(calls, THREADS as u64);
}

/// A thread's finished kill call is not the call of a signal it raises
/// later without one: the SIGPIPE its write to a closed pipe raises (the
/// test binary ignores SIGPIPE, as every Rust program does) names no call.
#[test]
fn a_finished_kill_call_is_not_joined_to_a_later_signal() {
    let sc = scenario(|| {
        let me = Pid::this();
        kill(me, Signal::SIGURG).unwrap();
        let (rd, wr) = nix::unistd::pipe().unwrap();
        drop(rd);
        assert_eq!(nix::unistd::write(&wr, b"x"), Err(nix::errno::Errno::EPIPE));
    });
    let r = sc.record(&[]);
    assert_eq!(r.code(), Some(0), "stderr: {}", r.stderr());
    let root = root(&r);
    let signals: Vec<_> = r
        .events()
        .signals()
        .filter(|s| s.sender.key() == root.key())
        .collect();
    let urg = signals.iter().find(|s| s.sig == 23).expect("the SIGURG");
    assert!(urg.call.is_some(), "the SIGURG is its kill()'s");
    let pipe = signals.iter().find(|s| s.sig == 13).expect("the SIGPIPE");
    assert_eq!(pipe.call, None, "{pipe:?}");
    let call = r
        .events()
        .kill_calls()
        .find(|k| k.sig == 23)
        .expect("the kill() call");
    assert_eq!(call.deliveries, 1);
    // The call's sender as its delivery read it (kept for the call's exit).
    assert_eq!(call.sender, urg.sender);
    assert_eq!(call.sender.key(), root.key());
}

fn exit_of(r: &Recorded, key: tracer_user::eventlog::ProcKey) -> Option<ExitStatus> {
    r.events()
        .exits()
        .find(|x| x.group_dead && x.task.key() == key)
        .map(|x| x.status.clone())
}

/// argv longer than the capture limit is cut and flagged, not dropped.
#[test]
fn overlong_argv_is_flagged() {
    let args = long_argv(300);
    let mut cmd = vec!["/bin/true"];
    cmd.extend(args.iter().map(String::as_str));
    let r = record(&[], &cmd);
    assert_eq!(r.code(), Some(0));
    let exec = r.events().execs().next().unwrap();
    assert!(exec.argv_truncated);
    assert_eq!(exec.argv[..50], cmd[..50]);
}

/// A fork storm of a few thousand short processes loses nothing at the
/// default ring size. (It ran with a 256 KiB ring until the kernel side
/// stopped waking tracer per record: that wake-up throttled the forking
/// processes to tracer's pace, and without it 5.10 under TCG, with tracer
/// starved of CPU, lost 3 of ~12 000 records into 256 KiB. Smaller rings
/// are the bench's knee table.)
#[test]
fn fork_storm_loses_nothing() {
    const N: usize = 3000;
    let sc = scenario(|| {
        let mut running = Vec::new();
        for _ in 0..N {
            running.push(Command::new("/bin/true").spawn().unwrap());
            if running.len() == 16 {
                running
                    .drain(..)
                    .for_each(|mut c| assert!(c.wait().unwrap().success()));
            }
        }
        running
            .into_iter()
            .for_each(|mut c| assert!(c.wait().unwrap().success()));
    });
    let r = sc.record(&[]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_no_loss(&r);
    let execs = r
        .events()
        .filter(|e| matches!(e, Record::Exec(x) if x.filename == "/bin/true"))
        .count();
    let exits = r
        .events()
        .filter(|e| matches!(e, Record::Exit(x) if x.group_dead && x.task.comm.as_deref() == Some("true")))
        .count();
    assert_eq!((execs, exits), (N, N));
}

/// The runners' variables are read in the kernel at exec (docs/security.md,
/// "Environment at exec"): 50 `/bin/true`s, each gone long before its
/// record could be read from /proc, all keep theirs, exactly (names that
/// only start or end like a runner's are not sent); past the 512 variables
/// the kernel looks through, what it found before the cut is kept. Runs in
/// every VM guest (no interpreter needed): the exec program's walk is what
/// each kernel's verifier must take. The walk by `bpf_loop` from 5.17
/// (the hook's detail empty), unrolled before (the detail says why).
#[test]
fn runner_variables_are_read_at_exec() {
    let r = runner_variables_with(&[]);
    let exec = hook(&r.log, "sched_process_exec");
    match kernel_at_least(5, 17) {
        true => assert_eq!(exec.detail, None, "bpf_loop is taken: {exec:?}"),
        false => assert!(
            exec.detail
                .as_deref()
                .is_some_and(|d| d.starts_with("bpf_loop: ")),
            "{exec:?}"
        ),
    }
}

/// The unrolled walk, forced where `bpf_loop` would be taken: the same
/// variables, the same cut.
#[test]
fn runner_variables_are_read_at_exec_unrolled() {
    let r = runner_variables_with(&["--disable-hook", "sched_process_exec:bpf_loop"]);
    let exec = hook(&r.log, "sched_process_exec");
    assert!(
        exec.detail
            .as_deref()
            .is_some_and(|d| d.starts_with("bpf_loop: ")),
        "{exec:?}"
    );
}

/// The scenario of the two tests above, recorded with `args`, its
/// variables checked.
fn runner_variables_with(args: &[&str]) -> Recorded {
    const N: usize = 50;
    let sc = scenario(|| {
        for i in 0..N {
            let ok = Command::new("/bin/true")
                .env_clear()
                .env("PYTEST_CURRENT_TEST", format!("t.py::test_{i} (call)"))
                .env("PYTEST_XDIST_WORKER", "gw1")
                .env("PYTEST_CURRENT_TESTX", "not-a-runner-variable")
                .env("NEXTEST_SECRET", "not-a-runner-variable")
                .status()
                .unwrap()
                .success();
            assert!(ok);
        }
        // std sorts the environment by name: the runner's variable comes
        // before the 700 fillers.
        let mut long = Command::new("/bin/true");
        long.env_clear().env("JEST_WORKER_ID", "7");
        for i in 0..700 {
            long.env(format!("ZZ_FILLER_{i:04}"), "x");
        }
        assert!(long.status().unwrap().success());
        // Past the environment's first 16 KiB, which the bpf_loop walk
        // reads in one piece: this variable's first word is read by itself.
        let mut past = Command::new("/bin/true");
        past.env_clear().env("PYTEST_XDIST_WORKER", "gw9");
        for i in 0..300 {
            past.env(format!("AA_FILLER_{i:04}"), "x".repeat(64));
        }
        assert!(past.status().unwrap().success());
    });
    let r = sc.record(args);
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    assert_no_loss(&r);
    let envs: Vec<_> = r
        .events()
        .execs()
        .filter(|x| x.filename == "/bin/true")
        .map(|x| x.test_env.clone())
        .collect();
    assert_eq!(envs.len(), N + 2);
    for (i, env) in envs[..N].iter().enumerate() {
        let want = [
            ("PYTEST_CURRENT_TEST", format!("t.py::test_{i} (call)")),
            ("PYTEST_XDIST_WORKER", "gw1".to_string()),
        ];
        assert_eq!(
            env.iter()
                .map(|(k, v)| (k.as_str(), v.clone()))
                .collect::<Vec<_>>(),
            want,
            "exec {i}"
        );
    }
    assert_eq!(
        envs[N].get("JEST_WORKER_ID").map(String::as_str),
        Some("7"),
        "the long environment's: {:?}",
        envs[N]
    );
    assert_eq!(
        envs[N + 1].get("PYTEST_XDIST_WORKER").map(String::as_str),
        Some("gw9"),
        "past the first 16 KiB: {:?}",
        envs[N + 1]
    );
    r
}

/// `--program-stats`: the trailer holds the kernel's count of each
/// program's runs and time; the exec program ran once per exec at least.
/// Without the flag, nothing (the kernel does not count). The exec hook
/// is the `bpf_loop` program from 5.17, the unrolled one before.
#[test]
fn program_stats_count_each_programs_runs() {
    let r = record(
        &["--program-stats"],
        &["sh", "-c", "/bin/true; /bin/true; /bin/true"],
    );
    assert_eq!(r.code(), Some(0), "{}", r.stderr());
    let stats = &r.log.trailer.as_ref().expect("a trailer").program_stats;
    let exec = stats
        .iter()
        .find(|p| p.program.starts_with("sched_process_exec"))
        .unwrap_or_else(|| panic!("no exec program in {stats:?}"));
    assert!(exec.runs >= 4, "sh and three /bin/true: {exec:?}");
    assert!(exec.run_ns > 0, "{exec:?}");
    assert!(stats.iter().all(|p| p.runs > 0), "{stats:?}");
    assert_eq!(
        exec.program,
        match kernel_at_least(5, 17) {
            true => "sched_process_exec",
            false => "sched_process_exec_unrolled",
        },
        "the exec program this kernel should take"
    );
    let r = record(&[], &["/bin/true"]);
    assert!(r.log.trailer.as_ref().unwrap().program_stats.is_empty());
}

/// The exit status of a command killed by a signal is 128+N.
#[test]
fn killed_command_exits_128_plus_signal() {
    let r = record(&[], &["sh", "-c", "kill -KILL $$"]);
    assert_eq!(r.code(), Some(137));
    let t = r.log.trailer.as_ref().unwrap();
    assert!(matches!(
        t.command_status,
        Some(ExitStatus::Signaled { signal: 9, .. })
    ));
}
