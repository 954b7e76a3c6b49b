//! Kernel offsets resolved once per kernel: parsing vmlinux BTF with btf-rs
//! is the largest part of start-up (~0.1 s release, tens of MB of heap), and
//! its result only changes with the kernel (or with tracer's own resolver).
//!
//! The cache lives in a root-owned 0700 directory, written through the
//! output-directory helpers (O_EXCL temp file + rename, no symlink
//! followed). On load a file that is not a regular file owned by root is
//! ignored; one whose key is not this one, or whose checksum is wrong, is
//! ignored and rewritten. The key is a SHA-256 (stable across Rust releases
//! and builds, unlike std's `DefaultHasher`) of this kernel's BTF (size and
//! every byte), the layout of `KernelOffsets` as compiled (every field's
//! name, offset and size: [`LAYOUT`]), the resolver's source text and
//! tracer's version: the offsets also decide which processes the watchdog
//! kills, so a cache is trusted only by the build whose struct it fills.
use std::{
    io::{BufRead, Read},
    os::unix::fs::MetadataExt,
    path::Path,
};

use sha2::{Digest, Sha256};
use tracer_common::KernelOffsets;

use crate::outdir::{OutDir, Policy};

pub const CACHE_DIR: &str = "/var/cache/tracer";
const FILE: &str = "kernel-offsets";
/// 02: SHA-256 key and checksum (01 used `DefaultHasher` and hashed the
/// source of a file the struct had moved out of).
const MAGIC: &[u8; 8] = b"TRCOFF02";
const RESOLVER: &str = include_str!("offsets.rs");
const WORDS: usize = core::mem::size_of::<KernelOffsets>() / 4;

/// What a cache file is for: the SHA-256 of what its offsets depend on.
pub type Key = [u8; 32];

/// One field of the offsets struct as compiled: name, byte offset, size.
pub type Field = (&'static str, usize, usize);

/// Every field of `KernelOffsets`, in declaration order, with its
/// `offset_of!` and size. The pattern below has no `..`: a field added to,
/// removed from or renamed in the struct does not compile until this list
/// says so; a reordered or retyped one changes an offset or a size. Either
/// way the key changes and an older cache is ignored.
macro_rules! layout {
    ($($field:ident),* $(,)?) => {{
        #[allow(dead_code, reason = "never called: it fails to compile when a field is missing")]
        fn every_field_is_listed(o: KernelOffsets) {
            let KernelOffsets { $($field: _),* } = o;
        }
        &[$((
            stringify!($field),
            core::mem::offset_of!(KernelOffsets, $field),
            core::mem::size_of_val(&KernelOffsets::NONE.$field),
        )),*]
    }};
}

pub const LAYOUT: &[Field] = layout!(
    task_pid,
    task_tgid,
    task_start_boottime,
    task_group_leader,
    task_real_parent,
    task_exit_code,
    task_signal,
    task_mm,
    task_sighand,
    sighand_action,
    ksigaction_size,
    ksigaction_handler,
    task_blocked,
    task_real_blocked,
    task_cgroups,
    task_comm,
    task_files,
    files_fdt,
    fdtable_fd,
    fdtable_max_fds,
    file_inode,
    inode_mode,
    inode_rdev,
    signal_live,
    mm_arg_start,
    mm_arg_end,
    bprm_filename,
    css_set_subsys,
    memory_cgrp_id,
    css_cgroup,
    cgroup_kn,
    kernfs_id,
    kernfs_name,
    task_thread_pid,
    pid_level,
    pid_numbers,
    upid_size,
    upid_nr,
    upid_ns,
    pidns_inum,
    task_compat_word,
    oom_total_vm,
    oom_anon_rss,
    oom_file_rss,
    oom_shmem_rss,
    oom_pgtables,
    oom_score_adj,
    mm_start_code,
    mm_exe_file,
    inode_i_ino,
    inode_i_sb,
    sb_s_dev,
    mm_saved_auxv,
    task_stack,
    pt_regs_size,
    mm_start_stack,
    mm_env_end,
    files_fd_array,
);

/// `to_words`/`from_words` treat the struct as `[u32; WORDS]`: checked here
/// from the layout itself, so a u64 field or padding fails the build.
const _: () = {
    let mut i = 0;
    while i < LAYOUT.len() {
        assert!(LAYOUT[i].1 == 4 * i && LAYOUT[i].2 == 4);
        i += 1;
    }
    assert!(LAYOUT.len() == WORDS && 4 * WORDS == core::mem::size_of::<KernelOffsets>());
};

/// The key for this kernel's BTF (read in chunks: a warm start never holds
/// the whole file) and this build.
pub fn key(btf: impl Read) -> std::io::Result<Key> {
    key_with(btf, LAYOUT, RESOLVER, env!("CARGO_PKG_VERSION"))
}

/// Each part is length-prefixed, so no two different inputs hash the same
/// byte stream.
fn key_with(
    btf: impl Read,
    layout: &[Field],
    resolver: &str,
    version: &str,
) -> std::io::Result<Key> {
    let part = |h: &mut Sha256, b: &[u8]| {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    };
    let mut h = Sha256::new();
    part(&mut h, b"tracer kernel-offsets key");
    let mut r = std::io::BufReader::with_capacity(64 << 10, btf);
    let mut len = 0u64;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        h.update(chunk);
        let n = chunk.len();
        len += n as u64;
        r.consume(n);
    }
    h.update(len.to_le_bytes());
    h.update((layout.len() as u64).to_le_bytes());
    for (name, offset, size) in layout {
        part(&mut h, name.as_bytes());
        h.update((*offset as u64).to_le_bytes());
        h.update((*size as u64).to_le_bytes());
    }
    part(&mut h, resolver.as_bytes());
    part(&mut h, version.as_bytes());
    Ok(h.finalize().into())
}

