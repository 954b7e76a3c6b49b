//! Kernel offsets resolved once per kernel: parsing vmlinux BTF with btf-rs
//! is the largest part of start-up (~0.1 s release, tens of MB of heap), and
//! its result only changes with the kernel (or with tracer's own resolver).
//!
//! The cache lives in a root-owned 0700 directory, written through the
//! output-directory helpers (O_EXCL temp file + rename, no symlink
//! followed). On load a file that is not a regular file owned by root is
//! ignored; one that does not match this kernel's BTF (size + hash), this
//! tracer's resolver and offsets layout (their source text), or whose
//! checksum is wrong, is ignored and rewritten.
use std::{
    hash::{Hash, Hasher},
    io::{BufRead, Read},
    os::unix::fs::MetadataExt,
    path::Path,
};

use tracer_common::KernelOffsets;

use crate::outdir::{OutDir, Policy};

pub const CACHE_DIR: &str = "/var/cache/tracer";
const FILE: &str = "kernel-offsets";
const MAGIC: &[u8; 8] = b"TRCOFF01";
const RESOLVER: &str = include_str!("offsets.rs");
const OFFSETS_LAYOUT: &str = include_str!("../../../tracer-common/src/lib.rs");
const WORDS: usize = core::mem::size_of::<KernelOffsets>() / 4;
const _: () = assert!(core::mem::size_of::<KernelOffsets>().is_multiple_of(4));

/// The identity of a kernel's BTF (its size and a hash of every byte) and of
/// the code that resolves it, read in chunks: a warm start never holds the
/// whole file.
pub fn key(btf: impl Read) -> std::io::Result<u64> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut r = std::io::BufReader::with_capacity(64 << 10, btf);
    let mut len = 0u64;
    loop {
        let chunk = r.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        h.write(chunk);
        let n = chunk.len();
        len += n as u64;
        r.consume(n);
    }
    len.hash(&mut h);
    // The code that resolves the offsets and the struct they fill: any edit
    // to either (a new fallback name, a reordered field) is a new key, so a
    // cache never outlives the resolver that wrote it.
    RESOLVER.hash(&mut h);
    OFFSETS_LAYOUT.hash(&mut h);
    env!("CARGO_PKG_VERSION").hash(&mut h);
    Ok(h.finish())
}

fn checksum(bytes: &[u8]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn to_words(o: &KernelOffsets) -> [u32; WORDS] {
    // SAFETY: KernelOffsets is repr(C), all u32 fields, no padding (size
    // checked above): it has exactly the layout of [u32; WORDS].
    unsafe { core::mem::transmute_copy(o) }
}

fn from_words(w: [u32; WORDS]) -> KernelOffsets {
    // SAFETY: as in `to_words`; every bit pattern is a valid u32.
    unsafe { core::mem::transmute_copy(&w) }
}

pub fn encode(key: u64, o: &KernelOffsets) -> Vec<u8> {
    let mut v = Vec::with_capacity(8 + 8 + 4 * WORDS + 8);
    v.extend_from_slice(MAGIC);
    v.extend_from_slice(&key.to_le_bytes());
    for w in to_words(o) {
        v.extend_from_slice(&w.to_le_bytes());
    }
    let sum = checksum(&v);
    v.extend_from_slice(&sum.to_le_bytes());
    v
}

/// The offsets in `bytes` if they are whole, intact and for `key`.
pub fn decode(key: u64, bytes: &[u8]) -> Option<KernelOffsets> {
    if bytes.len() != 8 + 8 + 4 * WORDS + 8 || &bytes[..8] != MAGIC {
        return None;
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    if checksum(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    if u64::from_le_bytes(body[8..16].try_into().ok()?) != key {
        return None;
    }
    let mut w = [0u32; WORDS];
    for (i, c) in body[16..].chunks_exact(4).enumerate() {
        w[i] = u32::from_le_bytes(c.try_into().ok()?);
    }
    Some(from_words(w))
}

/// Cached offsets for `key`, if a trustworthy cache holds them.
pub fn load(dir: &Path, key: u64) -> Option<KernelOffsets> {
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
pub fn store(dir: &Path, key: u64, o: &KernelOffsets) {
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

    #[test]
    fn round_trip_and_rejects() {
        let o = sample();
        let bytes = encode(7, &o);
        let back = decode(7, &bytes).expect("round trip");
        assert_eq!(to_words(&back), to_words(&o));
        assert!(decode(8, &bytes).is_none(), "another kernel's cache");
        let mut bad = bytes.clone();
        bad[20] ^= 1;
        assert!(decode(7, &bad).is_none(), "a flipped bit");
        assert!(decode(7, &bytes[..bytes.len() - 1]).is_none(), "truncated");
        assert!(decode(7, b"").is_none());
    }

    #[test]
    fn key_follows_the_btf() {
        let k = |b: &[u8]| key(b).unwrap();
        assert_eq!(k(b"abc"), k(b"abc"));
        assert_ne!(k(b"abc"), k(b"abd"));
        assert_ne!(k(b"abc"), k(b"abcd"));
    }

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
        assert!(load(&dir, 7).is_none(), "no cache yet");
        store(&dir, 7, &o);
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700, "created owner-only");
        assert!(load(&dir, 7).is_some(), "warm");
        assert!(load(&dir, 8).is_none(), "another kernel");

        std::fs::write(&file, b"garbage").unwrap();
        assert!(load(&dir, 7).is_none(), "corrupt: ignored");
        store(&dir, 7, &o);
        assert!(load(&dir, 7).is_some(), "corrupt: rewritten");

        std::os::unix::fs::chown(&file, Some(65534), Some(65534)).unwrap();
        assert!(load(&dir, 7).is_none(), "not root's: ignored");

        std::fs::remove_file(&file).unwrap();
        let real = tmp.path().join("elsewhere");
        std::fs::write(&real, encode(7, &o)).unwrap();
        std::os::unix::fs::symlink(&real, &file).unwrap();
        assert!(load(&dir, 7).is_none(), "a symlink: not followed");
        store(&dir, 7, &o);
        assert!(
            std::fs::symlink_metadata(&file).unwrap().is_file(),
            "the link replaced, not written through"
        );
        assert!(load(&dir, 7).is_some());
    }
}
