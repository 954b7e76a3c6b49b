# shellcheck shell=sh
# Sourced by the other ci/scripts: messages, root, the tracer binary, the
# report directory. POSIX sh: CI images do not all have bash.

ci_log() { printf 'tracer-ci: %s\n' "$*" >&2; }
ci_die() {
    ci_log "error: $*"
    exit 1
}

# The architecture in a release tarball's name (tracer-VERSION-ARCH-linux-
# musl.tar.gz) for this machine: x86_64 or aarch64 (`uname -m` says arm64 on
# some systems); nothing where tracer has no release.
ci_arch() {
    case $(uname -m) in
    x86_64 | amd64) echo x86_64 ;;
    aarch64 | arm64) echo aarch64 ;;
    esac
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
# relative one): $TRACER, else `tracer` on PATH. It runs as root, so it is
# refused unless only root or we can change it (ci_trusted_file).
tracer_bin() {
    t=${TRACER:-tracer}
    case $t in
    */*) ;;
    *) t=$(command -v "$t") || ci_die "no tracer on PATH (run ci/scripts/install.sh, or set TRACER)" ;;
    esac
    [ -x "$t" ] || ci_die "tracer binary $t is not executable"
    ci_trusted_file "$t"
}

# --- Paths another local user must not be able to swap. A CI machine's /tmp
# is shared: a directory made there first by someone else is accepted by
# `mkdir -p`, and whatever it holds (a `tracer` binary, a symlink named like
# a state file) is then run or written through as root.

# "UID MODE" of a path itself (a symlink is not followed): `ls -ldn` is
# POSIX, stat(1)'s options are not.
ci_owner_mode() {
    # shellcheck disable=SC2012 # ls -n is the portable way to read an owner
    ls -ldn -- "$1" 2>/dev/null | awk '{ print $3, $1 }'
}

# True when only root or we can change PATH: owned by one of us and not
# writable by group or others. With `sticky`, a world-writable sticky
# directory (/tmp) passes too: nobody else may rename or remove our entries
# in it.
ci_owned_safely() { # PATH [sticky]
    ci_om=$(ci_owner_mode "$1")
    case ${ci_om%% *} in 0 | "$(id -u)") ;; *) return 1 ;; esac
    case ${ci_om#* } in
    ?????w* | ????????w*)
        [ "${2:-}" = sticky ] || return 1
        case ${ci_om#* } in *t | *T) ;; *) return 1 ;; esac
        ;;
    esac
    [ -n "$ci_om" ]
}

# Every directory above the absolute physical path $1 is safe (see above).
ci_parents_safe() {
    ci_p=$1
    while [ "$ci_p" != / ]; do
        ci_p=$(dirname -- "$ci_p")
        ci_owned_safely "$ci_p" sticky ||
            ci_die "$ci_p (above $1) can be changed by another user ($(ci_owner_mode "$ci_p")): use a directory whose parents only you and root can write"
    done
}

# ci_private_dir DIR: prints DIR as an absolute physical path, made (0700)
# when missing, after refusing it unless it and every directory above it can
# be changed only by root or us. A default under /tmp should be
# `mktemp -d`; this is for directories that are named in advance.
ci_private_dir() {
    ci_d=$1
    if [ ! -e "$ci_d" ] && [ ! -L "$ci_d" ]; then
        mkdir -p -- "$(dirname -- "$ci_d")" || ci_die "cannot create the parent of $ci_d"
        (umask 077 && mkdir -- "$ci_d") || ci_die "cannot create $ci_d"
    fi
    if [ -L "$ci_d" ] || [ ! -d "$ci_d" ]; then
        ci_die "$ci_d is a symlink or not a directory: use a directory of your own (mktemp -d)"
    fi
    ci_real=$(cd -P -- "$ci_d" && pwd -P) || ci_die "cannot enter $ci_d"
    ci_owned_safely "$ci_real" ||
        ci_die "$ci_d is not yours alone ($(ci_owner_mode "$ci_real")): another user could swap what tracer runs or writes there; remove it or use a directory of your own (mktemp -d)"
    ci_parents_safe "$ci_real"
    printf '%s\n' "$ci_real"
}

# ci_tmp_base: $TMPDIR (else /tmp) as an absolute physical path, after
# refusing it unless only root or we can change it and every directory
# above it (sticky counts: in /tmp nobody else may rename our entries). In
# a TMPDIR another user owns, they can rename what we make there away and
# put their own in its place.
ci_tmp_base() {
    ci_t=${TMPDIR:-/tmp}
    ci_t=$(cd -P -- "$ci_t" && pwd -P) || ci_die "cannot enter TMPDIR $ci_t"
    ci_owned_safely "$ci_t" sticky ||
        ci_die "TMPDIR $ci_t can be changed by another user ($(ci_owner_mode "$ci_t")): they could swap what is downloaded there; set TMPDIR to a directory only you and root can change"
    ci_parents_safe "$ci_t"
    printf '%s\n' "$ci_t"
}

# ci_trusted_file FILE: prints FILE as an absolute physical path after
# refusing it unless it is a regular file that only root or we can change,
# in directories only root or we can change: it is about to run as root.
ci_trusted_file() {
    ci_f=$1
    if [ -L "$ci_f" ]; then
        ci_f=$(readlink -f -- "$ci_f") || ci_die "cannot resolve the symlink $1"
    fi
    [ -f "$ci_f" ] || ci_die "$1 is not a regular file"
    ci_dir=$(cd -P -- "$(dirname -- "$ci_f")" && pwd -P) || ci_die "cannot enter the directory of $1"
    ci_f=$ci_dir/$(basename -- "$ci_f")
    ci_owned_safely "$ci_f" ||
        ci_die "$ci_f can be changed by another user ($(ci_owner_mode "$ci_f")): it would run as root; install tracer with ci/scripts/install.sh into a directory of your own"
    ci_owned_safely "$ci_dir" ||
        ci_die "$ci_dir, holding $ci_f, can be changed by another user ($(ci_owner_mode "$ci_dir")): it would run as root; install tracer with ci/scripts/install.sh into a directory of your own"
    ci_parents_safe "$ci_dir"
    printf '%s\n' "$ci_f"
}

# ci_daemon_run_dir STATE: the directory daemon-start.sh's root shell made
# for the daemon's pid, start, daemon.log and rc, as STATE/run names it. The
# state directory is the caller's (the job's code could rewrite `run`), so
# the name is believed only for a directory mktemp named, that root owns and
# no one else can change.
ci_daemon_run_dir() {
    ci_r=$(cat "$1/run" 2>/dev/null) || ci_die "no daemon was started with state in $1 (no run file)"
    case $ci_r in
    /*/tracer-daemon-run.??????) ;;
    *) ci_die "$1/run names $ci_r, not a directory daemon-start.sh made" ;;
    esac
    if [ -L "$ci_r" ] || [ ! -d "$ci_r" ]; then
        ci_die "$ci_r (named in $1/run) is gone or not a directory"
    fi
    ci_r=$(cd -P -- "$ci_r" && pwd -P) || ci_die "cannot enter $ci_r"
    ci_om=$(ci_owner_mode "$ci_r")
    { [ "${ci_om%% *}" = 0 ] && ci_owned_safely "$ci_r"; } ||
        ci_die "$ci_r (named in $1/run) is not root's alone ($ci_om): not believing it"
    ci_parents_safe "$ci_r"
    printf '%s\n' "$ci_r"
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
# With a second argument `daemon`, nothing is handed back here: a daemon
# hands its reports to the directory's owner itself, and its logs are
# handed back by ci_hand_back_logs.
collect_reports() {
    dir=$1
    [ -d "$dir" ] || ci_die "no report directory $dir"
    if [ "${2:-}" != daemon ] && [ "$(id -u)" != 0 ] && find "$dir" ! -user "$(id -u)" | grep -q .; then
        # -h: a link the job planted there is handed over, not its target.
        as_root chown -R -h "$(id -u):$(id -g)" "$dir"
    fi
    if [ ! -f "$dir/report.json" ] && [ -f "$dir/events.ndjson" ]; then
        ci_log "$dir has an event log but no reports: rendering them from the log"
        "$(tracer_bin)" report "$dir" || ci_die "tracer report $dir failed"
    fi
    for f in report.json report.md report.html; do
        [ -f "$dir/$f" ] || ci_die "$dir/$f is missing"
    done
}

