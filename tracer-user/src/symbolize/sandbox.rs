//! The parse child: the ELF, DWARF and unwind tables of a crashed process's
//! modules were written by the wrapped command, so tracer (root, with its
//! maps and rings) never parses them itself. It re-executes its own binary
//! (`/proc/self/exe`, the hidden subcommand `SUBCOMMAND`: a fresh process,
//! none of tracer's threads or locks) which, before reading anything:
//! - has no_new_privs, RLIMIT_AS (the modules' size + `AS_SLACK`),
//!   RLIMIT_CPU (`CPU_LIMIT_S`), no core dump and no file writes (set
//!   between fork and exec);
//! - closes every fd but stdio and the modules' memfds it was given;
//! - drops to `PARSE_UID`:`PARSE_GID`, an identity no process of the node
//!   has, so the job can neither signal (SIGSTOP) nor trace it, keeping
//!   the command's user (`--user`, sudo; nobody when the command runs as
//!   root) only as its filesystem ids: a debug file it opens by path is
//!   opened as the command would; no supplementary groups, no capability;
//! - reports what it is (from its own /proc/self/status and getrlimit),
//!   which tracer checks before it believes a frame.
//!
//! It reads the request (the crash records, their mappings, which memfd
//! each module is) from stdin, a memfd tracer wrote (no pipe to fill, so
//! tracer never blocks writing), and answers one JSON line per crash on
//! stdout. Tracer reads at most `MAX_ANSWER_BYTES` a crash, off its ring
//! drain (`child.rs`: the answer is read when the pipe is readable, the
//! `crash_stack` records written then), gives it `WALL_LIMIT`, then kills
//! it; a crash without an answer gets the kernel's frame walk, unnamed, and
//! "symbolisation failed: <why>".
//!
//! Cost, measured (debug build, 2 loaded CPUs): see `docs/security.md`
//! ("Crash stacks"): the re-exec and parse of one crash in libc and a test
//! binary. A drain's crashes share one child (and its parsed modules).
use std::{
    collections::HashMap,
    fs::File,
    io::{Read, Seek, Write},
    os::{
        fd::{AsRawFd, FromRawFd},
        unix::process::ExitStatusExt,
    },
    rc::Rc,
};

use serde::{Deserialize, Serialize};
use tracer_common::CrashRecord;

use super::{
    child::Running,
    identity::Identity,
    image::{Frozen, Image, ImageCache, Images},
    unparsed, Mapping, Modules,
};
use crate::eventlog::{CrashStack, Stamp, Task};

// The child's name and limits live with the child, which this file runs.
pub use super::child::{CPU_LIMIT_S, SUBCOMMAND, WALL_LIMIT};
/// Address space a child has beyond its modules' copies (its own binary,
/// heap for the parsed DWARF).
pub const AS_SLACK: u64 = 1 << 30;
/// Answer bytes read per crash: 256 frames of 512-character names and
/// paths fit many times over; more is a child gone wrong.
const MAX_ANSWER_BYTES: usize = 4 << 20;
/// The filesystem uid and gid the child takes when the command runs as root.
pub const NOBODY: u32 = 65534;
/// The uid and gid the child runs as: one no process of a node has, so no
/// job (nor any other process but root) may signal, stop or trace it.
/// Not nobody (65534): many daemons run as nobody, and a daemon's parse
/// child would be theirs to stop. 0x7F000086 is in the range systemd
/// leaves unused (1879048192–2147352575: above its container ranges,
/// below mountfsd's and the foreign range), below 2^31 (tools that read a
/// uid as a signed int), above the subordinate ranges `useradd` hands out
/// for user namespaces (100000–600100000), so a job's own user namespace
/// cannot map it either.
pub const PARSE_UID: u32 = 0x7F00_0086;
pub const PARSE_GID: u32 = 0x7F00_0086;

/// One crash to symbolise: its record as the ring had it, decoded, and the
/// modules of its process (`super::modules_for`).
pub struct Crash<'a> {
    pub raw: &'a [u8],
    pub rec: &'a CrashRecord,
    pub modules: &'a Modules,
    pub at: Stamp,
    pub task: Task,
}

#[derive(Serialize, Deserialize)]
struct Request {
    /// Where a module without DWARF has its debug file (`--debug-dir`).
    debug_dirs: Vec<std::path::PathBuf>,
    jobs: Vec<Job>,
}

