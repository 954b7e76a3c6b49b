#!/bin/sh
# Put a tracer binary (and its `tracer-record` wrapper) into a bin directory
# for a CI job. By default: the release pinned in ci/release.env, for this
# machine's architecture, downloaded and checked against the SHA-256 pinned
# there before anything unpacks or runs it (seconds, no toolchain). Else a
# release of another version (--version, with its --sha256), a tarball
# anywhere (--url, --sha256), a prebuilt binary (--binary), or, as the
# fallback, one built from a checkout of this repository with `cargo xtask
# build --release` (--build: the checkout these scripts are in; or --source
# DIR; minutes, needs rustup). Idempotent: cargo rebuilds nothing that is
# built, and files already in place are not copied again.
#
#   install.sh [--version V [--sha256 HEX] | --url URL --sha256 HEX |
#               --binary PATH | --build | --source DIR [--profile release|debug]]
#              [--bin-dir DIR]
#
# A release is tracer-VERSION-ARCH-linux-musl.tar.gz (`cargo xtask dist`;
# ARCH x86_64 or aarch64) under the releases URL (ci/release.env,
# TRACER_RELEASE_URL; TRACER_RELEASES overrides it), in vVERSION/; URL may
# also name a bare `tracer` binary. HEX is the SHA-256 of that file, from
# the release's SHA256SUMS: pin it beside the version or URL (a checksum
# fetched from the same place proves nothing). A mismatch installs nothing.
#
# Defaults come from TRACER_VERSION, TRACER_SHA256 (or, for a --version,
# TRACER_SHA256_X86_64 / TRACER_SHA256_AARCH64 for each architecture),
# TRACER_URL, TRACER_BINARY, TRACER_BUILD=true, TRACER_PROFILE and
# TRACER_BIN_DIR (else $RUNNER_TEMP/tracer-bin, else a fresh `mktemp -d`:
# never a fixed name in a shared /tmp, which another user could have made
# first and filled with a `tracer` of their own). A bin directory is refused
# unless only root or the caller can change it and the directories above
# it; so is the download's directory, a fresh `mktemp -d` under $TMPDIR
# (else /tmp): run as root, use a TMPDIR only you and root can change. What
# is verified and unpacked is one regular file, held open. Prints the
# installed tracer's path. On GitHub Actions the bin directory is added to
# GITHUB_PATH and the path is written to GITHUB_OUTPUT as `tracer`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

version=${TRACER_VERSION:-}
url=${TRACER_URL:-}
sha256=${TRACER_SHA256:-}
binary=${TRACER_BINARY:-}
build=${TRACER_BUILD:-}
source=
profile=${TRACER_PROFILE:-release}
bin_dir=${TRACER_BIN_DIR:-${RUNNER_TEMP:+$RUNNER_TEMP/tracer-bin}}
releases=${TRACER_RELEASES:-}
while [ $# -gt 0 ]; do
    case $1 in
    --version) version=$2; shift 2 ;;
    --url) url=$2; shift 2 ;;
    --sha256) sha256=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --build) build=true; shift ;;
    --source) source=$2; build=true; shift 2 ;;
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
case $build in
'' | false | 0) build= ;;
*) build=true ;;
esac

