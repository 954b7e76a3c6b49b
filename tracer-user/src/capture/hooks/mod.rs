//! Attach every hook through its fallback chain and say which way each went
//! (`HookStatus`, the report header's hook table).
//!
//! Teardown cost decides the order: closing a classic tracepoint's perf event
//! waits for an RCU grace period (~35–80 ms each, serialised by the kernel),
//! while fentry/fexit and tp_btf links are released without one.
use aya::{
    programs::{BtfTracePoint, FEntry, FExit, Program, ProgramError, TracePoint},
    Btf, Ebpf,
};
use tracer_common::{SyscallArch, KILL_SYSCALLS};

use crate::eventlog::HookStatus;

mod last_words;
pub use last_words::attach_last_words;

/// Hooks (`name`) or attach methods (`name:via`) not to use
/// (`--disable-hook`: diagnosis, and how tests force each rung).
pub struct Disabled<'a>(pub &'a [String]);

/// Every value `--disable-hook` takes: the hooks with a chain, each rung of
/// it, and the single-rung hooks. The command line refuses anything else (a
/// typo once disabled nothing, silently); the attach code asks only these
/// (checked in debug builds, so the tests keep the list true).
pub const DISABLEABLE: &[&str] = &[
    "kill_syscalls",
    "kill_syscalls:fentry",
    "kill_syscalls:raw_syscalls",
    "kill_syscalls:tracepoint",
    "kill_syscalls:exit_tracepoints",
    "last_words",
    "last_words:fentry",
    "last_words:raw_syscalls",
    "last_words:tracepoint",
    "last_words:task_btf",
    "oom_mark_victim",
    "crash_stacks",
    "crash_stacks:tp_btf",
    "crash_stacks:tp_btf_no_regs",
    "sched_process_exec:bpf_loop",
];

/// `--disable-hook`'s value parser: one of [`DISABLEABLE`].
pub fn parse_disabled(value: &str) -> Result<String, String> {
    match DISABLEABLE.contains(&value) {
        true => Ok(value.to_string()),
        false => Err(format!(
            "not a hook or attach method; one of: {}",
            DISABLEABLE.join(", ")
        )),
    }
}

impl Disabled<'_> {
    fn check(&self, what: &str) -> Result<(), String> {
        debug_assert!(
            DISABLEABLE.contains(&what),
            "{what} missing from DISABLEABLE"
        );
        match self.0.iter().any(|d| d == what) {
            true => Err("disabled by --disable-hook".into()),
            false => Ok(()),
        }
    }
}

pub fn attached(name: &str, via: &str, detail: Option<String>) -> HookStatus {
    HookStatus {
        name: name.into(),
        via: Some(via.into()),
        attached: true,
        detail,
    }
}

pub fn unavailable(name: &str, detail: String) -> HookStatus {
    log::warn!("hook {name} unavailable: {detail}");
    HookStatus {
        name: name.into(),
        via: None,
        attached: false,
        detail: Some(detail),
    }
}

/// The kill family, first rung that attaches wins:
/// 1. `fentry`: fentry/fexit on each syscall's entry symbol (no grace
///    period at teardown, runs only for these calls; refused on some
///    kernels, e.g. under some lockdown setups),
/// 2. `raw_syscalls`: tp_btf on raw_syscalls sys_enter, filtered by
///    syscall number in the kernel (no grace period; runs on every syscall
///    of the machine, a compare and return for all but these); the calls'
///    returns on the family's own `syscalls:sys_exit_*` tracepoints, so no
///    program runs at any other syscall's exit (`raw_sys_exit` did on
///    all: ~53 ns each, BENCHMARKS.md); on raw_syscalls' sys_exit where
///    they cannot attach (`kill_syscalls:exit_tracepoints` forces it),
///    which the detail says,
/// 3. `tracepoint`: the 12 classic `syscalls:sys_{enter,exit}_*` (one grace
///    period each at teardown).
///
/// Each rung is `kill_syscalls:<via>` for `--disable-hook`; the detail says
/// why the rungs above the one used were passed over.
pub fn attach_kill_syscalls<P: Programs + ?Sized>(
    progs: &mut P,
    btf: &Btf,
    have_tracefs: bool,
    off: &Disabled,
) -> HookStatus {
    let name = "kill_syscalls";
    if let Err(e) = off.check(name) {
        return unavailable(name, e);
    }
    // Where the raw_syscalls rung's exits went, when not where they should.
    let note = std::cell::RefCell::new(None);
    let raw =
        |ebpf: &mut P, btf: &Btf, have_tracefs: bool| kill_raw(ebpf, btf, have_tracefs, off, &note);
    let rungs: [Rung<P>; 3] = [
        ("fentry", &kill_fentry::<P>, undo_fentry::<P>),
        ("raw_syscalls", &raw, undo_raw::<P>),
        ("tracepoint", &kill_classic::<P>, undo_classic::<P>),
    ];
    let status = climb(progs, btf, have_tracefs, off, name, &rungs);
    match status.via.as_deref() {
        Some("raw_syscalls") => with_note(status, note.take()),
        _ => status,
    }
}