# A daemon's event logs (root's: the daemon keeps them) handed to the
# caller, in the report directory root kept the path of. Done as root from
# inside the directory (`cd -P`, then names relative to it: a parent the job
# swaps afterwards changes nothing), only if the caller owns the directory,
# and only root's regular files named as tracer names its logs, with
# `chown -h` (a link put there is never followed). Not `chown -R` of a path:
# the job can turn any component of it into a link to root's files.
ci_hand_back_logs() {
    [ "$(id -u)" != 0 ] || return 0
    # shellcheck disable=SC2016 # expanded by the inner shell
    as_root sh -c '
        cd -P -- "$1" || exit 1
        if [ "$(stat -c %u .)" != "$2" ]; then
            echo "tracer-ci: $1 is not yours: its event logs stay root'"'"'s" >&2
            exit 0
        fi
        find . -maxdepth 1 -type f -user 0 \( -name events.ndjson -o -name "events-*.ndjson" \) \
            -exec chown -h "$2:$3" {} +
    ' sh "$1" "$(id -u)" "$(id -g)" || ci_die "cannot hand the event logs in $1 back"
}

# `tracer report DIR --fail-on LIST`: the tracer's own judgement (exit 86
# when a condition is met; the reports are re-rendered byte for byte). Only
# its --fail-on lines are shown: the summary was printed once already. Run
# as the caller, on files the caller owns: a re-judgement for the step
# summary; the verdict a job cannot forge is the step that ran tracer
# (tracer-record's status, daemon-stop.sh's daemon's own).
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
