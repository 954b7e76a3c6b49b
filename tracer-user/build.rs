//! Embed the eBPF object built by `cargo xtask build-ebpf`.
//!
//! Without it the crate still builds (unit tests need no eBPF toolchain), but
//! the binary then refuses to record with a message saying how to build it.
use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let default = manifest.join("../target/bpfel-unknown-none/release/tracer-ebpf");
    let src = env::var_os("TRACER_EBPF_OBJECT")
        .map(PathBuf::from)
        .unwrap_or(default);
    let out = PathBuf::from(env::var("OUT_DIR").unwrap()).join("tracer-ebpf.o");
    println!("cargo:rerun-if-env-changed=TRACER_EBPF_OBJECT");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo::rustc-check-cfg=cfg(tracer_no_ebpf)");
    match fs::read(&src) {
        Ok(bytes) => fs::write(&out, bytes).unwrap(),
        Err(_) => {
            fs::write(&out, b"").unwrap();
            println!("cargo:rustc-cfg=tracer_no_ebpf");
            println!(
                "cargo:warning=eBPF object {} not found: `tracer record` will not work; build with `cargo xtask build`",
                src.display()
            );
        }
    }
}