/// `status` with `note` (what its rung did another way) after its detail.
fn with_note(mut status: HookStatus, note: Option<String>) -> HookStatus {
    if let Some(n) = note {
        status.detail = Some(match status.detail.take() {
            Some(d) => format!("{d}; {n}"),
            None => n,
        });
    }
    status
}

/// The kill family's programs, every rung's: its chain climbs on a thread
/// of its own.
pub fn is_kill_program(name: &str) -> bool {
    name.starts_with("kill_") || name == "raw_sys_enter" || name == "raw_sys_exit"
}

/// Crash stacks' programs, both rungs'.
pub fn is_crash_program(name: &str) -> bool {
    name == "crash_deliver" || name == "crash_deliver_fp"
}

/// One way to attach a hook: its `via`, how to attach, how to undo what a
/// failed attempt left behind.
type Rung<'a, E> = (&'a str, &'a Attach<'a, E>, Undo<E>);

/// The first rung that attaches wins; the detail says why the rungs above
/// it were passed over.
fn climb<E: ?Sized>(
    target: &mut E,
    btf: &Btf,
    have_tracefs: bool,
    off: &Disabled,
    name: &str,
    rungs: &[Rung<E>],
) -> HookStatus {
    let mut passed = Vec::new();
    for (via, attach, undo) in rungs {
        let res = off
            .check(&format!("{name}:{via}"))
            .and_then(|()| attach(target, btf, have_tracefs));
        match res {
            Ok(()) => {
                let detail = (!passed.is_empty()).then(|| passed.join("; "));
                if let Some(d) = &detail {
                    log::debug!("hook {name} via {via} ({d})");
                }
                return attached(name, via, detail);
            }
            Err(e) => {
                undo(target);
                passed.push(format!("{via}: {e}"));
            }
        }
    }
    unavailable(name, passed.join("; "))
}

type Attach<'a, E> = dyn Fn(&mut E, &Btf, bool) -> Result<(), String> + 'a;
/// Detach what a failed rung attached before it failed.
type Undo<E> = fn(&mut E);

fn kill_fentry<P: Programs + ?Sized>(ebpf: &mut P, btf: &Btf, _: bool) -> Result<(), String> {
    let prefix = SyscallArch::HOST
        .ok_or("no syscall table for this architecture")?
        .entry_prefix;
    for s in KILL_SYSCALLS {
        let target = format!("{prefix}{}", s.name());
        let p: &mut FEntry = program(ebpf, &format!("kill_fentry_{}", s.name()))?;
        p.load(&target, btf)
            .map_err(|e| format!("load fentry {target}: {}", brief(&e)))?;
        p.attach()
            .map_err(|e| format!("attach fentry {target}: {}", brief(&e)))?;
        let p: &mut FExit = program(ebpf, &format!("kill_fexit_{}", s.name()))?;
        p.load(&target, btf)
            .map_err(|e| format!("load fexit {target}: {}", brief(&e)))?;
        p.attach()
            .map_err(|e| format!("attach fexit {target}: {}", brief(&e)))?;
    }
    Ok(())
}

