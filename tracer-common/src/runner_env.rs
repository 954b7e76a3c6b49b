//! The test runners' variables of a new image's environment: the only part
//! of an environment that ever leaves the kernel. The exec program finds
//! them by exact name in the envp the kernel just laid out on the new
//! stack and sends each as one [`ExecEnvRecord`] before the exec's own
//! record (docs/security.md, "Environment at exec").
use crate::{RecordHeader, TaskId};

/// Every name sent, and nothing else.
pub const RUNNER_VARS: [&str; 8] = [
    // pytest: "<nodeid> (setup|call|teardown)", set in os.environ for the
    // test's duration, so in the initial environment of what it spawns.
    "PYTEST_CURRENT_TEST",
    // pytest-xdist: gw0, gw1, …
    "PYTEST_XDIST_WORKER",
    // vitest: set inside a worker once it starts (its children see them).
    "VITEST_POOL_ID",
    "VITEST_WORKER_ID",
    // jest: in each worker's own environment, from its fork.
    "JEST_WORKER_ID",
    // cargo-nextest: one process per test.
    "NEXTEST_TEST_NAME",
    "NEXTEST_BINARY_ID",
    "NEXTEST_ATTEMPT",
];

/// Longest value kept: a pytest node id with its parameters fits; a value
/// longer is cut (a name only labels, and the log stays bounded).
pub const RUNNER_VALUE_MAX: usize = 1024;

/// The bytes of a `NAME=value` string the kernel reads: the longest name,
/// `=`, the longest value and its NUL, rounded up to 8.
pub const RUNNER_VAR_LEN: usize = 1048;

/// Bytes of a variable's start compared in the kernel: `NAME=` of the
/// longest name (20) fits.
pub const RUNNER_HEAD: usize = 24;

/// An environment's variables the exec program looks at, at most: a CI
/// job's is 30 to 200 (GitHub Actions: ~120). Past it the exec record says
/// the scan was cut ([`EXEC_ENV_SCANNED`] unset) and user space reads
/// `/proc/PID/environ` instead.
pub const RUNNER_SCAN_VARS: usize = 512;

/// `ExecRecord.flags`: the exec program read the whole envp; the
/// [`ExecEnvRecord`]s before the record are every runner variable there
/// is (none: the environment has none).
pub const EXEC_ENV_SCANNED: u32 = 1;

/// `NAME=` of each of [`RUNNER_VARS`] as three little-endian words of a
/// string's first [`RUNNER_HEAD`] bytes, and the mask of the bytes that
/// must be equal: what the exec program compares (x86-64 and arm64 are
/// both little-endian).
const RUNNER_PATTERNS: [([u64; 3], [u64; 3]); 8] = {
    let mut out = [([0u64; 3], [0u64; 3]); 8];
    let mut i = 0;
    while i < RUNNER_VARS.len() {
        let name = RUNNER_VARS[i].as_bytes();
        assert!(name.len() < RUNNER_HEAD);
        let mut b = 0;
        while b <= name.len() {
            let byte = if b == name.len() { b'=' } else { name[b] };
            out[i].0[b / 8] |= (byte as u64) << (8 * (b % 8));
            out[i].1[b / 8] |= 0xff << (8 * (b % 8));
            b += 1;
        }
        i += 1;
    }
    out
};

/// The hash of a string's first word into [`RUNNER_FIRST`]'s 8 slots
/// (`(w * K) >> 61`, K found at build time so the 6 first words of the
/// names land in 6 slots): one table load and one comparison, not six
/// branches the verifier must walk for each variable of an environment.
const RUNNER_FIRST_K: u64 = perfect_k(&first_words(), 61);

/// The first word of the names in their slot; 0 in the others (an empty
/// string might pass: [`runner_head`] turns it down).
const RUNNER_FIRST: [u64; 8] = {
    let words = first_words();
    let mut out = [0u64; 8];
    let mut i = 0;
    while i < words.len() {
        out[slot(words[i], RUNNER_FIRST_K, 61)] = words[i];
        i += 1;
    }
    out
};

/// The hash of a head's name bytes (bytes 0 to 14: every `NAME=` is at
/// least 15 long) into [`RUNNER_SLOTS`]'s 16 slots, K found at build time
/// so the 8 names land in 8 slots.
const RUNNER_HEAD_K: u64 = perfect_k(&name_keys(), 60);

/// Each name's pattern and mask in its slot; an empty slot's asks for a
/// non-NUL 24th byte, which no head has (the string read stops at 23).
const RUNNER_SLOTS: [([u64; 3], [u64; 3]); 16] = {
    let keys = name_keys();
    let never = ([0, 0, 0xff << 56], [0, 0, 0xff << 56]);
    let mut out = [never; 16];
    let mut i = 0;
    while i < keys.len() {
        out[slot(keys[i], RUNNER_HEAD_K, 60)] = RUNNER_PATTERNS[i];
        i += 1;
    }
    out
};

/// The key [`RUNNER_HEAD_K`] hashes: bytes 0 to 14 of a head.
#[inline(always)]
const fn head_key(head: &[u64; 3]) -> u64 {
    head[0] ^ (head[1] & 0x00ff_ffff_ffff_ffff).rotate_left(29)
}