# The release's tarball for this machine, and its pinned checksum: the
# version and checksums of ci/release.env unless a version was given (then
# its checksum must be too).
release_url() {
    arch=$(ci_arch)
    [ -n "$arch" ] || ci_die "no tracer release for $(uname -m) (x86_64 and aarch64 only): use --binary, or --build on a supported machine"
    pinned=$here/../release.env
    [ -f "$pinned" ] || ci_die "$pinned is missing: pass --url and --sha256, --binary or --build"
    TRACER_RELEASE_VERSION='' TRACER_RELEASE_URL='' TRACER_RELEASE_SHA256_X86_64='' TRACER_RELEASE_SHA256_AARCH64=''
    # shellcheck source=../release.env
    . "$pinned"
    if [ -z "$sha256" ]; then
        if [ "$arch" = x86_64 ]; then sha256=${TRACER_SHA256_X86_64:-}; else sha256=${TRACER_SHA256_AARCH64:-}; fi
    fi
    if [ -z "$version" ] || [ "$version" = "$TRACER_RELEASE_VERSION" ]; then
        version=$TRACER_RELEASE_VERSION
        if [ -z "$sha256" ]; then
            if [ "$arch" = x86_64 ]; then sha256=$TRACER_RELEASE_SHA256_X86_64; else sha256=$TRACER_RELEASE_SHA256_AARCH64; fi
        fi
    fi
    case $sha256 in
    unpublished) ci_die "tracer $version is not published yet (ci/release.env pins no checksum for it): pass --url and --sha256, --binary, or --build (docs/building.md)" ;;
    '') ci_die "no checksum for tracer $version on $arch: pass --sha256 (from the release's SHA256SUMS), or use a version ci/release.env pins" ;;
    esac
    base=${releases:-$TRACER_RELEASE_URL}
    case $base in
    */OWNER/*) ci_die "ci/release.env names no repository yet ($base): set TRACER_RELEASES (the action's releases-url) to where the releases are, or fill it in" ;;
    http://* | https://*) ;;
    *) ci_die "the releases URL must be http(s)://..., not '$base'" ;;
    esac
    url=${base%/}/v$version/tracer-$version-$arch-linux-musl.tar.gz
}

# Download into a directory only we can write, verify, then unpack: nothing
# from the URL is run or unpacked before its checksum matched.
fetch_release() {
    [ -n "$sha256" ] || ci_die "--url needs --sha256 (the release's checksum, pinned beside the URL)"
    printf '%s' "$sha256" | grep -Eq '^[0-9a-f]{64}$' || ci_die "--sha256 must be 64 lowercase hex digits, not $sha256"
    command -v sha256sum >/dev/null 2>&1 || ci_die "sha256sum not found (coreutils): cannot verify the download"
    [ -d /dev/fd ] || ci_die "/dev/fd is missing (no /proc?): cannot verify and unpack the download as one file"
    # The bin directory's checks, before and after mktemp: ours alone, 0700,
    # and no directory above it that another user can change. A TMPDIR
    # another user owns (or can write without the sticky bit) lets them
    # rename this directory away and put theirs in its place, with a FIFO
    # under the download's name that hands sha256sum the genuine bytes and
    # tar their own.
    base=$(ci_tmp_base)
    dl=$(mktemp -d "$base/tracer-dl.XXXXXX") || ci_die "mktemp -d failed"
    dl=$(ci_private_dir "$dl")
    case $(ci_owner_mode "$dl") in
    "$(id -u) drwx------"*) ;;
    *) ci_die "$dl is not 0700 ($(ci_owner_mode "$dl")): not downloading into it" ;;
    esac
    file=$dl/download
    ci_log "downloading $url"
    if command -v curl >/dev/null 2>&1; then
        curl -fsSL --proto '=https,http' -o "$file" "$url" || ci_die "download of $url failed"
    elif command -v wget >/dev/null 2>&1; then
        wget -q -O "$file" "$url" || ci_die "download of $url failed"
    else
        ci_die "neither curl nor wget is installed: cannot download $url"
    fi
    # One open file is verified and unpacked: /dev/fd/3 reopens the file
    # fd 3 holds, not whatever the name points to by then, and a FIFO, a
    # link or a device in its place is refused before anything reads it.
    if [ -L "$file" ] || [ ! -f "$file" ]; then
        ci_die "the download $file is not a regular file: nothing was installed"
    fi
    exec 3<"$file"
    [ -f /dev/fd/3 ] || ci_die "the download $file is not a regular file: nothing was installed"
    got=$(sha256sum /dev/fd/3 | awk '{ print $1 }')
    [ "$got" = "$sha256" ] || ci_die "checksum mismatch for $url: got $got, expected $sha256; nothing was installed"
    case $url in
    *.tar.gz | *.tgz)
        mkdir "$dl/x"
        tar -xzf /dev/fd/3 -C "$dl/x" --no-same-owner || ci_die "cannot unpack $url"
        binary=$(find "$dl/x" -type f -name tracer | head -n 1)
        [ -n "$binary" ] || ci_die "$url holds no tracer binary"
        ;;
    *)
        binary=$dl/tracer
        cat /dev/fd/3 >"$binary" || ci_die "cannot copy the download of $url"
        ;;
    esac
    exec 3<&-
}

# What to install: a binary given, else a URL given, else a build asked
# for, else a release (the pinned one by default).
if [ -z "$binary" ] && [ -z "$url" ] && [ -z "$build" ]; then
    release_url
fi
if [ -z "$binary" ] && [ -n "$url" ]; then
    fetch_release
fi
if [ -z "$binary" ]; then
    [ -n "$source" ] || source=$here/../..
    source=$(cd "$source" && pwd)
    [ -f "$source/xtask/Cargo.toml" ] || ci_die "$source is not a checkout of tracer (no xtask/)"
    # A tracer already in the bin directory (a CI cache of it) built from
    # this very commit of a clean checkout is that build: not built again.
    # The bin directory is checked first: a tracer is run from it only if
    # no one but root or the caller could have put it there.
    commit=$(git -C "$source" rev-parse --short=12 HEAD 2>/dev/null) || commit=
    if [ -n "$bin_dir" ]; then bin_dir=$(ci_private_dir "$bin_dir"); fi
    if [ -n "$commit" ] && [ -z "$(git -C "$source" status --porcelain 2>/dev/null)" ] &&
        [ -n "$bin_dir" ] && [ -x "$bin_dir/tracer" ] &&
        "$bin_dir/tracer" --version 2>/dev/null | grep -qF "(commit $commit,"; then
        ci_log "$bin_dir/tracer is already built from commit $commit (cached): not building it again"
        binary=$bin_dir/tracer
    else
        command -v cargo >/dev/null 2>&1 || ci_die "cargo not found: building tracer needs rustup (it installs the pinned toolchain)"
        ci_log "building tracer from $source (cargo xtask build $build_flags; the first build takes minutes)"
        # shellcheck disable=SC2086 # empty for the debug profile
        (cd "$source" && cargo xtask build $build_flags) >&2
        # Where xtask puts it: CARGO_TARGET_DIR is taken relative to the checkout.
        target=${CARGO_TARGET_DIR:-target}
        case $target in /*) ;; *) target=$source/$target ;; esac
        binary=$target/$profile/tracer
    fi
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
version=$("$bin_dir/tracer" --version) || ci_die "$binary does not run (built for another architecture than $(uname -m)?)"
# `tracer --version` names its target (aarch64-unknown-linux-musl, ...): one
# for the other architecture runs at all only through an emulator
# (binfmt_misc), and cannot load its eBPF programs there.
mine=$(ci_arch)
case $version in
*"($mine-"*) ;;
*"(x86_64-"* | *"(aarch64-"*)
    if [ -n "$mine" ]; then
        rm -f "$bin_dir/tracer" "$bin_dir/tracer-record"
        ci_die "$binary is not built for $mine: $version; nothing was installed"
    fi
    ;;
esac
ci_log "installed $version at $bin_dir/tracer (and tracer-record)"

if [ -n "${GITHUB_PATH:-}" ]; then
    printf '%s\n' "$bin_dir" >>"$GITHUB_PATH"
fi
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'tracer=%s\n' "$bin_dir/tracer" >>"$GITHUB_OUTPUT"
fi
[ -z "${dl:-}" ] || rm -rf "$dl"
printf '%s\n' "$bin_dir/tracer"