#[derive(Serialize, Deserialize)]
struct Job {
    record: Vec<u8>,
    mappings: Vec<Mapping>,
    /// By `Mapping::file` index.
    files: Vec<Slot>,
    missing: Option<String>,
    /// The perf map's entries (JIT code), parsed by tracer: a few bounded
    /// lines of text, not a module.
    jit: Option<crate::symbolize::JitMap>,
}

#[derive(Serialize, Deserialize)]
enum Slot {
    /// The memfd holding the module's copy (the same number in the child).
    Fd(i32),
    /// Why it was not copied.
    Failed(String),
}

/// What the child says it is, read from its own /proc/self/status and
/// getrlimit once it has confined itself: its first line.
#[derive(Serialize, Deserialize, Debug, PartialEq, Eq)]
pub struct Confined {
    /// Real, effective, saved and filesystem uid.
    pub uids: [u32; 4],
    pub gids: [u32; 4],
    pub groups: Vec<u32>,
    pub no_new_privs: bool,
    /// No capability, permitted or effective.
    pub no_caps: bool,
    /// Soft limits.
    pub rlimit_as: u64,
    pub rlimit_cpu: u64,
}

/// A parse child answering a request: the child, the module copies it was
/// handed (kept alive, their fds open, until it is done), and who it is.
pub struct Parse {
    pub child: Running,
    held: Vec<Rc<Frozen>>,
    who: Identity,
    n: usize,
}

/// Start a parse child for `crashes` as `user`'s filesystem ids (uid, gid;
/// `None`: the command runs as root, nobody's). `Err`: why none started
/// (every crash then gets the kernel's walk, unnamed).
pub fn start(
    crashes: &[Crash],
    cache: &mut ImageCache,
    user: Option<(u32, u32)>,
    debug_dirs: &[std::path::PathBuf],
) -> Result<Parse, String> {
    let (fs_uid, fs_gid) = user.unwrap_or((NOBODY, NOBODY));
    let who = Identity {
        uid: PARSE_UID,
        gid: PARSE_GID,
        fs_uid,
        fs_gid,
    };
    let mut held: Vec<Rc<Frozen>> = Vec::new();
    let mut jobs = Vec::with_capacity(crashes.len());
    for c in crashes {
        let files = c
            .modules
            .files
            .iter()
            .map(|f| match cache.get(f) {
                Ok(frozen) => {
                    let fd = frozen.memfd.as_raw_fd();
                    held.push(frozen);
                    Slot::Fd(fd)
                }
                Err(e) => Slot::Failed(e),
            })
            .collect();
        jobs.push(Job {
            record: c.raw.to_vec(),
            mappings: c.modules.mappings.clone(),
            files,
            missing: c.modules.missing.clone(),
            jit: c.modules.jit.clone(),
        });
    }
    let req = Request {
        debug_dirs: debug_dirs.to_vec(),
        jobs,
    };
    let mut input = memfd_request(&req).map_err(|e| format!("the request: {e}"))?;
    input.rewind().map_err(|e| format!("the request: {e}"))?;
    let mut fds: Vec<i32> = held.iter().map(|f| f.memfd.as_raw_fd()).collect();
    fds.sort_unstable();
    fds.dedup();
    let modules_bytes: u64 = held
        .iter()
        .map(|f| f.memfd.metadata().map(|m| m.len()).unwrap_or(0))
        .sum();
    let as_limit = modules_bytes.saturating_add(AS_SLACK);
    let n = crashes.len();
    let cap = 64 * 1024 + n.saturating_mul(MAX_ANSWER_BYTES);
    let child = Running::spawn(input, &fds, who, as_limit, cap)?;
    Ok(Parse {
        child,
        held,
        who,
        n,
    })
}