fn undo_fentry<P: Programs + ?Sized>(ebpf: &mut P) {
    for s in KILL_SYSCALLS {
        if let Ok(p) = program::<FEntry>(ebpf, &format!("kill_fentry_{}", s.name())) {
            let _ = p.unload();
        }
        if let Ok(p) = program::<FExit>(ebpf, &format!("kill_fexit_{}", s.name())) {
            let _ = p.unload();
        }
    }
}

fn kill_raw<P: Programs + ?Sized>(
    ebpf: &mut P,
    btf: &Btf,
    have_tracefs: bool,
    off: &Disabled,
    note: &std::cell::RefCell<Option<String>>,
) -> Result<(), String> {
    SyscallArch::HOST.ok_or("no syscall table for this architecture")?;
    attach_btf(ebpf, btf, "raw_sys_enter", "sys_enter")?;
    let exits = off
        .check("kill_syscalls:exit_tracepoints")
        .and_then(|()| match have_tracefs {
            true => attach_classic(ebpf, "kill_exit", "syscalls", &kill_exit_tracepoints()),
            false => Err("tracefs unavailable".into()),
        });
    let Err(why) = exits else {
        return Ok(());
    };
    detach_all(ebpf, "kill_exit");
    attach_btf(ebpf, btf, "raw_sys_exit", "sys_exit")?;
    *note.borrow_mut() = Some(format!("returns by raw_syscalls' sys_exit ({why})"));
    Ok(())
}

/// What a failed raw_syscalls rung may have attached, so that the rung
/// below it does not see each call twice.
fn undo_raw<P: Programs + ?Sized>(ebpf: &mut P) {
    for prog in ["raw_sys_enter", "raw_sys_exit"] {
        if let Ok(p) = program::<BtfTracePoint>(ebpf, prog) {
            let _ = p.unload();
        }
    }
    detach_all(ebpf, "kill_exit");
}

/// `syscalls:sys_exit_<name>` of each kill-family syscall.
fn kill_exit_tracepoints() -> Vec<String> {
    KILL_SYSCALLS
        .iter()
        .map(|s| format!("sys_exit_{}", s.name()))
        .collect()
}

fn kill_classic<P: Programs + ?Sized>(
    ebpf: &mut P,
    _: &Btf,
    have_tracefs: bool,
) -> Result<(), String> {
    if !have_tracefs {
        return Err("tracefs unavailable".into());
    }
    let enters: Vec<String> = KILL_SYSCALLS
        .iter()
        .map(|s| format!("sys_enter_{}", s.name()))
        .collect();
    attach_classic(ebpf, "kill_enter", "syscalls", &enters)?;
    attach_classic(ebpf, "kill_exit", "syscalls", &kill_exit_tracepoints())
}

fn undo_classic<P: Programs + ?Sized>(ebpf: &mut P) {
    detach_all(ebpf, "kill_enter");
    detach_all(ebpf, "kill_exit");
}

/// Crash stacks (`signal:signal_deliver`, a fatal crash-class signal of a
/// process of the run), first rung that attaches wins:
/// 1. `tp_btf`: with the user registers and a copy of the stack
///    (`bpf_task_pt_regs`, 5.15+): unwound through DWARF CFI,
/// 2. `tp_btf_no_regs`: the kernel's frame-pointer walk only.
///
/// Never required: without it a crash is certified without its stack,
/// and the certificate says so.
pub fn attach_crash_stacks<P: Programs + ?Sized>(
    progs: &mut P,
    btf: &Btf,
    off: &Disabled,
) -> HookStatus {
    let name = "crash_stacks";
    if let Err(e) = off.check(name) {
        return unavailable(name, e);
    }
    let regs =
        |ebpf: &mut P, btf: &Btf, _: bool| attach_btf(ebpf, btf, "crash_deliver", "signal_deliver");
    let fp = |ebpf: &mut P, btf: &Btf, _: bool| {
        attach_btf(ebpf, btf, "crash_deliver_fp", "signal_deliver")
    };
    let rungs: [Rung<P>; 2] = [
        ("tp_btf", &regs, |e| unload_btf(e, "crash_deliver")),
        ("tp_btf_no_regs", &fp, |e| unload_btf(e, "crash_deliver_fp")),
    ];
    climb(progs, btf, false, off, name, &rungs)
}

