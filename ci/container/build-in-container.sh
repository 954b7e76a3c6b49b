#!/bin/sh
# The build stage of ci/container/Containerfile, as a script so it can be run
# (and tested) without a container engine: from a checkout of this
# repository, build the static release tracer (`cargo xtask dist`) and put it
# in OUT-DIR with a static busybox (the sidecar's shell), then check that
# neither needs a shared library: the runtime stage is `scratch`.
#
#   build-in-container.sh OUT-DIR
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: build-in-container.sh OUT-DIR}
mkdir -p "$out"

# The toolchain rust-toolchain.toml pins, with rust-src for the eBPF build
# and musl's standard library for the static binary (.ci/run does the same);
# `cargo xtask` installs bpf-linker and musl-tools itself.
toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$src/rust-toolchain.toml")
rustup toolchain install "$toolchain" --profile minimal --component rust-src \
    --target x86_64-unknown-linux-musl
(cd "$src" && cargo xtask dist) >&2
target=${CARGO_TARGET_DIR:-target}
case $target in /*) ;; *) target=$src/$target ;; esac
cp "$target"/dist/tracer-*-x86_64-linux-musl/tracer "$out/tracer"
"$out/tracer" --version

if ! command -v busybox >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends busybox-static >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends busybox-static >&2; }
fi
cp "$(command -v busybox)" "$out/busybox"

# Static, both: ldd names no library for either.
for bin in tracer busybox; do
    if ldd "$out/$bin" 2>&1 | grep -q '=>'; then
        echo "build-in-container: $bin links shared libraries; the runtime image has none" >&2
        ldd "$out/$bin" >&2
        exit 1
    fi
    echo "build-in-container: $bin is static"
done
# The sidecar's loop, run by that shell with nothing on PATH but itself.
# shellcheck disable=SC2016 # $1 is the inner shell's
env -i "$out/busybox" sh -c 'sleep 0 && chmod 0755 "$1" && mv "$1/x" "$1/x" 2>/dev/null; true' sh "$out" ||
    { echo "build-in-container: busybox cannot run the sidecar's commands standalone" >&2; exit 1; }