/// The `crash_stack` records of `crashes`, in order, from the parse child
/// `parse` started for them once it is done (`Running::pump` said so, or
/// `wait`ed). Never fails: what the child could not answer is said in the
/// record.
pub fn stacks(crashes: &[Crash], parse: Result<Parse, String>) -> Vec<CrashStack> {
    let answers = parse.and_then(|p| {
        drop(p.held);
        let as_limit = p.child.as_limit;
        let (out, status, stopped, took) = p.child.end();
        let a = answers(&out, status, stopped, p.who, p.n, as_limit);
        let failed = match &a {
            Ok((_, _, f)) => f.as_deref(),
            Err(why) => Some(why.as_str()),
        };
        log::debug!(
            "parse child: {} crash(es) in {} ms, {} answered, {:?}{}",
            p.n,
            took.as_millis(),
            a.as_ref().map_or(0, |a| a.1.len()),
            a.as_ref().ok().and_then(|a| a.0.as_ref()),
            failed.map(|f| format!(", failed: {f}")).unwrap_or_default()
        );
        a
    });
    let (lines, failure) = match answers {
        Ok((_, lines, failure)) => (lines, failure),
        Err(why) => (Vec::new(), Some(why)),
    };
    let mut lines = lines.into_iter();
    crashes
        .iter()
        .map(|c| {
            let answer = lines.next();
            let parsed = answer.as_deref().map(|l| {
                serde_json::from_slice::<CrashStack>(l)
                    .map_err(|e| format!("the parse child's answer did not parse: {e}"))
            });
            match parsed {
                Some(Ok(mut s)) => {
                    // The child says where the frames are; what the kernel
                    // said (the signal, the task, the time) is tracer's.
                    let head = super::head(c.rec, c.at.clone(), c.task.clone());
                    s.at = head.at;
                    s.task = head.task;
                    s.sig = head.sig;
                    s.signal = head.signal;
                    s.code = head.code;
                    s.fault_addr = head.fault_addr;
                    s
                }
                Some(Err(why)) => unparsed(c.rec, c.modules, c.at.clone(), c.task.clone(), &why),
                None => unparsed(
                    c.rec,
                    c.modules,
                    c.at.clone(),
                    c.task.clone(),
                    failure
                        .as_deref()
                        .unwrap_or("the parse child gave no answer"),
                ),
            }
        })
        .collect()
}

type Answers = (Option<Confined>, Vec<Vec<u8>>, Option<String>);

/// What a done child said: its confinement (checked against `who`), its
/// answer lines, and why it stopped short of `n` answers.
fn answers(
    out: &[u8],
    status: Option<std::process::ExitStatus>,
    stopped: Option<String>,
    who: Identity,
    n: usize,
    as_limit: u64,
) -> Result<Answers, String> {
    let mut lines = out
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(<[u8]>::to_vec);
    let confined: Option<Confined> = match lines.next() {
        Some(first) => match serde_json::from_slice::<Result<Confined, String>>(&first) {
            Ok(Ok(c)) => Some(c),
            Ok(Err(why)) => return Err(format!("the parse child could not confine itself: {why}")),
            Err(e) => return Err(format!("the parse child's first line did not parse: {e}")),
        },
        None => None,
    };
    let Some(c) = confined else {
        return Err(stopped.unwrap_or_else(|| died(status, as_limit)));
    };
    let (u, g) = (who.uid, who.gid);
    if c.uids != [u, u, u, who.fs_uid]
        || c.gids != [g, g, g, who.fs_gid]
        || !c.groups.is_empty()
        || !c.no_new_privs
        || !c.no_caps
    {
        return Err(format!(
            "the parse child is not confined as asked ({who:?}): {c:?}"
        ));
    }
    let answers: Vec<Vec<u8>> = lines.take(n).collect();
    let failure = (answers.len() < n).then(|| stopped.unwrap_or_else(|| died(status, as_limit)));
    Ok((Some(c), answers, failure))
}

/// Why a child that answered short ended.
fn died(status: Option<std::process::ExitStatus>, as_limit: u64) -> String {
    match status {
        Some(s) => match s.signal() {
            Some(sig) => {
                let name = crate::eventlog::signal_name(sig);
                let hint = match sig {
                    libc::SIGXCPU | libc::SIGKILL => {
                        format!(" (its CPU limit is {CPU_LIMIT_S} s)")
                    }
                    libc::SIGABRT | libc::SIGSEGV => {
                        format!(" (its address space is limited to {} MiB)", as_limit >> 20)
                    }
                    _ => String::new(),
                };
                format!("the parse child died of {name}{hint}")
            }
            None => format!(
                "the parse child exited with status {}",
                s.code().unwrap_or(-1)
            ),
        },
        None => "the parse child did not exit".into(),
    }
}