fn unload_btf(ebpf: &mut (impl Programs + ?Sized), prog: &str) {
    if let Ok(p) = program::<BtfTracePoint>(ebpf, prog) {
        let _ = p.unload();
    }
}

pub fn attach_oom(
    ebpf: &mut Ebpf,
    tracefs: &Result<std::path::PathBuf, String>,
    off: &Disabled,
) -> HookStatus {
    let name = "oom_mark_victim";
    let res = match tracefs {
        Ok(_) => off.check(name).and_then(|()| {
            attach_classic(ebpf, "oom_mark_victim", "oom", &["mark_victim".to_string()])
        }),
        Err(e) => Err(format!("tracefs unavailable: {e}")),
    };
    match res {
        Ok(()) => attached(name, "tracepoint", None),
        Err(e) => unavailable(name, e),
    }
}

pub fn attach_btf(
    ebpf: &mut (impl Programs + ?Sized),
    btf: &Btf,
    prog: &str,
    tracepoint: &str,
) -> Result<(), String> {
    let p: &mut BtfTracePoint = program(ebpf, prog)?;
    // Loaded already by `load_btf_beside`, or load it now.
    if p.fd().is_err() {
        p.load(tracepoint, btf)
            .map_err(|e| format!("load {prog}: {}", brief(&e)))?;
    }
    p.attach()
        .map_err(|e| format!("attach {prog}: {}", brief(&e)))?;
    Ok(())
}

/// A program of a required hook's chain: its name and the rung it is
/// named as in the hook's detail.
pub type Variant = (&'static str, &'static str);

/// Load (verify) the tp_btf programs `progs`, each on the tracepoint of its
/// own name, and the first of `chain` that loads (on `tracepoint`) on a
/// thread of its own beside them: the kernel verifies a privileged load
/// without a global lock, so on two CPUs the longest verification hides
/// the rest. The exec program's unrolled envp walk (~200,000 instructions
/// on 6.18) took 0.18 s of a 0.44 s start-up on the AMD EPYC guest, the
/// other three 0.08 s; its `bpf_loop` walk (21,457) is verified before
/// them. Attach with `attach_btf`.
///
/// Returns the program of `chain` that loaded and, when it is not the
/// first, why those before it were passed over (`"rung: why; …"`, a hook
/// status's detail). Every rung but the last can be disabled
/// (`<tracepoint>:<rung>`). Errors: (program, what failed), as
/// `attach_btf` words it.
pub fn load_btf_beside(
    set: &mut Subset,
    btf: &Btf,
    progs: &[&str],
    (tracepoint, chain): (&str, &[Variant]),
    off: &Disabled,
) -> Result<(&'static str, Option<String>), (String, String)> {
    let in_chain = |name: &str| chain.iter().position(|(p, _)| *p == name);
    let mut found: Vec<(&str, &mut Program)> = set
        .0
        .iter_mut()
        .map(|(name, p)| (*name, &mut **p))
        .filter(|(name, _)| progs.contains(name) || in_chain(name).is_some())
        .collect();
    // In `progs` and `chain` order, so the first failure is the one a
    // sequential load reports.
    found.sort_by_key(|(name, _)| (progs.iter().position(|p| p == name), in_chain(name)));
    let (alone, rest): (Vec<_>, Vec<_>) = found
        .into_iter()
        .partition(|(name, _)| in_chain(name).is_some());
    let load = |name: &str, p: &mut Program, on: &str| {
        let p: &mut BtfTracePoint = p
            .try_into()
            .map_err(|e: ProgramError| (name.to_string(), e.to_string()))?;
        p.load(on, btf)
            .map_err(|e| (name.to_string(), format!("load {name}: {}", brief(&e))))
    };
    let load_all = |group: Vec<(&str, &mut Program)>| {
        for (name, p) in group {
            load(name, p, name)?;
        }
        Ok(())
    };
    let load_first = |group: Vec<(&str, &mut Program)>| {
        let mut passed = Vec::new();
        for (name, p) in group {
            let (program, rung) = chain[in_chain(name).unwrap_or(0)];
            let refused = match chain.last() == Some(&(program, rung)) {
                // The last rung is the hook itself: a required hook is
                // never disabled.
                true => Ok(()),
                false => off.check(&format!("{tracepoint}:{rung}")),
            };
            let loaded = refused
                .map_err(|why| (name.to_string(), why))
                .and_then(|()| load(name, p, tracepoint));
            match loaded {
                Ok(()) => return Ok((program, (!passed.is_empty()).then(|| passed.join("; ")))),
                Err((_, why)) => passed.push(format!("{rung}: {why}")),
            }
        }
        Err((tracepoint.to_string(), passed.join("; ")))
    };
    std::thread::scope(|s| {
        let beside = s.spawn(|| load_first(alone));
        let rest = load_all(rest);
        let alone = beside
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        rest.and(alone)
    })
}