fn checksum(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn to_words(o: &KernelOffsets) -> [u32; WORDS] {
    // SAFETY: KernelOffsets is repr(C), all u32 fields at 4 × their index,
    // no padding (checked from LAYOUT above): the layout of [u32; WORDS].
    unsafe { core::mem::transmute_copy(o) }
}

fn from_words(w: [u32; WORDS]) -> KernelOffsets {
    // SAFETY: as in `to_words`; every bit pattern is a valid u32.
    unsafe { core::mem::transmute_copy(&w) }
}

const LEN: usize = MAGIC.len() + 32 + 4 * WORDS + 32;

pub fn encode(key: &Key, o: &KernelOffsets) -> Vec<u8> {
    let mut v = Vec::with_capacity(LEN);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(key);
    for w in to_words(o) {
        v.extend_from_slice(&w.to_le_bytes());
    }
    let sum = checksum(&v);
    v.extend_from_slice(&sum);
    v
}

/// The offsets in `bytes` if they are whole, intact and for `key`.
pub fn decode(key: &Key, bytes: &[u8]) -> Option<KernelOffsets> {
    if bytes.len() != LEN || &bytes[..8] != MAGIC {
        return None;
    }
    let (body, sum) = bytes.split_at(bytes.len() - 32);
    if checksum(body) != sum {
        return None;
    }
    if &body[8..40] != key {
        return None;
    }
    let mut w = [0u32; WORDS];
    for (i, c) in body[40..].chunks_exact(4).enumerate() {
        w[i] = u32::from_le_bytes(c.try_into().ok()?);
    }
    Some(from_words(w))
}

/// Cached offsets for `key`, if a trustworthy cache holds them.
pub fn load(dir: &Path, key: &Key) -> Option<KernelOffsets> {
    // Walked as an output directory is: no link followed that a non-root
    // user could have made, root's (tracer runs as root), not world-writable.
    let d = OutDir::open_existing(dir)
        .ok()
        .and_then(|_| OutDir::open(dir, Policy::default()).ok())?;
    let mut file = d.open_read(FILE).ok()?;
    let meta = file.metadata().ok()?;
    if meta.uid() != 0 || meta.len() > 4096 {
        log::debug!("offset cache file not root's or oversized, ignored");
        return None;
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    let found = decode(key, &bytes);
    if found.is_none() {
        log::debug!("offset cache is stale or corrupt: rewriting it");
    }
    found
}

/// Write the cache (best effort: a read-only /var only costs the next run
/// the parse again).
pub fn store(dir: &Path, key: &Key, o: &KernelOffsets) {
    let res = OutDir::open(dir, Policy::default())
        .map_err(|e| e.to_string())
        .and_then(|d| {
            d.write_atomic(FILE, &encode(key, o))
                .map_err(|e| e.to_string())
        });
    if let Err(e) = res {
        log::debug!("offset cache {} not written: {e}", dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> KernelOffsets {
        KernelOffsets {
            task_pid: 1234,
            task_tgid: 1238,
            ..KernelOffsets::NONE
        }
    }

    fn k(n: u8) -> Key {
        [n; 32]
    }

    #[test]
    fn round_trip_and_rejects() {
        let o = sample();
        let bytes = encode(&k(7), &o);
        let back = decode(&k(7), &bytes).expect("round trip");
        assert_eq!(to_words(&back), to_words(&o));
        assert!(decode(&k(8), &bytes).is_none(), "another kernel's cache");
        let mut bad = bytes.clone();
        bad[44] ^= 1;
        assert!(decode(&k(7), &bad).is_none(), "a flipped bit");
        assert!(
            decode(&k(7), &bytes[..bytes.len() - 1]).is_none(),
            "truncated"
        );
        assert!(decode(&k(7), b"").is_none());
    }

    #[test]
    fn key_follows_the_btf() {
        let k = |b: &[u8]| key(b).unwrap();
        assert_eq!(k(b"abc"), k(b"abc"));
        assert_ne!(k(b"abc"), k(b"abd"));
        assert_ne!(k(b"abc"), k(b"abcd"));
    }

    /// The layout is the compiled struct's: every field, in order, where
    /// `offset_of!` puts it (the compile-time checks say the same).
    #[test]
    fn layout_describes_the_struct() {
        assert_eq!(LAYOUT.len(), WORDS);
        assert_eq!(LAYOUT[0], ("task_pid", 0, 4));
        assert_eq!(
            LAYOUT.last().unwrap().0,
            "files_fd_array",
            "the last field of KernelOffsets"
        );
        let mut names: Vec<&str> = LAYOUT.iter().map(|f| f.0).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LAYOUT.len(), "each field once");
    }

    /// What round 3's finding 10 was about: the old key hashed a file the
    /// struct had moved out of, so a rebuild that reordered fields kept the
    /// key and trusted offsets written for another order. Any change to the
    /// layout description is a new key.
    #[test]
    fn key_changes_when_the_layout_changes() {
        let key = |layout: &[Field]| key_with(&b"btf"[..], layout, RESOLVER, "1.0").unwrap();
        let base = key(LAYOUT);
        assert_eq!(base, key(LAYOUT), "deterministic");

        // Two fields swapped: same names, same size, other offsets.
        let mut swapped = LAYOUT.to_vec();
        let (a, b) = (swapped[0].1, swapped[1].1);
        swapped[0].1 = b;
        swapped[1].1 = a;
        swapped.swap(0, 1);
        assert_ne!(key(&swapped), base, "reordered fields");

        let mut renamed = LAYOUT.to_vec();
        renamed[3].0 = "task_leader";
        assert_ne!(key(&renamed), base, "a renamed field");

        let mut added = LAYOUT.to_vec();
        added.push(("task_new", 4 * WORDS, 4));
        assert_ne!(key(&added), base, "an added field");

        let mut widened = LAYOUT.to_vec();
        widened.last_mut().unwrap().2 = 8;
        assert_ne!(key(&widened), base, "a field of another size");

        // A name boundary moved: the length prefixes keep them apart.
        let one: &[Field] = &[("ab", 0, 4), ("c", 4, 4)];
        let other: &[Field] = &[("a", 0, 4), ("bc", 4, 4)];
        assert_ne!(key(one), key(other));

        // And the rest of what the offsets depend on.
        assert_ne!(
            key_with(&b"btf"[..], LAYOUT, RESOLVER, "1.1").unwrap(),
            base,
            "another tracer version"
        );
        assert_ne!(
            key_with(&b"btf"[..], LAYOUT, "fn resolve() {}", "1.0").unwrap(),
            base,
            "another resolver"
        );
    }

    /// SHA-256 of a byte stream spelled out here, so the key cannot depend
    /// on anything a Rust release may change (std's DefaultHasher did).
    #[test]
    fn key_is_a_stable_sha256() {
        let layout: &[Field] = &[("f", 0, 4)];
        let mut stream = Vec::new();
        let part = |s: &mut Vec<u8>, b: &[u8]| {
            s.extend_from_slice(&(b.len() as u64).to_le_bytes());
            s.extend_from_slice(b);
        };
        part(&mut stream, b"tracer kernel-offsets key");
        stream.extend_from_slice(b"abc");
        stream.extend_from_slice(&3u64.to_le_bytes());
        stream.extend_from_slice(&1u64.to_le_bytes());
        part(&mut stream, b"f");
        stream.extend_from_slice(&0u64.to_le_bytes());
        stream.extend_from_slice(&4u64.to_le_bytes());
        part(&mut stream, b"r");
        part(&mut stream, b"1.0");
        let want: Key = Sha256::digest(&stream).into();
        assert_eq!(key_with(&b"abc"[..], layout, "r", "1.0").unwrap(), want);
        // The same stream's digest, computed outside Rust (python3 hashlib):
        // the algorithm, not only its use, is fixed.
        let hex: String = want.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, GOLDEN);
    }

    const GOLDEN: &str = "177fa7a75288680a808c334b29cd97af64dd9e1561825fc2d90125294e910847";

    /// The file checks need root (chown); `cargo xtask test` runs as root.
    #[test]
    fn only_an_intact_root_owned_regular_file_is_trusted() {
        if !nix::unistd::geteuid().is_root() {
            panic!("this test needs root (run it through `cargo xtask test`)");
        }
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let file = dir.join(FILE);
        let o = sample();
        assert!(load(&dir, &k(7)).is_none(), "no cache yet");
        store(&dir, &k(7), &o);
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "created owner-only");
        assert!(load(&dir, &k(7)).is_some(), "warm");
        assert!(load(&dir, &k(8)).is_none(), "another kernel");

        std::fs::write(&file, b"garbage").unwrap();
        assert!(load(&dir, &k(7)).is_none(), "corrupt: ignored");
        store(&dir, &k(7), &o);
        assert!(load(&dir, &k(7)).is_some(), "corrupt: rewritten");

        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
        assert!(load(&dir, &k(7)).is_none(), "not root's: ignored");

        std::fs::remove_file(&file).unwrap();
        let real = tmp.path().join("elsewhere");
        std::fs::write(&real, encode(&k(7), &o)).unwrap();
        std::os::unix::fs::symlink(&real, &file).unwrap();
        assert!(load(&dir, &k(7)).is_none(), "a symlink: not followed");
        store(&dir, &k(7), &o);
        assert!(
            std::fs::symlink_metadata(&file).unwrap().is_file(),
            "the link replaced, not written through"
        );
        assert!(load(&dir, &k(7)).is_some());
    }
}