fn memfd_request(req: &Request) -> std::io::Result<File> {
    // SAFETY: a NUL-terminated name and flags; the fd returned is owned
    // by the File below.
    let fd = unsafe { libc::memfd_create(c"tracer-crashes".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned by nothing else.
    let mut f = unsafe { File::from_raw_fd(fd) };
    serde_json::to_writer(std::io::BufWriter::new(&mut f), req)?;
    Ok(f)
}

/// The child's side (`tracer __parse-crash-stacks`): confine, then answer
/// each job of the request on stdin. `decode` turns a ring record's bytes
/// into its `CrashRecord` (the capture stage's decoder). Returns the exit
/// status.
pub fn serve(who: Identity, fds: &[i32], decode: impl Fn(&[u8]) -> Option<Box<CrashRecord>>) -> u8 {
    let mut out = std::io::stdout().lock();
    let confined = confine(who, fds);
    let failed = confined.is_err();
    if serde_json::to_writer(&mut out, &confined).is_err() || out.write_all(b"\n").is_err() {
        return 1;
    }
    let _ = out.flush();
    if failed {
        return 1;
    }
    let mut input = Vec::new();
    // tracer wrote it (the records are 20 KiB each, the mappings bounded).
    if std::io::stdin()
        .lock()
        .take(1 << 30)
        .read_to_end(&mut input)
        .is_err()
    {
        return 1;
    }
    let Ok(req) = serde_json::from_slice::<Request>(&input) else {
        return 1;
    };
    drop(input);
    let debug_dirs = req.debug_dirs;
    // Each module mapped and parsed once for the whole request.
    let mut mapped: HashMap<i32, Result<Rc<Image>, String>> = HashMap::new();
    for job in req.jobs {
        // A file's path as the process's maps named it: where its debug
        // link is looked for.
        let path_of = |i: usize| {
            job.mappings
                .iter()
                .find(|m| m.file == Some(i))
                .map(|m| std::path::Path::new(&m.path))
        };
        let slots = job
            .files
            .iter()
            .enumerate()
            .map(|(i, s)| match s {
                Slot::Failed(why) => Err(why.clone()),
                Slot::Fd(fd) => mapped
                    .entry(*fd)
                    .or_insert_with(|| {
                        // SAFETY: a memfd tracer handed over, open in this
                        // process (checked by `confine`), wrapped once.
                        let f = unsafe { File::from_raw_fd(*fd) };
                        Image::map(f, path_of(i), &debug_dirs).map(Rc::new)
                    })
                    .clone(),
            })
            .collect();
        let images = Images::new(slots);
        // The files themselves are not read here: the images are.
        let modules = Modules {
            mappings: job.mappings,
            files: Vec::new(),
            missing: job.missing,
            jit: job.jit,
        };
        let stack = match decode(&job.record) {
            Some(rec) => {
                let at = Stamp {
                    seq: 0,
                    t: 0,
                    time: String::new(),
                };
                let task = Task {
                    pid: rec.task.tgid,
                    tid: rec.task.tid,
                    start: rec.task.start_ns,
                    comm: None,
                };
                super::crash_stack(&rec, &modules, &images, at, task)
            }
            None => return 1,
        };
        if serde_json::to_writer(&mut out, &stack).is_err()
            || out.write_all(b"\n").is_err()
            || out.flush().is_err()
        {
            return 1;
        }
    }
    0
}

/// Close every fd but stdio and `fds`, become `who` (`identity.rs`), die
/// with tracer, and say what this process now is.
fn confine(who: Identity, fds: &[i32]) -> Result<Confined, String> {
    let open: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("/proc/self/fd: {e}"))?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    for &fd in fds {
        if !open.contains(&fd) {
            return Err(format!("fd {fd} was not handed over"));
        }
    }
    for fd in open {
        if fd > 2 && !fds.contains(&fd) {
            // The read_dir's own fd is gone already: EBADF is fine.
            let _ = nix::unistd::close(fd);
        }
    }
    super::identity::become_(who)?;
    // Cleared by the change of user: set again, so a killed tracer takes
    // its child along.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    std::env::set_current_dir("/").map_err(|e| format!("chdir /: {e}"))?;
    whoami()
}

/// This process's ids, groups, no_new_privs and limits, as the kernel has
/// them.
fn whoami() -> Result<Confined, String> {
    use nix::sys::resource::{getrlimit, Resource};
    let status =
        std::fs::read_to_string("/proc/self/status").map_err(|e| format!("status: {e}"))?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| {
                v.split_whitespace()
                    .filter_map(|x| x.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    };
    let caps = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
    };
    let four = |v: Vec<u32>| -> Result<[u32; 4], String> {
        v.try_into().map_err(|v| format!("status: {v:?}"))
    };
    let limit = |r| {
        getrlimit(r)
            .map(|(soft, _)| soft)
            .map_err(|e| e.to_string())
    };
    Ok(Confined {
        uids: four(field("Uid:"))?,
        gids: four(field("Gid:"))?,
        groups: field("Groups:"),
        no_new_privs: field("NoNewPrivs:") == [1],
        no_caps: caps("CapPrm:") == Some(0) && caps("CapEff:") == Some(0),
        rlimit_as: limit(Resource::RLIMIT_AS)?,
        rlimit_cpu: limit(Resource::RLIMIT_CPU)?,
    })
}
