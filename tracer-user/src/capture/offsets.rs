//! Kernel struct offsets, resolved from the running kernel's BTF at load time.
//!
//! Rust eBPF gets no CO-RE relocations from the compiler, so nothing about a
//! kernel struct may be baked in at build time: we look every field up here
//! and hand the numbers to the programs as a global.
use btf_rs::{Btf, Type};
use tracer_common::{KernelOffsets, OFFSET_NONE};

use crate::error::{LoadError, TracerError};

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

pub fn load_vmlinux() -> Result<Btf, TracerError> {
    parse_vmlinux(&read_vmlinux()?)
}

/// The raw vmlinux BTF. One read, then parse from memory: parsing through
/// the file costs a seek per type (~130k syscalls, a third of a second).
pub fn read_vmlinux() -> Result<Vec<u8>, TracerError> {
    if !std::path::Path::new(VMLINUX_BTF).exists() {
        return Err(TracerError::NoBtf);
    }
    Ok(
        std::fs::read(VMLINUX_BTF).map_err(|source| LoadError::ReadBtf {
            path: VMLINUX_BTF,
            source,
        })?,
    )
}

pub fn parse_vmlinux(bytes: &[u8]) -> Result<Btf, TracerError> {
    // btf-rs reports with anyhow; kept as the boxed source.
    Btf::from_bytes(bytes).map_err(|e| {
        LoadError::ParseBtf {
            path: VMLINUX_BTF,
            source: e.into(),
        }
        .into()
    })
}

/// Byte offset of `field` in `struct name`, looking through anonymous
/// struct/union members (where e.g. `mm_struct.arg_start` lives).
pub fn member_offset(btf: &Btf, name: &str, field: &str) -> Option<u32> {
    let types = btf.resolve_types_by_name(name).ok()?;
    types.iter().find_map(|t| match t {
        Type::Struct(s) if !s.members.is_empty() => find_in(btf, s, field, 0),
        _ => None,
    })
}

fn find_in(btf: &Btf, s: &btf_rs::Struct, field: &str, base_bits: u32) -> Option<u32> {
    for m in &s.members {
        let bits = base_bits + m.bit_offset();
        let name = btf.resolve_name(m).unwrap_or_default();
        if name == field {
            return bits.is_multiple_of(8).then_some(bits / 8);
        }
        if name.is_empty() {
            if let Ok(Type::Struct(inner) | Type::Union(inner)) = btf.resolve_chained_type(m) {
                if let Some(off) = find_in(btf, &inner, field, bits) {
                    return Some(off);
                }
            }
        }
    }
    None
}

/// `sizeof(struct name)`.
pub fn struct_size(btf: &Btf, name: &str) -> Option<u32> {
    let types = btf.resolve_types_by_name(name).ok()?;
    types.iter().find_map(|t| match t {
        Type::Struct(s) if !s.members.is_empty() => Some(s.size() as u32),
        _ => None,
    })
}

/// Value of an enumerator, e.g. `memory_cgrp_id` in `enum cgroup_subsys_id`.
pub fn enum_value(btf: &Btf, enum_name: &str, member: &str) -> Option<u32> {
    let types = btf.resolve_types_by_name(enum_name).ok()?;
    types.iter().find_map(|t| match t {
        Type::Enum(e) => e
            .members
            .iter()
            .find(|m| btf.resolve_name(*m).ok().as_deref() == Some(member))
            .map(|m| m.val()),
        _ => None,
    })
}

/// Resolve every offset the programs use. Fields the core hooks cannot do
/// without are errors; the rest degrade to `OFFSET_NONE`.
pub fn resolve(btf: &Btf, oom_format: Option<&str>) -> Result<KernelOffsets, TracerError> {
    let mut o = resolve_btf(btf)?;
    apply_oom_format(&mut o, oom_format);
    Ok(o)
}

