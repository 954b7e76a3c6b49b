//! Last words follow what fd 2 is at each write, while the kernel keeps
//! what fd 2 was between writes (`tracer-ebpf/src/fd2.rs`): a process that
//! points its fd 2 at /dev/null, back at the pipe it had, closes it and
//! opens something else there. Each process ends with a different fd 2, and
//! its words' `to_null` is the last write's. Real python3 (os.write on fd 2
//! itself) and bash (`echo >&2` writes fd 1, a dup of fd 2): kept out of
//! the VM's busybox suites, where `last_words` proves the same in sh.
use crate::common::*;
use tracer_user::eventlog::LastWords;

/// Each python3 process: its label, its fd 2 moves between writes, the
/// words it must leave and whether its last write went to /dev/null.
const PYTHON: [(&str, &str, &str, bool); 6] = [
    ("to-null", "w('a1'); to_null(); w('a2')", "a1\na2\n", true),
    (
        "back-to-pipe",
        "saved = os.dup(2); null = os.open('/dev/null', os.O_WRONLY); os.dup2(null, 2); w('b1'); \
         os.dup2(saved, 2); w('b2')",
        "b1\nb2\n",
        false,
    ),
    // fd 2 the only reference to a file: closing it frees its `struct
    // file`, and the /dev/null opened next onto the free fd 2 is likely
    // given the same address; then a file again.
    (
        "closed-reopened",
        "f = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT); os.dup2(f, 2); os.close(f); w('c1'); \
         os.close(2); lost(); assert os.open('/dev/null', os.O_WRONLY) == 2; w('c2'); \
         os.close(2); lost(); assert os.open(sys.argv[2], os.O_WRONLY) == 2; w('c3'); \
         os.close(2); lost(); assert os.open('/dev/null', os.O_WRONLY) == 2; w('c4')",
        "c1\nc2\nc3\nc4\n",
        true,
    ),
    // fcntl(F_DUPFD) onto the free fd 2, from a file fd 3 holds.
    (
        "dupfd",
        "f = os.open(sys.argv[2], os.O_WRONLY); null = os.open('/dev/null', os.O_WRONLY); \
         os.dup2(null, 2); os.close(null); w('d1'); \
         os.close(2); assert fcntl.fcntl(f, fcntl.F_DUPFD, 2) == 2; w('d2')",
        "d1\nd2\n",
        false,
    ),
    // A thread with a table of its own (unshare(CLONE_FILES)) points its
    // fd 2 at /dev/null; the process's other threads keep the pipe.
    (
        "unshared-thread",
        "w('g1'); in_unshared_thread(lambda: (to_null(), w('g2'))); w('g3')",
        "g1\ng2\ng3\n",
        false,
    ),
    (
        "unshared-thread-last",
        "w('h1'); in_unshared_thread(lambda: (to_null(), w('h2')))",
        "h1\nh2\n",
        true,
    ),
];

/// bash: `exec 2>/dev/null` and back through a saved fd.
const BASH: [(&str, &str, &str, bool); 2] = [
    (
        "bash-null",
        "echo e1 >&2; exec 2>/dev/null; echo e2 >&2",
        "e1\ne2\n",
        true,
    ),
    (
        "bash-back",
        "exec 3>&2 2>/dev/null; echo f1 >&2; exec 2>&3 3>&-; echo f2 >&2",
        "f1\nf2\n",
        false,
    ),
];

/// Where a process's fds live, which decides how the kernel side reads fd 2
/// (`stderr_file` in tracer-ebpf/src/stderr.rs): the table embedded in its
/// `files_struct` (it never held more than 64 fds: most processes; the
/// typed twins load fd 2 from it), or one allocated when it grew (a read
/// through `fdtable.fd`). `/proc/self/status`'s FDSize says which.
#[derive(Clone, Copy, Debug)]
enum Table {
    /// Forked by a python3 that first closed every fd above 2, so the copy
    /// of its table fits the embedded one (whatever the harness leaked).
    Embedded,
    /// dup2 onto fd 100 grows it before the first write.
    Grown,
}

/// One python3 process: `w` writes a line to fd 2 itself; `lost` writes
/// to the closed fd 2 (EBADF: no words); `to_null` dup2s /dev/null onto
/// fd 2; `in_unshared_thread` runs `f` in a thread that first unshares its
/// file table (0x400: CLONE_FILES). The body runs with a `table` of fds.
fn python(body: &str, table: Table) -> String {
    let prelude = "import os, sys, fcntl, threading, ctypes\n\
                   def w(s): os.write(2, (s + '\\n').encode())\n\
                   def lost():\n    try: os.write(2, b'lost\\n')\n    except OSError: pass\n\
                   def to_null():\n    null = os.open('/dev/null', os.O_WRONLY)\n    \
                   os.dup2(null, 2)\n    os.close(null)\n\
                   def in_unshared_thread(f):\n    def run():\n        \
                   assert ctypes.CDLL(None).unshare(0x400) == 0\n        f()\n    \
                   t = threading.Thread(target=run)\n    t.start()\n    t.join()\n";
    let table = match table {
        Table::Embedded => {
            "os.closerange(3, 1 << 20)\npid = os.fork()\n\
             if pid: os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n\
             assert 'FDSize:\\t64\\n' in open('/proc/self/status').read()\n"
        }
        Table::Grown => {
            "os.dup2(0, 100)\n\
             assert 'FDSize:\\t64\\n' not in open('/proc/self/status').read()\n"
        }
    };
    format!(
        "{} -c {} x {{file}}",
        python3(),
        shell_quote(&format!("{prelude}{table}{body}"))
    )
}

fn words_of<'a>(r: &'a Recorded, first: &str) -> &'a LastWords {
    let found: Vec<&LastWords> = r
        .events()
        .last_words()
        .filter(|l| l.text.starts_with(first))
        .collect();
    assert_eq!(found.len(), 1, "one process's words start with {first:?}");
    found[0]
}

/// Each python3 case with either kind of fd table, one run each.
fn follows_with(extra: &[&str]) {
    follows_in(extra, Table::Embedded);
    follows_in(extra, Table::Grown);
}

fn follows_in(extra: &[&str], table: Table) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f").display().to_string();
    let mut script = String::new();
    for (_, body, _, _) in PYTHON {
        let cmd = python(body, table).replace("{file}", &shell_quote(&file));
        script.push_str(&format!("{cmd} || exit 1\n"));
    }
    for (_, body, _, _) in BASH {
        script.push_str(&format!("bash -c {} || exit 1\n", shell_quote(body)));
    }
    let r = record(extra, &["sh", "-c", &script]);
    assert_eq!(r.code(), Some(0), "{table:?}: {}", r.stderr());
    for (label, _, words, to_null) in PYTHON.iter().chain(BASH.iter()) {
        let lw = words_of(&r, &words[..3]);
        assert_eq!(&lw.text, words, "{label}, {table:?}: {lw:?}");
        assert_eq!(lw.to_null, *to_null, "{label}, {table:?}: {lw:?}");
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn each_write_follows_fd2() {
    follows_with(&[]);
}

/// The same walk, one ring record per write (the tail kept in user space).
#[test]
fn each_write_follows_fd2_write_by_write() {
    follows_with(&["--last-words-bytes", "12000"]);
}

#[test]
fn each_write_follows_fd2_on_the_tracepoint_rung() {
    follows_with(&[
        "--disable-hook",
        "last_words:fentry",
        "--disable-hook",
        "last_words:raw_syscalls",
    ]);
}
