//! The crash record: what the kernel side captures, in the dying thread's
//! own context at `signal:signal_deliver`, of a fatal crash-class signal —
//! the user registers, the kernel's own walk of the user stack (addresses,
//! and build ids with file offsets where the kernel could read them), the
//! fault address and a bounded copy of the stack memory above the stack
//! pointer. User space unwinds and symbolises it; the stack bytes never
//! reach the event log (they may hold secrets).

/// The signals whose default action dumps core and that the program itself
/// raised or caused: SIGQUIT 3, SIGILL 4, SIGTRAP 5, SIGABRT 6, SIGBUS 7,
/// SIGFPE 8, SIGSEGV 11, SIGXCPU 24, SIGXFSZ 25, SIGSYS 31 (the same
/// numbers on x86-64 and arm64). Bit `n` is signal `n`: the hook's common
/// path (SIGURG, SIGCHLD, SIGALRM…) is one shift, one AND, one branch.
pub const CRASH_SIGNAL_MASK: u64 = (1 << 3)
    | (1 << 4)
    | (1 << 5)
    | (1 << 6)
    | (1 << 7)
    | (1 << 8)
    | (1 << 11)
    | (1 << 24)
    | (1 << 25)
    | (1 << 31);

/// The stack is read in chunks of this size, each on its own: one unmapped
/// page (the top of the stack, a guard page) blanks only itself.
pub const CRASH_PAGE: usize = 4096;
pub const CRASH_PAGES: usize = 4;
/// Bytes of user stack copied, from the stack pointer's page up. 16 KiB
/// holds the frames of a C or Rust crash a few calls deep with room to
/// spare; deeper frames come from the kernel's frame-pointer walk
/// (`ips`) and are said to be so.
pub const CRASH_STACK_BYTES: usize = CRASH_PAGE * CRASH_PAGES;
/// Frames of the kernel's own walk (`bpf_get_stack`), each form.
pub const CRASH_FRAMES: usize = 64;

/// `regs` were read (`bpf_task_pt_regs`, 5.15+); without them only the
/// kernel's frame-pointer walk is there.
pub const CRASH_HAS_REGS: u32 = 1;
/// With `CRASH_HAS_REGS`: the registers were read from the top of the
/// task's kernel stack (no `bpf_task_pt_regs`), and matched the kernel's
/// own first frame.
pub const CRASH_REGS_FROM_STACK: u32 = 2;
/// The kernel stack's size the registers are found below, on x86-64 and
/// arm64 without KASAN (16 KiB; KASAN doubles it: the check against the
/// kernel's first frame then fails and the frame-pointer walk stays).
pub const KERNEL_THREAD_SIZE: u64 = 16 * 1024;

/// `struct bpf_stack_build_id.status`.
pub const BUILD_ID_VALID: i32 = 1;
pub const BUILD_ID_IP: i32 = 2;

/// `struct bpf_stack_build_id`: a frame as a module's build id and the file
/// offset in it (`status` VALID), or a bare address (`status` IP: the
/// kernel could not read the module's note then).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StackBuildId {
    pub status: i32,
    pub build_id: [u8; 20],
    pub offset_or_ip: u64,
}

/// Objects of the dynamic linker's list (`r_debug.r_map`) recorded, and
/// the bytes of each one's path kept.
pub const CRASH_OBJECTS: usize = 16;
pub const CRASH_OBJECT_NAME: usize = 120;

/// One object the dynamic linker had loaded: its load bias (`l_addr`) and
/// path (`l_name`, NUL-terminated, cut), read from the process's memory
/// while it lived.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LoadedObject {
    pub bias: u64,
    pub name: [u8; CRASH_OBJECT_NAME],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CrashRecord {
    pub hdr: crate::RecordHeader,
    pub task: crate::TaskId,
    pub comm: [u8; crate::COMM_LEN],
    pub sig: i32,
    /// `si_code`.
    pub code: i32,
    /// `si_addr`: the faulting address (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
    /// SIGTRAP); meaningless for the other signals.
    pub addr: u64,
    /// User registers at the fault: ip/pc, sp, fp (rbp / x29), lr (x30; 0
    /// on x86-64).
    pub regs: [u64; 4],
    /// `CRASH_HAS_REGS`.
    pub flags: u32,
    /// Bit `i`: page `i` of `stack` was read (else it is zeros).
    pub pages_ok: u32,
    /// The user address of `stack[0]`: the stack pointer's 4 KiB page.
    pub stack_base: u64,
    /// The executable: `mm->start_code` (its first executable segment's
    /// address, for its load bias), and its file's inode and device (the
    /// kernel's `s_dev` encoding, MAJOR << 20 | MINOR); 0 when unread. The
    /// file is found again by the path it was exec'd by, checked to be
    /// this inode.
    pub exe_start_code: u64,
    pub exe_ino: u64,
    pub exe_dev: u32,
    pub _pad: u32,
    /// Entries of `ips` / `build_ids` the kernel filled.
    pub ips_len: u32,
    pub build_ids_len: u32,
    /// Entries of `objects` read.
    pub objects_len: u32,
    pub _pad2: u32,
    pub objects: [LoadedObject; CRASH_OBJECTS],
    pub ips: [u64; CRASH_FRAMES],
    pub build_ids: [StackBuildId; CRASH_FRAMES],
    pub stack: [u8; CRASH_STACK_BYTES],
}
