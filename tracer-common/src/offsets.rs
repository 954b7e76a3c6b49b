//! Kernel struct field offsets, resolved by user space from the running
//! kernel's BTF and handed to the programs as a global.
/// Kernel struct field offsets resolved from the running kernel's BTF at load
/// time (never baked in at build time). `u32::MAX` means "not available".
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelOffsets {
    pub task_pid: u32,
    pub task_tgid: u32,
    pub task_start_boottime: u32,
    pub task_group_leader: u32,
    pub task_real_parent: u32,
    pub task_exit_code: u32,
    pub task_signal: u32,
    pub task_mm: u32,
    /// Signal dispositions: `task->sighand`, `sighand_struct.action`, the
    /// size of one `k_sigaction`, and `sa.sa_handler` within it.
    pub task_sighand: u32,
    pub sighand_action: u32,
    pub ksigaction_size: u32,
    pub ksigaction_handler: u32,
    /// `task->blocked` and `task->real_blocked` (sigset_t; the latter holds
    /// the mask while sigwait runs with the awaited signals unblocked).
    pub task_blocked: u32,
    pub task_real_blocked: u32,
    pub task_cgroups: u32,
    pub task_comm: u32,
    pub task_files: u32,
    pub files_fdt: u32,
    pub fdtable_fd: u32,
    /// `fdtable.max_fds`, `file.f_inode`, `inode.i_mode` and `inode.i_rdev`:
    /// where a write lands (last words skip /dev/null, follow a reopened tty).
    pub fdtable_max_fds: u32,
    pub file_inode: u32,
    pub inode_mode: u32,
    pub inode_rdev: u32,
    pub signal_live: u32,
    pub mm_arg_start: u32,
    pub mm_arg_end: u32,
    pub bprm_filename: u32,
    pub css_set_subsys: u32,
    pub memory_cgrp_id: u32,
    pub css_cgroup: u32,
    pub cgroup_kn: u32,
    pub kernfs_id: u32,
    pub kernfs_name: u32,
    /// Pid namespaces: `task->thread_pid`, `pid.level`, `pid.numbers`, the
    /// size of one `struct upid`, its `nr` and `ns`, and `pid_namespace.ns.inum`.
    pub task_thread_pid: u32,
    pub pid_level: u32,
    pub pid_numbers: u32,
    pub upid_size: u32,
    pub upid_nr: u32,
    pub upid_ns: u32,
    pub pidns_inum: u32,
    /// `task->thread_info.<SyscallArch::compat_word>`: marks a compat
    /// (ia32, AArch32) syscall or task.
    pub task_compat_word: u32,
    /// Offsets into the classic `oom:mark_victim` record (format file).
    pub oom_total_vm: u32,
    pub oom_anon_rss: u32,
    pub oom_file_rss: u32,
    pub oom_shmem_rss: u32,
    pub oom_pgtables: u32,
    pub oom_score_adj: u32,
    /// Crash stacks: where the executable is and which file it is
    /// (`mm->start_code`, `mm->exe_file->f_inode->{i_ino, i_sb->s_dev}`;
    /// `file.f_inode` is `file_inode` above),
    /// so its frames are found when the process is gone before its maps
    /// are read.
    pub mm_start_code: u32,
    pub mm_exe_file: u32,
    pub inode_i_ino: u32,
    pub inode_i_sb: u32,
    pub sb_s_dev: u32,
    /// `mm->saved_auxv`: AT_PHDR leads to the dynamic linker's list of
    /// loaded objects (`r_debug`), walked at a crash.
    pub mm_saved_auxv: u32,
    /// `task->stack` and `sizeof(struct pt_regs)`: where a task's user
    /// registers are on kernels without `bpf_task_pt_regs` (5.10), at the
    /// top of its kernel stack.
    pub task_stack: u32,
    pub pt_regs_size: u32,
    /// `mm->start_stack`: where a new image's argc is, its argv and envp
    /// pointers after it (the runners' variables are read from there at
    /// exec).
    pub mm_start_stack: u32,
    /// `mm->env_end`: the end of a new image's environment strings, which
    /// start at `mm->arg_end` (the exec program reads them in one piece).
    pub mm_env_end: u32,
    /// `files->fd_array`: the table a process's fds live in until it holds
    /// more than `NR_OPEN_DEFAULT`; an array of `struct file *` whose BTF
    /// lets the typed stderr twins load fd 2 without a probe read.
    pub files_fd_array: u32,
}

pub const OFFSET_NONE: u32 = u32::MAX;

impl KernelOffsets {
    pub const NONE: Self = Self {
        task_pid: OFFSET_NONE,
        task_tgid: OFFSET_NONE,
        task_start_boottime: OFFSET_NONE,
        task_group_leader: OFFSET_NONE,
        task_real_parent: OFFSET_NONE,
        task_exit_code: OFFSET_NONE,
        task_signal: OFFSET_NONE,
        task_mm: OFFSET_NONE,
        task_sighand: OFFSET_NONE,
        sighand_action: OFFSET_NONE,
        ksigaction_size: OFFSET_NONE,
        ksigaction_handler: OFFSET_NONE,
        task_blocked: OFFSET_NONE,
        task_real_blocked: OFFSET_NONE,
        task_cgroups: OFFSET_NONE,
        task_comm: OFFSET_NONE,
        task_files: OFFSET_NONE,
        files_fdt: OFFSET_NONE,
        fdtable_fd: OFFSET_NONE,
        fdtable_max_fds: OFFSET_NONE,
        file_inode: OFFSET_NONE,
        inode_mode: OFFSET_NONE,
        inode_rdev: OFFSET_NONE,
        signal_live: OFFSET_NONE,
        mm_arg_start: OFFSET_NONE,
        mm_arg_end: OFFSET_NONE,
        bprm_filename: OFFSET_NONE,
        css_set_subsys: OFFSET_NONE,
        memory_cgrp_id: OFFSET_NONE,
        css_cgroup: OFFSET_NONE,
        cgroup_kn: OFFSET_NONE,
        kernfs_id: OFFSET_NONE,
        kernfs_name: OFFSET_NONE,
        task_thread_pid: OFFSET_NONE,
        pid_level: OFFSET_NONE,
        pid_numbers: OFFSET_NONE,
        upid_size: OFFSET_NONE,
        upid_nr: OFFSET_NONE,
        upid_ns: OFFSET_NONE,
        pidns_inum: OFFSET_NONE,
        task_compat_word: OFFSET_NONE,
        oom_total_vm: OFFSET_NONE,
        oom_anon_rss: OFFSET_NONE,
        oom_file_rss: OFFSET_NONE,
        oom_shmem_rss: OFFSET_NONE,
        oom_pgtables: OFFSET_NONE,
        oom_score_adj: OFFSET_NONE,
        mm_start_code: OFFSET_NONE,
        mm_exe_file: OFFSET_NONE,
        inode_i_ino: OFFSET_NONE,
        inode_i_sb: OFFSET_NONE,
        sb_s_dev: OFFSET_NONE,
        mm_saved_auxv: OFFSET_NONE,
        task_stack: OFFSET_NONE,
        pt_regs_size: OFFSET_NONE,
        mm_start_stack: OFFSET_NONE,
        mm_env_end: OFFSET_NONE,
        files_fd_array: OFFSET_NONE,
    };
}
