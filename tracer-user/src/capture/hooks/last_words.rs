//! Last words' chain: fentry, the kill family's raw_syscalls program, the
//! write tracepoints; the first two in twins by how they read the task.
use aya::{
    maps::{MapData, ProgramArray},
    programs::{BtfTracePoint, FEntry},
    Btf, Ebpf,
};
use tracer_common::{SyscallArch, STDERR_SYSCALLS};

use super::{
    attach_classic, brief, climb, detach_all, program, unavailable, with_note, Disabled, Rung, Undo,
};
use crate::eventlog::HookStatus;

/// Last words (stderr writes), first rung that attaches wins, each
/// `last_words:<via>` for `--disable-hook`:
/// 1. `fentry`: fentry on the write and writev syscalls' entry symbols,
/// 2. `raw_syscalls`: only when the kill family is on raw_syscalls — its
///    `raw_sys_enter`, which runs on every syscall anyway, tail-calls last
///    words' programs for write and writev (attaching raw_syscalls for writes
///    alone would add a program run to every syscall of the machine),
/// 3. `tracepoint`: `syscalls:sys_enter_write` and `sys_enter_writev` (a
///    perf record per call, a grace period each at teardown).
///
/// `kill_via` is how the kill family attached.
pub fn attach_last_words(
    ebpf: &mut Ebpf,
    btf: &Btf,
    have_tracefs: bool,
    kill_via: Option<&str>,
    off: &Disabled,
) -> HookStatus {
    let name = "last_words";
    if let Err(e) = off.check(name) {
        return unavailable(name, e);
    }
    // What the winning rung's twins say (`twins`), added to the detail.
    let note = std::cell::RefCell::new(None);
    let fentry = |ebpf: &mut Ebpf, btf: &Btf, _: bool| {
        twins(
            ebpf,
            off,
            &note,
            |e, twin| stderr_fentry(e, btf, twin),
            undo_stderr_fentry,
        )
    };
    let raw = |ebpf: &mut Ebpf, btf: &Btf, _: bool| match kill_via {
        Some("raw_syscalls") => twins(
            ebpf,
            off,
            &note,
            |e, twin| stderr_raw(e, btf, twin),
            undo_stderr_raw,
        ),
        Some(via) => Err(format!("kill_syscalls is on {via}, not raw_syscalls")),
        None => Err("kill_syscalls is not attached".into()),
    };
    let rungs: [Rung<Ebpf>; 3] = [
        ("fentry", &fentry, undo_stderr_fentry),
        ("raw_syscalls", &raw, undo_stderr_raw),
        ("tracepoint", &stderr_classic, undo_stderr_classic),
    ];
    let status = climb(ebpf, btf, have_tracefs, off, name, &rungs);
    match status.attached {
        true => with_note(status, note.take()),
        false => status,
    }
}

/// Last words' fentry and raw_syscalls programs come in twins
/// (tracer-ebpf/src/task.rs): the task's fields by plain loads from its
/// BTF-typed pointer (`bpf_get_current_task_btf`, 5.11+; a 100-byte write
/// of a run's process cost 400 ns of programs instead of 585 on the AMD
/// EPYC guest), else by the probe-read helper (`_probed`, every kernel).
const TWINS: [(&str, &str); 2] = [("", "task_btf"), ("_probed", "probe reads")];

/// Attach the first twin of a rung that attaches (`--disable-hook
/// last_words:task_btf` skips the first); when it is the second, `note`
/// says why the first was passed over. What a refused first twin attached
/// is undone before the second: both at once would capture each write
/// twice. Err: the second twin's refusal (the rung's own, whatever reads
/// its programs make).
fn twins(
    ebpf: &mut Ebpf,
    off: &Disabled,
    note: &std::cell::RefCell<Option<String>>,
    attach: impl Fn(&mut Ebpf, &str) -> Result<(), String>,
    undo: Undo<Ebpf>,
) -> Result<(), String> {
    let (first, second) = (TWINS[0], TWINS[1]);
    let why = match off
        .check(&format!("last_words:{}", first.1))
        .and_then(|()| attach(ebpf, first.0))
    {
        Ok(()) => return Ok(()),
        Err(why) => why,
    };
    undo(ebpf);
    attach(ebpf, second.0)?;
    *note.borrow_mut() = Some(format!("task fields by {} ({}: {why})", second.1, first.1));
    Ok(())
}