/// The offsets that come from BTF alone (what the cache keeps).
pub fn resolve_btf(btf: &Btf) -> Result<KernelOffsets, TracerError> {
    let req = |s: &str, f: &str| {
        member_offset(btf, s, f).ok_or_else(|| TracerError::MissingKernelType(format!("{s}.{f}")))
    };
    let opt = |s: &str, f: &str| member_offset(btf, s, f).unwrap_or(OFFSET_NONE);
    // start_boottime was real_start_time before 5.5.
    let start = member_offset(btf, "task_struct", "start_boottime")
        .or_else(|| member_offset(btf, "task_struct", "real_start_time"))
        .ok_or_else(|| TracerError::MissingKernelType("task_struct.start_boottime".into()))?;
    Ok(KernelOffsets {
        task_pid: req("task_struct", "pid")?,
        task_tgid: req("task_struct", "tgid")?,
        task_start_boottime: start,
        task_group_leader: req("task_struct", "group_leader")?,
        task_real_parent: opt("task_struct", "real_parent"),
        task_exit_code: req("task_struct", "exit_code")?,
        task_signal: opt("task_struct", "signal"),
        task_mm: opt("task_struct", "mm"),
        task_sighand: opt("task_struct", "sighand"),
        task_blocked: opt("task_struct", "blocked"),
        task_real_blocked: opt("task_struct", "real_blocked"),
        sighand_action: opt("sighand_struct", "action"),
        ksigaction_size: struct_size(btf, "k_sigaction").unwrap_or(OFFSET_NONE),
        ksigaction_handler: match (opt("k_sigaction", "sa"), opt("sigaction", "sa_handler")) {
            (sa, h) if sa != OFFSET_NONE && h != OFFSET_NONE => sa + h,
            _ => OFFSET_NONE,
        },
        task_cgroups: opt("task_struct", "cgroups"),
        task_comm: opt("task_struct", "comm"),
        task_files: opt("task_struct", "files"),
        files_fdt: opt("files_struct", "fdt"),
        fdtable_fd: opt("fdtable", "fd"),
        fdtable_max_fds: opt("fdtable", "max_fds"),
        file_inode: opt("file", "f_inode"),
        inode_mode: opt("inode", "i_mode"),
        inode_rdev: opt("inode", "i_rdev"),
        signal_live: opt("signal_struct", "live"),
        mm_arg_start: opt("mm_struct", "arg_start"),
        mm_arg_end: opt("mm_struct", "arg_end"),
        mm_start_stack: opt("mm_struct", "start_stack"),
        mm_env_end: opt("mm_struct", "env_end"),
        files_fd_array: opt("files_struct", "fd_array"),
        mm_start_code: opt("mm_struct", "start_code"),
        mm_exe_file: opt("mm_struct", "exe_file"),
        inode_i_ino: opt("inode", "i_ino"),
        inode_i_sb: opt("inode", "i_sb"),
        sb_s_dev: opt("super_block", "s_dev"),
        mm_saved_auxv: opt("mm_struct", "saved_auxv"),
        task_stack: opt("task_struct", "stack"),
        pt_regs_size: struct_size(btf, "pt_regs").unwrap_or(OFFSET_NONE),
        bprm_filename: opt("linux_binprm", "filename"),
        css_set_subsys: opt("css_set", "subsys"),
        memory_cgrp_id: enum_value(btf, "cgroup_subsys_id", "memory_cgrp_id")
            .unwrap_or(OFFSET_NONE),
        css_cgroup: opt("cgroup_subsys_state", "cgroup"),
        cgroup_kn: opt("cgroup", "kn"),
        kernfs_id: opt("kernfs_node", "id"),
        kernfs_name: opt("kernfs_node", "name"),
        task_thread_pid: opt("task_struct", "thread_pid"),
        pid_level: opt("pid", "level"),
        pid_numbers: opt("pid", "numbers"),
        upid_size: struct_size(btf, "upid").unwrap_or(OFFSET_NONE),
        upid_nr: opt("upid", "nr"),
        upid_ns: opt("upid", "ns"),
        pidns_inum: match (opt("pid_namespace", "ns"), opt("ns_common", "inum")) {
            (ns, inum) if ns != OFFSET_NONE && inum != OFFSET_NONE => ns + inum,
            _ => OFFSET_NONE,
        },
        task_compat_word: compat_word(btf),
        ..KernelOffsets::NONE
    })
}

