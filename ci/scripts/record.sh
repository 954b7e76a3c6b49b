#!/bin/sh
# tracer-record [tracer record options] -- COMMAND...
#
# `tracer record` for a CI step, whoever runs it (install.sh installs this
# script as `tracer-record` beside the tracer). As root it is exactly
# `tracer record`. Otherwise the tracer runs through `sudo -n -E` (it loads
# eBPF programs) and, being under sudo, runs the command as the calling user
# itself (SUDO_UID; see `tracer record --user`), so the tests run as they
# would without the tracer: same user, groups, environment and PATH. The exit
# status is tracer's: the command's own, 86 for --fail-on, 70 when tracer
# itself fails. The report directory is created first, as the caller, so it
# stays the caller's to clean up; the report step (collect_reports) hands the
# files in it back.
#
# The tracer it hands to sudo is refused unless only root or the caller can
# change it and the directories it is in (another user's `tracer` in a
# shared /tmp would run as root).
#
# Self-contained (no lib.sh): it is copied on its own into the bin directory.
# The ownership checks are lib.sh's ci_owned_safely / ci_trusted_file, kept
# in step by hand.
set -eu

die() {
    printf 'tracer-record: error: %s\n' "$*" >&2
    exit 70
}

# True when only root or we can change $1 (a world-writable sticky
# directory such as /tmp passes with `sticky`): see lib.sh.
owned_safely() {
    # shellcheck disable=SC2012 # ls -n is the portable way to read an owner
    om=$(ls -ldn -- "$1" 2>/dev/null | awk '{ print $3, $1 }')
    case ${om%% *} in 0 | "$(id -u)") ;; *) return 1 ;; esac
    case ${om#* } in
    ?????w* | ????????w*)
        [ "${2:-}" = sticky ] || return 1
        case ${om#* } in *t | *T) ;; *) return 1 ;; esac
        ;;
    esac
    [ -n "$om" ]
}

# The tracer as an absolute physical path, or exit 70 if someone else could
# swap it.
trusted_tracer() {
    t=$1
    if [ -L "$t" ]; then t=$(readlink -f -- "$t") || die "cannot resolve the symlink $1"; fi
    [ -f "$t" ] || die "$1 is not a regular file"
    d=$(cd -P -- "$(dirname -- "$t")" && pwd -P) || die "cannot enter the directory of $1"
    t=$d/$(basename -- "$t")
    { owned_safely "$t" && owned_safely "$d"; } ||
        die "$t (or its directory) can be changed by another user: it would run as root; install tracer with install.sh into a directory of your own"
    p=$d
    while [ "$p" != / ]; do
        p=$(dirname -- "$p")
        owned_safely "$p" sticky || die "$p, above $t, can be changed by another user: it would run as root"
    done
    printf '%s\n' "$t"
}

here=$(cd "$(dirname "$0")" && pwd)
tracer=${TRACER:-}
if [ -z "$tracer" ]; then
    if [ -x "$here/tracer" ]; then
        tracer=$here/tracer
    else
        tracer=$(command -v tracer) || die "no tracer beside this script or on PATH"
    fi
fi

tracer=$(trusted_tracer "$tracer")

if [ "$(id -u)" = 0 ]; then
    exec "$tracer" record "$@"
fi
command -v sudo >/dev/null 2>&1 || die "not root and no sudo: tracer loads eBPF programs and needs root"

# Find --output before the first `--` (the default is tracer's:
# tracer-report), to create the directory as the caller.
output='tracer-report'
seen=
want_output=
n=$#
while [ "$n" -gt 0 ]; do
    a=$1
    shift
    n=$((n - 1))
    set -- "$@" "$a"
    if [ -n "$seen" ]; then
        continue
    elif [ -n "$want_output" ]; then
        output=$a
        want_output=
    else
        case $a in
        --) seen=1 ;;
        --output | -o) want_output=1 ;;
        --output=*) output=${a#--output=} ;;
        esac
    fi
done
[ -n "$seen" ] || die "usage: tracer-record [tracer record options] -- COMMAND..."

mkdir -p "$output"
# sudo resets PATH to its secure_path even with -E: pass the caller's on, so
# the command resolves as it would have (HOME likewise, for its caches).
exec sudo -n -E env "PATH=$PATH" "HOME=${HOME:-/}" "$tracer" record "$@"
