//! Embed the eBPF object built by `cargo xtask build-ebpf`, and what
//! `tracer --version` says of this build: the target, the commit and the
//! object's SHA-256.
//!
//! Without the object the crate still builds (unit tests need no eBPF
//! toolchain), but the binary then refuses to record with a message saying
//! how to build it.
use std::{env, fs, path::PathBuf, process::Command};

use sha2::{Digest, Sha256};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let default = manifest.join("../target/bpfel-unknown-none/release/tracer-ebpf");
    let src = env::var_os("TRACER_EBPF_OBJECT")
        .map(PathBuf::from)
        .unwrap_or(default);
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("tracer-ebpf.o");
    println!("cargo:rerun-if-env-changed=TRACER_EBPF_OBJECT");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-env-changed=TRACER_GIT_COMMIT");
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/refs/heads");
    println!("cargo:rustc-env=TRACER_GIT_COMMIT={}", commit());
    // `tracer --version` names what it was built for: an x86_64 and an
    // aarch64 release are otherwise the same text.
    println!(
        "cargo:rustc-env=TRACER_TARGET={}",
        env::var("TARGET").unwrap()
    );
    match fs::read(&src) {
        Ok(bytes) => {
            let bytes = without_dwarf(&bytes);
            let hash: String = Sha256::digest(&bytes)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            println!("cargo:rustc-env=TRACER_EBPF_SHA256={hash}");
            fs::write(&out, bytes).unwrap()
        }
        Err(_) => {
            println!("cargo:rustc-env=TRACER_EBPF_SHA256=none");
            fs::write(&out, b"").unwrap();
            println!(
                "cargo:warning=eBPF object {} not found: `tracer record` will not work; build with `cargo xtask build`",
                src.display()
            );
        }
    }
}

/// The object without its DWARF sections (`.debug_*` and their
/// relocations): linked with BTF, bpf-linker keeps the debug info the BTF
/// was made from, 2.7 MB of the 3.3 MB object. The loader reads the BTF
/// only; embedded whole, the DWARF cost 1.3 MB of tracer's peak RSS
/// (32.3 MB against 31.0, `record -- true`, measured). An object that does
/// not parse is embedded as it is: the loader's error names it.
fn without_dwarf(bytes: &[u8]) -> Vec<u8> {
    let Ok(mut elf) = object::build::elf::Builder::read(bytes) else {
        return bytes.to_vec();
    };
    for s in elf.sections.iter_mut() {
        let name: &[u8] = &s.name;
        if name.starts_with(b".debug_") || name.starts_with(b".rel.debug_") {
            s.delete = true;
        }
    }
    // LLVM's object names its sections from the symbols' `.strtab`; the
    // writer wants a table of their own.
    if !elf
        .sections
        .iter()
        .any(|s| matches!(s.data, object::build::elf::SectionData::SectionString))
    {
        let shstrtab = elf.sections.add();
        shstrtab.name = b".shstrtab"[..].into();
        shstrtab.sh_type = object::elf::SHT_STRTAB;
        shstrtab.data = object::build::elf::SectionData::SectionString;
    }
    let mut out = Vec::new();
    match elf.write(&mut out) {
        Ok(()) => out,
        Err(e) => panic!("writing the eBPF object without DWARF: {e}"),
    }
}

/// The commit this is built from (`TRACER_GIT_COMMIT` overrides: a source
/// tarball has no .git), "unknown" without either.
fn commit() -> String {
    if let Ok(c) = env::var("TRACER_GIT_COMMIT") {
        return c;
    }
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}
