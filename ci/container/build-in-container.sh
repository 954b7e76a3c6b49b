#!/bin/sh
# The build stage of ci/container/Containerfile, as a script so it can be run
# (and tested) without a container engine: from a checkout of this
# repository, build tracer with the pinned toolchain and put the binary in
# OUT-DIR; then check that the runtime stage, a bare debian:bookworm-slim,
# has every shared library it needs.
#
#   build-in-container.sh OUT-DIR
#
# TRACER_PROFILE=debug builds the dev profile instead (the tests use it: the
# steps are the same, the build is faster).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: build-in-container.sh OUT-DIR}

# The toolchain rust-toolchain.toml pins, with rust-src for the eBPF build
# (.ci/run does the same); `cargo xtask` installs bpf-linker itself.
toolchain=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' "$src/rust-toolchain.toml")
rustup toolchain install "$toolchain" --profile minimal --component rust-src

TRACER_BIN_DIR=$out "$src/ci/scripts/install.sh" --source "$src" >/dev/null
rm -f "$out/tracer-record" # the image runs the daemon: only the binary
"$out/tracer" --version

# The eBPF object is embedded in the binary: it is the only file the runtime
# stage copies. Every library it links must come from a package that
# debian:bookworm-slim has (libc6, libgcc-s1: both required).
libs=$(ldd "$out/tracer" | awk '$2 == "=>" { print $3 } $1 ~ /^\// { print $1 }')
for lib in $libs; do
    real=$(readlink -f "$lib")
    pkg=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$real" 2>/dev/null) || {
        echo "build-in-container: $lib belongs to no Debian package" >&2
        exit 1
    }
    pkg=${pkg%%:*}
    case $pkg in
    libc6 | libgcc-s1) echo "build-in-container: $lib from $pkg (in the runtime image)" ;;
    *)
        echo "build-in-container: $lib is from $pkg, which debian:bookworm-slim lacks" >&2
        exit 1
        ;;
    esac
done
