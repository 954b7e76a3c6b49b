# shellcheck shell=sh
# Sourced by the other ci/scripts: messages, root, the tracer binary, the
# report directory. POSIX sh: CI images do not all have bash.

ci_log() { printf 'tracer-ci: %s\n' "$*" >&2; }
ci_die() {
    ci_log "error: $*"
    exit 1
}

# Run a command as root: directly when we are root, else through `sudo -n`
# (never a password prompt: a CI step has no terminal to answer it).
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo -n "$@"
    else
        ci_die "not root and no sudo: tracer loads eBPF programs and needs root"
    fi
}

# The tracer binary as an absolute path (sudo's secure_path would not find a
# relative one): $TRACER, else `tracer` on PATH.
tracer_bin() {
    t=${TRACER:-tracer}
    case $t in
    */*) ;;
    *) t=$(command -v "$t") || ci_die "no tracer on PATH (run ci/scripts/install.sh, or set TRACER)" ;;
    esac
    [ -x "$t" ] || ci_die "tracer binary $t is not executable"
    case $t in
    /*) printf '%s\n' "$t" ;;
    *) printf '%s/%s\n' "$(cd "$(dirname "$t")" && pwd)" "$(basename "$t")" ;;
    esac
}

# Field N (1-based, as in proc(5): 4 = ppid, 22 = start time) of
# /proc/PID/stat; comm (field 2) may hold spaces, so count after its ')'.
proc_stat_field() {
    sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f"$(($2 - 2))"
}

# Hand a report directory the tracer wrote as root back to the caller, so
# later steps (artifact upload, re-rendering, the next checkout's clean-up)
# can use it; then make sure the reports exist: a log whose capture was cut
# short (no report.json) is rendered from what was written.
collect_reports() {
    dir=$1
    [ -d "$dir" ] || ci_die "no report directory $dir"
    if [ "$(id -u)" != 0 ] && find "$dir" ! -user "$(id -u)" | grep -q .; then
        as_root chown -R "$(id -u):$(id -g)" "$dir"
    fi
    if [ ! -f "$dir/report.json" ] && [ -f "$dir/events.ndjson" ]; then
        ci_log "$dir has an event log but no reports: rendering them from the log"
        "$(tracer_bin)" report "$dir" || ci_die "tracer report $dir failed"
    fi
    for f in report.json report.md report.html; do
        [ -f "$dir/$f" ] || ci_die "$dir/$f is missing"
    done
}

# `tracer report DIR --fail-on LIST`: the tracer's own judgement (exit 86
# when a condition is met; the reports are re-rendered byte for byte). Only
# its --fail-on lines are shown: the summary was printed once already.
check_fail_on() {
    dir=$1
    list=$2
    [ -n "$list" ] || return 0
    errs=$(mktemp)
    status=0
    "$(tracer_bin)" report "$dir" --fail-on "$list" 2>"$errs" || status=$?
    grep -e 'tracer: --fail-on' -e 'tracer: error' "$errs" >&2 || true
    rm -f "$errs"
    case $status in
    0) ci_log "--fail-on $list: none found" ;;
    86) ci_log "failing: a --fail-on condition was met ($list)" ;;
    *) ci_log "tracer report --fail-on failed (status $status)" ;;
    esac
    return "$status"
}