/// `task_struct.thread_info.<compat word>` (thread_info is the task's first
/// member on x86-64 and arm64, both `THREAD_INFO_IN_TASK`). Unknown: every
/// syscall reads as native, as before this check existed.
fn compat_word(btf: &Btf) -> u32 {
    let Some(arch) = tracer_common::SyscallArch::HOST else {
        return OFFSET_NONE;
    };
    match (
        member_offset(btf, "task_struct", "thread_info"),
        member_offset(btf, "thread_info", arch.compat_word),
    ) {
        (Some(ti), Some(word)) => ti + word,
        _ => OFFSET_NONE,
    }
}

/// The `oom:mark_victim` record's fields, from its tracefs format file.
pub fn apply_oom_format(o: &mut KernelOffsets, oom_format: Option<&str>) {
    if let Some(format) = oom_format {
        let f = |name| tracepoint_field_offset(format, name).unwrap_or(OFFSET_NONE);
        o.oom_total_vm = f("total_vm");
        o.oom_anon_rss = f("anon_rss");
        o.oom_file_rss = f("file_rss");
        o.oom_shmem_rss = f("shmem_rss");
        o.oom_pgtables = f("pgtables");
        o.oom_score_adj = f("oom_score_adj");
    }
}

/// Offset of a field in a tracefs `format` file
/// (`\tfield:unsigned long anon_rss;\toffset:24;\tsize:8;\tsigned:0;`).
pub fn tracepoint_field_offset(format: &str, name: &str) -> Option<u32> {
    format.lines().find_map(|line| {
        let decl = line.trim().strip_prefix("field:")?.split(';').next()?;
        let field = decl.rsplit([' ', '*']).next()?;
        if field != name {
            return None;
        }
        let off = line.split("offset:").nth(1)?.split(';').next()?;
        off.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARK_VICTIM: &str = "name: mark_victim\nID: 609\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:int pid;\toffset:8;\tsize:4;\tsigned:1;\n\
\tfield:__data_loc char[] comm;\toffset:12;\tsize:4;\tsigned:0;\n\
\tfield:unsigned long total_vm;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long anon_rss;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:short oom_score_adj;\toffset:64;\tsize:2;\tsigned:1;\n";

    #[test]
    fn tracepoint_format_fields() {
        assert_eq!(tracepoint_field_offset(MARK_VICTIM, "pid"), Some(8));
        assert_eq!(tracepoint_field_offset(MARK_VICTIM, "anon_rss"), Some(24));
        assert_eq!(
            tracepoint_field_offset(MARK_VICTIM, "oom_score_adj"),
            Some(64)
        );
        assert_eq!(tracepoint_field_offset(MARK_VICTIM, "comm"), Some(12));
        // Pre-6.9 kernels only have pid: the rest must come back absent.
        assert_eq!(tracepoint_field_offset(MARK_VICTIM, "shmem_rss"), None);
    }

    /// Runs against the machine's own BTF when it has one (no root needed).
    #[test]
    fn resolves_on_this_kernel() {
        let Ok(btf) = load_vmlinux() else { return };
        let o = resolve(&btf, None).unwrap();
        assert_eq!(
            o.task_tgid,
            o.task_pid + 4,
            "pid and tgid are adjacent pid_t fields"
        );
        assert_ne!(
            o.mm_arg_start, OFFSET_NONE,
            "mm_struct.arg_start sits in an anonymous struct"
        );
        assert_eq!(o.mm_arg_end, o.mm_arg_start + 8);
        // arg_start, arg_end, env_start, env_end: one declaration.
        assert_eq!(o.mm_env_end, o.mm_arg_start + 24);
        // The embedded table's array comes after the `fdt` pointer.
        assert!(o.files_fd_array != OFFSET_NONE && o.files_fd_array > o.files_fdt);
        // x86-64: struct k_sigaction { struct sigaction sa; } with the
        // handler first; 32 bytes (handler, flags, restorer, mask).
        assert_eq!(o.ksigaction_handler, 0);
        assert_eq!(o.ksigaction_size, 32);
        assert_ne!(o.task_sighand, OFFSET_NONE);
        // x86-64: thread_info { flags, syscall_work, status, cpu } first in
        // the task (5.11+; 5.10 has no syscall_work).
        assert!(
            matches!(o.task_compat_word, 8 | 16),
            "{}",
            o.task_compat_word
        );
        assert_ne!(o.sighand_action, OFFSET_NONE);
    }
}
