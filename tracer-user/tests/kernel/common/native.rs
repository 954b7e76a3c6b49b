//! Native test programs compiled by the test itself (cc, c++, rustc, go), as CI
//! builds them, into a directory the test owns.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// Compile `src` (C, C++, Rust or Go by `ext`) with `flags` into `dir/name`;
/// `strip` removes its symbols and debug info afterwards.
pub(crate) fn compile(dir: &Path, name: &str, ext: &str, src: &str, flags: &[&str]) -> PathBuf {
    let source = dir.join(format!("{name}.{ext}"));
    std::fs::write(&source, src).unwrap();
    let out = dir.join(name);
    let compiler = match ext {
        "go" => return go_build(dir, &source, &out),
        "c" => PathBuf::from("cc"),
        "cc" => PathBuf::from("c++"),
        "rs" => rustc(),
        other => panic!("no compiler for .{other}"),
    };
    let compiler = compiler.as_path();
    let mut c = Command::new(compiler);
    c.args(flags).arg("-o").arg(&out).arg(&source);
    let o = c
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", compiler.display()));
    assert!(
        o.status.success(),
        "{} {flags:?} failed:\n{}",
        compiler.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// `go build -o out src.go`, with Go's build cache under the target
/// directory (kept between runs; root's `HOME` may be unset under sudo).
fn go_build(dir: &Path, source: &Path, out: &Path) -> PathBuf {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("go-build-cache");
    let o = Command::new("go")
        .args(["build", "-o"])
        .arg(out)
        .arg(source)
        .current_dir(dir)
        .env("GOCACHE", &cache)
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .output()
        .unwrap_or_else(|e| panic!("go (Debian's golang-go, installed by cargo xtask test): {e}"));
    assert!(
        o.status.success(),
        "go build failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.to_path_buf()
}

/// The rustc beside the cargo running the tests (`CARGO`, which cargo sets
/// for them), not rustup's proxy on PATH: the proxy resolves the pinned
/// toolchain again and, in one full run, failed to ("the 'rustc' binary
/// ... is not applicable") while the same toolchain built everything.
fn rustc() -> PathBuf {
    std::env::var_os("CARGO")
        .map(|cargo| PathBuf::from(cargo).with_file_name("rustc"))
        .filter(|rustc| rustc.is_file())
        .unwrap_or_else(|| PathBuf::from("rustc"))
}

pub(crate) fn strip(bin: &Path) {
    let o = Command::new("strip")
        .arg("--strip-all")
        .arg(bin)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "strip: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Is `tool` on PATH?
pub(crate) fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}