#[inline(always)]
const fn slot(key: u64, k: u64, shift: u32) -> usize {
    (key.wrapping_mul(k) >> shift) as usize
}

/// Whether a string whose first word is `first` may be a runner variable.
#[inline(always)]
pub fn runner_first(first: u64) -> bool {
    RUNNER_FIRST[slot(first, RUNNER_FIRST_K, 61)] == first
}

/// Whether a string starting with `head` (its first [`RUNNER_HEAD`]
/// bytes, zero past its NUL) is one of [`RUNNER_VARS`]: the name and its
/// `=` exactly. Branch-free but for the one comparison.
#[inline(always)]
pub fn runner_head(head: &[u64; 3]) -> bool {
    let (p, m) = RUNNER_SLOTS[slot(head_key(head), RUNNER_HEAD_K, 60)];
    ((head[0] ^ p[0]) & m[0]) | ((head[1] ^ p[1]) & m[1]) | ((head[2] ^ p[2]) & m[2]) == 0
}

const fn first_words() -> [u64; 6] {
    let mut out = [0u64; 6];
    let (mut i, mut n) = (0, 0);
    while i < RUNNER_PATTERNS.len() {
        let w = RUNNER_PATTERNS[i].0[0];
        let mut seen = false;
        let mut j = 0;
        while j < n {
            seen |= out[j] == w;
            j += 1;
        }
        if !seen {
            out[n] = w;
            n += 1;
        }
        i += 1;
    }
    assert!(n == out.len());
    out
}

const fn name_keys() -> [u64; 8] {
    let mut out = [0u64; 8];
    let mut i = 0;
    while i < RUNNER_PATTERNS.len() {
        out[i] = head_key(&RUNNER_PATTERNS[i].0);
        i += 1;
    }
    out
}

/// The first odd multiplier (of a fixed sequence) that sends every key to
/// its own slot.
const fn perfect_k<const N: usize>(keys: &[u64; N], shift: u32) -> u64 {
    let mut k: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut tries = 0;
    while tries < 100_000 {
        let mut used = 0u64;
        let mut ok = true;
        let mut i = 0;
        while i < N {
            let bit = 1u64 << slot(keys[i], k, shift);
            ok &= used & bit == 0;
            used |= bit;
            i += 1;
        }
        if ok {
            return k;
        }
        k = k
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407)
            | 1;
        tries += 1;
    }
    panic!("no perfect multiplier")
}

/// One runner variable of an exec, sent just before the exec's record with
/// its `ktime_ns` and task: `NAME=value` as the environment held it, cut
/// to `len` bytes (no NUL).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ExecEnvRecord {
    pub hdr: RecordHeader,
    pub task: TaskId,
    pub len: u32,
    pub _pad: u32,
    pub text: [u8; RUNNER_VAR_LEN],
}

/// An exec-env record arrives cut to `EXEC_ENV_HEADER_LEN + len` bytes.
pub const EXEC_ENV_HEADER_LEN: usize = core::mem::offset_of!(ExecEnvRecord, text);

#[cfg(test)]
mod tests {
    extern crate std;
    use std::format;

    use super::*;

    fn head(s: &str) -> [u64; 3] {
        let mut b = [0u8; RUNNER_HEAD];
        let n = s.len().min(RUNNER_HEAD - 1);
        b[..n].copy_from_slice(&s.as_bytes()[..n]);
        let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        [w(0), w(1), w(2)]
    }

    /// Each allowed name with its `=` is itself; a prefix, a suffix or a
    /// name without `=` is no runner's variable.
    #[test]
    fn the_tables_match_the_names_exactly() {
        for name in RUNNER_VARS {
            assert!(runner_first(head(name)[0]), "{name}");
            assert!(runner_head(&head(&format!("{name}=x"))), "{name}");
            assert!(runner_head(&head(&format!("{name}="))), "{name}");
            assert!(runner_head(&head(&format!(
                "{name}=tests/a.py::t[{}]",
                "x".repeat(50)
            ))));
            assert!(!runner_head(&head(name)), "{name} without =");
            assert!(!runner_head(&head(&format!("{name}X=1"))), "{name}X");
            assert!(!runner_head(&head(&format!("X{name}=1"))), "X{name}");
            assert!(!runner_head(&head(&name[..name.len() - 1])), "{name} cut");
            assert!(!runner_head(&head(&format!(
                "{}=1",
                &name[..name.len() - 1]
            ))));
        }
        for other in [
            "GITHUB_TOKEN=ghp_x",
            "PYTEST_ADDOPTS=-x",
            "NEXTEST_SECRET=1",
            "x",
            "=",
        ] {
            assert!(!runner_head(&head(other)), "{other}");
        }
        assert!(!runner_first(head("GITHUB_TOKEN=x")[0]));
        for n in 0..RUNNER_HEAD - 1 {
            let h = head(&"\0".repeat(n));
            assert!(!runner_head(&h), "an empty slot matches no head");
        }
        assert!(!runner_head(&[0; 3]));
    }
}
