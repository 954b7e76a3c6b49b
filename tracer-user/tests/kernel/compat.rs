//! Compat syscalls on the raw_syscalls rung: an ia32 syscall (`int 0x80`,
//! x86-64) or an AArch32 task's (arm64) is numbered by another table, so a
//! number it shares with a native kill-family call or write/writev is
//! another call. raw_syscalls sees every syscall by number: without the
//! compat check it recorded a kill call nobody made and last words nobody
//! wrote. Both rungs are forced to raw_syscalls, where fentry would attach.
use crate::common::*;
use tracer_user::eventlog::Record;

/// What the compat calls carry where a native call would have its
/// arguments: a signal to a pid, and a text as if written to fd 2.
const FAKE_TARGET: i64 = 32512;
const FAKE_SIG: i32 = 9;
const FAKE_WORDS: &str = "COMPAT-NOT-A-WRITE";

fn raw_rung_only() -> Vec<&'static str> {
    vec![
        "--disable-hook",
        "kill_syscalls:fentry",
        "--disable-hook",
        "kill_syscalls:tracepoint",
        "--disable-hook",
        "last_words:fentry",
        "--disable-hook",
        "last_words:tracepoint",
    ]
}

/// Nothing of the compat calls in the log; the native write before them is.
fn assert_nothing_misread(r: &Recorded) {
    for name in ["kill_syscalls", "last_words"] {
        let h = hook(&r.log, name);
        assert_eq!(
            (h.attached, h.via.as_deref()),
            (true, Some("raw_syscalls")),
            "{name}: {h:?}"
        );
    }
    let mut native_words = false;
    for e in r.events() {
        match e {
            Record::KillCall(k) => assert!(
                !(k.target_arg == FAKE_TARGET && k.sig == FAKE_SIG),
                "a compat syscall was read as {}({}, {})",
                k.syscall,
                k.target_arg,
                k.sig
            ),
            Record::LastWords(l) => {
                assert!(!l.text.contains(FAKE_WORDS), "misread as a write: {l:?}");
                native_words |= l.text.contains("NATIVE-WORDS");
            }
            _ => {}
        }
    }
    assert!(
        native_words,
        "the native write was captured: {}",
        r.stderr()
    );
}

#[cfg(target_arch = "x86_64")]
mod ia32 {
    use super::*;