fn attach_classic(
    ebpf: &mut (impl Programs + ?Sized),
    prog: &str,
    category: &str,
    names: &[String],
) -> Result<(), String> {
    let p: &mut TracePoint = program(ebpf, prog)?;
    if p.fd().is_err() {
        p.load().map_err(|e| format!("load {prog}: {e}"))?;
    }
    for name in names {
        p.attach(category, name)
            .map_err(|e| format!("{category}:{name}: {e}"))?;
    }
    Ok(())
}

fn detach_all(ebpf: &mut (impl Programs + ?Sized), prog: &str) {
    if let Ok(p) = program::<TracePoint>(ebpf, prog) {
        let _ = p.unload();
    }
}

/// One line for a hook's detail: a refused load says why (EPERM, EINVAL)
/// without the verifier's multi-line log, which goes to the debug log.
fn brief(e: &ProgramError) -> String {
    match e {
        ProgramError::LoadError {
            io_error,
            verifier_log,
        } => {
            log::debug!("verifier output: {verifier_log}");
            format!("BPF_PROG_LOAD: {io_error}")
        }
        other => {
            let mut s = other.to_string();
            if let Some(src) = std::error::Error::source(other) {
                let t = src.to_string();
                if !s.contains(&t) {
                    s = format!("{s}: {t}");
                }
            }
            s
        }
    }
}

/// Where a chain finds its programs: the whole object, or a [`Subset`] of
/// it taken out for a thread of its own.
pub trait Programs {
    fn get(&mut self, name: &str) -> Option<&mut Program>;
}

impl Programs for Ebpf {
    fn get(&mut self, name: &str) -> Option<&mut Program> {
        self.program_mut(name)
    }
}

/// Some of an object's programs, by name: disjoint subsets of one `Ebpf`
/// are verified on threads of their own.
pub struct Subset<'a>(Vec<(&'a str, &'a mut Program)>);

impl<'a> Subset<'a> {
    /// The programs of `all` whose names `wanted` takes, moved out of it.
    pub fn take(all: &mut Vec<(&'a str, &'a mut Program)>, wanted: impl Fn(&str) -> bool) -> Self {
        Self(all.extract_if(.., |(name, _)| wanted(name)).collect())
    }
}

impl Programs for Subset<'_> {
    fn get(&mut self, name: &str) -> Option<&mut Program> {
        self.0
            .iter_mut()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| &mut **p)
    }
}

/// The program `name` of `progs`, as its type.
pub fn program<'a, T>(
    progs: &'a mut (impl Programs + ?Sized),
    name: &str,
) -> Result<&'a mut T, String>
where
    &'a mut T: TryFrom<&'a mut Program, Error = ProgramError>,
{
    progs
        .get(name)
        .ok_or_else(|| format!("program {name} missing from the object"))?
        .try_into()
        .map_err(|e: ProgramError| e.to_string())
}
