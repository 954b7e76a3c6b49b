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
# Self-contained (no lib.sh): it is copied on its own into the bin directory.
set -eu

die() {
    printf 'tracer-record: error: %s\n' "$*" >&2
    exit 70
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