    /// `int 0x80` from this 64-bit process: an ia32 syscall (ia32 numbers,
    /// arguments in ebx, ecx, edx), with rdi, rsi, rdx set as x86-64's
    /// call of the same number would take them.
    fn int80(nr: u64, di: u64, si: u64, dx: u64) -> i64 {
        let ret: i64;
        // SAFETY: getpid and getgid32 read no memory and change nothing;
        // the kernel zeroes r8-r11 on the way back from int 0x80.
        unsafe {
            std::arch::asm!(
                "int 0x80",
                inlateout("rax") nr as i64 => ret,
                in("rdi") di,
                in("rsi") si,
                in("rdx") dx,
                lateout("r8") _,
                lateout("r9") _,
                lateout("r10") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }

    #[test]
    fn ia32_calls_numbered_like_native_ones_are_not_misread() {
        let s = scenario(|| {
            // From a buffer this process wrote: the raw rung reads a
            // write's text at the syscall's entry, where a page of the
            // binary's read-only data never touched yet is not mapped (the
            // kernel faults it in later, inside the write), so an
            // `eprintln!` of a literal was missed on 5.10 once the test
            // binary's layout moved, and said so as unreadable text.
            let native = String::from("NATIVE-WORDS\n");
            std::io::Write::write_all(&mut std::io::stderr(), native.as_bytes()).unwrap();
            let iov = [FAKE_WORDS.as_ptr() as u64, FAKE_WORDS.len() as u64];
            // ia32 20 is getpid, x86-64 20 is writev(fd, iov, iovcnt).
            let pid = int80(20, 2, iov.as_ptr() as u64, 1);
            // ia32 200 is getgid32, x86-64 200 is tkill(tid, sig).
            let gid = int80(200, FAKE_TARGET as u64, FAKE_SIG as u64, 0);
            println!("ia32 getpid {pid} getgid32 {gid}");
        });
        let r = s.record(&raw_rung_only());
        let out = String::from_utf8_lossy(&r.output.stdout).into_owned();
        assert_eq!(r.code(), Some(0), "{out}{}", r.stderr());
        // Proof the ia32 calls ran as such (a kernel without ia32
        // emulation would have killed the scenario).
        let root = root(&r);
        let want = format!("ia32 getpid {} getgid32 0", root.pid);
        assert!(out.contains(&want), "{want} in {out}");
        assert_nothing_misread(&r);
    }
}

#[cfg(target_arch = "aarch64")]
mod aarch32 {
    use super::*;

    /// A static AArch32 (EABI) executable, assembled here: getppid (64,
    /// arm64's write there) with r0-r2 = 2, FAKE_WORDS, its length; syscall
    /// 130 (unused on arm: ENOSYS; arm64's tkill) with r0 = FAKE_TARGET,
    /// r1 = FAKE_SIG; then exit(7).
    fn aarch32_elf() -> Vec<u8> {
        const BASE: u32 = 0x10000;
        const CODE: u32 = 52 + 32; // after the ELF header and one program header
        let mut code: Vec<u32> = vec![
            0xE3A0_0002,                           // mov r0, #2
            0, // add r1, pc, #(words - (here + 8)): patched below
            0xE3A0_2000 | FAKE_WORDS.len() as u32, // mov r2, #len
            0xE3A0_7040, // mov r7, #64 (getppid)
            0xEF00_0000, // svc #0
            0xE3A0_0C7F, // mov r0, #0x7f00 (FAKE_TARGET)
            0xE3A0_1009, // mov r1, #9 (FAKE_SIG)
            0xE3A0_7082, // mov r7, #130
            0xEF00_0000, // svc #0
            0xE3A0_0007, // mov r0, #7
            0xE3A0_7001, // mov r7, #1 (exit)
            0xEF00_0000, // svc #0
        ];
        let words_at = 4 * code.len() as u32;
        code[1] = 0xE28F_1000 | (words_at - (4 + 8));
        assert_eq!(0x7f00, FAKE_TARGET);
        let mut text: Vec<u8> = code.iter().flat_map(|i| i.to_le_bytes()).collect();
        text.extend_from_slice(FAKE_WORDS.as_bytes());
        let size = CODE + text.len() as u32;

        let mut elf = Vec::new();
        elf.extend_from_slice(b"\x7fELF\x01\x01\x01\0\0\0\0\0\0\0\0\0");
        let h16 = |e: &mut Vec<u8>, v: u16| e.extend_from_slice(&v.to_le_bytes());
        let h32 = |e: &mut Vec<u8>, v: u32| e.extend_from_slice(&v.to_le_bytes());
        h16(&mut elf, 2); // ET_EXEC
        h16(&mut elf, 40); // EM_ARM
        h32(&mut elf, 1);
        h32(&mut elf, BASE + CODE); // entry
        h32(&mut elf, 52); // phoff
        h32(&mut elf, 0); // shoff
        h32(&mut elf, 0x0500_0000); // EABI version 5: arm64 runs only EABI
        for v in [52, 32, 1, 40, 0, 0] {
            h16(&mut elf, v); // ehsize, phentsize, phnum, shentsize, shnum, shstrndx
        }
        // PT_LOAD of the whole file, read + execute.
        for v in [1, 0, BASE, BASE, size, size, 5, 0x1000] {
            h32(&mut elf, v);
        }
        assert_eq!(elf.len() as u32, CODE);
        elf.extend_from_slice(&text);
        elf
    }

    /// ID_AA64PFR0_EL1.EL0 is 2 where EL0 runs AArch32 too (the kernel
    /// emulates the read for user space, HWCAP_CPUID, 4.11+).
    fn cpu_runs_aarch32() -> bool {
        let pfr0: u64;
        // SAFETY: a read of an ID register, which the kernel traps and
        // answers; no memory is touched.
        unsafe {
            std::arch::asm!("mrs {}, ID_AA64PFR0_EL1", out(reg) pfr0, options(nomem, nostack))
        };
        pfr0 & 0xf == 2
    }

    #[test]
    fn aarch32_calls_numbered_like_native_ones_are_not_misread() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("a32");
        std::fs::write(&prog, aarch32_elf()).unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let script = format!("echo NATIVE-WORDS >&2; {}", prog.display());
        let r = record(&raw_rung_only(), &["sh", "-c", &script]);
        if r.code() == Some(126) && !cpu_runs_aarch32() {
            // Many recent arm64 cores (Neoverse N2/V2, Apple's) have no
            // AArch32 at all: no compat task can exist to be misread.
            eprintln!("no AArch32 at EL0 on this CPU: nothing to misread");
            return;
        }
        assert_eq!(r.code(), Some(7), "the AArch32 program ran: {}", r.stderr());
        assert_nothing_misread(&r);
    }
}
