#!/bin/sh
# Put a tracer binary (and its `tracer-record` wrapper) into a bin directory
# for a CI job: a prebuilt one (--binary), or one built from a checkout of this
# repository with `cargo xtask build --release` (the default: the checkout
# these scripts are in). Idempotent: cargo rebuilds nothing that is built, and
# files already in place are not copied again.
#
#   install.sh [--binary PATH | --source DIR] [--profile release|debug] [--bin-dir DIR]
#
# Defaults come from TRACER_BINARY, TRACER_SOURCE, TRACER_PROFILE and
# TRACER_BIN_DIR (else $RUNNER_TEMP/tracer-bin, else a fresh `mktemp -d`:
# never a fixed name in a shared /tmp, which another user could have made
# first and filled with a `tracer` of their own). A bin directory is refused
# unless only root or the caller can change it and the directories above it.
# Prints the installed tracer's path. On GitHub Actions the bin directory is added to
# GITHUB_PATH and the path is written to GITHUB_OUTPUT as `tracer`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

binary=${TRACER_BINARY:-}
source=${TRACER_SOURCE:-}
profile=${TRACER_PROFILE:-release}
bin_dir=${TRACER_BIN_DIR:-${RUNNER_TEMP:+$RUNNER_TEMP/tracer-bin}}
while [ $# -gt 0 ]; do
    case $1 in
    --binary) binary=$2; shift 2 ;;
    --source) source=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --bin-dir) bin_dir=$2; shift 2 ;;
    *) ci_die "install.sh: unknown argument $1" ;;
    esac
done
case $profile in
release) build_flags=--release ;;
debug) build_flags= ;;
*) ci_die "--profile must be release or debug, not $profile" ;;
esac

if [ -z "$binary" ]; then
    [ -n "$source" ] || source=$here/../..
    source=$(cd "$source" && pwd)
    [ -f "$source/xtask/Cargo.toml" ] || ci_die "$source is not a checkout of tracer (no xtask/)"
    command -v cargo >/dev/null 2>&1 || ci_die "cargo not found: building tracer needs rustup (it installs the pinned toolchain)"
    ci_log "building tracer from $source (cargo xtask build $build_flags; the first build takes minutes)"
    # shellcheck disable=SC2086 # empty for the debug profile
    (cd "$source" && cargo xtask build $build_flags) >&2
    # Where xtask puts it: CARGO_TARGET_DIR is taken relative to the checkout.
    target=${CARGO_TARGET_DIR:-target}
    case $target in /*) ;; *) target=$source/$target ;; esac
    binary=$target/$profile/tracer
fi
# A downloaded artifact has lost its execute bit: the installed copy gets it.
[ -f "$binary" ] || ci_die "no tracer binary at $binary"

if [ -z "$bin_dir" ]; then
    bin_dir=$(mktemp -d "${TMPDIR:-/tmp}/tracer-bin.XXXXXX") || ci_die "mktemp -d failed"
fi
bin_dir=$(ci_private_dir "$bin_dir")
place() {
    if ! cmp -s "$1" "$2"; then
        cp "$1" "$2.tmp.$$"
        chmod 0755 "$2.tmp.$$"
        mv -f "$2.tmp.$$" "$2"
    fi
}
place "$binary" "$bin_dir/tracer"
place "$here/record.sh" "$bin_dir/tracer-record"
version=$("$bin_dir/tracer" --version) || ci_die "$binary does not run"
ci_log "installed $version at $bin_dir/tracer (and tracer-record)"

if [ -n "${GITHUB_PATH:-}" ]; then
    printf '%s\n' "$bin_dir" >>"$GITHUB_PATH"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'tracer=%s\n' "$bin_dir/tracer" >>"$GITHUB_OUTPUT"
fi
printf '%s\n' "$bin_dir/tracer"