fn stderr_fentry(ebpf: &mut Ebpf, btf: &Btf, twin: &str) -> Result<(), String> {
    let prefix = SyscallArch::HOST
        .ok_or("no syscall table for this architecture")?
        .entry_prefix;
    for s in STDERR_SYSCALLS {
        let target = format!("{prefix}{}", s.name());
        let p: &mut FEntry = program(ebpf, &format!("stderr_fentry_{}{twin}", s.name()))?;
        p.load(&target, btf)
            .map_err(|e| format!("load fentry {target}: {}", brief(&e)))?;
        p.attach()
            .map_err(|e| format!("attach fentry {target}: {}", brief(&e)))?;
    }
    Ok(())
}

fn undo_stderr_fentry(ebpf: &mut Ebpf) {
    for (s, (twin, _)) in STDERR_SYSCALLS.iter().flat_map(|s| TWINS.map(|t| (s, t))) {
        if let Ok(p) = program::<FEntry>(ebpf, &format!("stderr_fentry_{}{twin}", s.name())) {
            let _ = p.unload();
        }
    }
}

/// Load `stderr_raw_<syscall>` for raw_syscalls' sys_enter and put it in
/// `STDERR_RAW`'s slot: from then on `raw_sys_enter` tail-calls it.
fn stderr_raw(ebpf: &mut Ebpf, btf: &Btf, twin: &str) -> Result<(), String> {
    for s in STDERR_SYSCALLS {
        let prog = format!("stderr_raw_{}{twin}", s.name());
        let p: &mut BtfTracePoint = program(ebpf, &prog)?;
        p.load("sys_enter", btf)
            .map_err(|e| format!("load {prog}: {}", brief(&e)))?;
        let fd = p
            .fd()
            .and_then(|fd| fd.try_clone().map_err(Into::into))
            .map_err(|e| format!("{prog}: {e}"))?;
        let mut table = stderr_raw_table(ebpf)?;
        table
            .set(s as u32, &fd, 0)
            .map_err(|e| format!("STDERR_RAW[{prog}]: {e}"))?;
    }
    Ok(())
}

fn stderr_raw_table(ebpf: &mut Ebpf) -> Result<ProgramArray<&mut MapData>, String> {
    let map = ebpf
        .map_mut("STDERR_RAW")
        .ok_or("map STDERR_RAW missing from the object")?;
    ProgramArray::try_from(map).map_err(|e| format!("STDERR_RAW: {e}"))
}

fn undo_stderr_raw(ebpf: &mut Ebpf) {
    if let Ok(mut table) = stderr_raw_table(ebpf) {
        for s in STDERR_SYSCALLS {
            let _ = table.clear_index(&(s as u32));
        }
    }
    for (s, (twin, _)) in STDERR_SYSCALLS.iter().flat_map(|s| TWINS.map(|t| (s, t))) {
        if let Ok(p) = program::<BtfTracePoint>(ebpf, &format!("stderr_raw_{}{twin}", s.name())) {
            let _ = p.unload();
        }
    }
}

fn stderr_classic(ebpf: &mut Ebpf, _: &Btf, have_tracefs: bool) -> Result<(), String> {
    if !have_tracefs {
        return Err("tracefs unavailable".into());
    }
    for s in STDERR_SYSCALLS {
        let tp = format!("sys_enter_{}", s.name());
        attach_classic(ebpf, &format!("stderr_{}", s.name()), "syscalls", &[tp])?;
    }
    Ok(())
}

fn undo_stderr_classic(ebpf: &mut Ebpf) {
    detach_all(ebpf, "stderr_write");
    detach_all(ebpf, "stderr_writev");
}
