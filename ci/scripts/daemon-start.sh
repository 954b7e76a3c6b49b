#!/bin/sh
# Start `tracer daemon` in the background for the rest of a CI job, and return
# once it is watching: a job step that runs after this is observed.
#
#   daemon-start.sh [--output DIR] [--scope SCOPE] [--state DIR]
#                   [--ready-timeout SECONDS] [--fail-open] [--tests true|false]
#                   [--tests-dir DIR] [-- extra tracer daemon options]
#
# SCOPE (TRACER_SCOPE, default all):
#   job           the GitHub Actions job: its Runner.Worker process and every
#                 process it starts (each step is its child)
#   all           every process the tracer can see
#   cgroup:PATH   a cgroup (v1 or v2 directory) and its children
#   root-pid:PID  a process and its descendants (GitLab: root-pid:$$ in
#                 before_script is the shell that runs before_script + script)
#
# Defaults: TRACER_OUTPUT (tracer-report), TRACER_STATE_DIR (else
# $RUNNER_TEMP/tracer-daemon, else a fresh `mktemp -d` whose path is printed,
# and written to GITHUB_ENV when there is one: daemon-stop.sh needs it),
# TRACER_READY_TIMEOUT (120). The state directory is the caller's and must be
# theirs alone (see ci_private_dir in lib.sh); it holds `run` (and, once
# the daemon is stopped, copies of its rc, daemon.log and output).
#
# Nothing running as root writes through a path the caller (or the job's
# code, running as the caller) can change: root makes its own directory,
# `mktemp -d` under its TMPDIR (root-owned, group the caller's, 0750),
# writes the report directory's path there (`output`), and the shell around
# the daemon (daemon-run.sh) writes
# pid, start (the daemon's start time, against pid reuse), daemon.log (its
# stderr) and rc (its exit status) there. `run` names that directory;
# daemon-stop.sh checks it is still root's before it believes anything in
# it, copies rc and daemon.log into the state directory, and removes it.
#
# The daemon judges every condition a daemon's log supports itself
# (--fail-on unexpected-death,oom,foreign-signal): its exit status (86) and
# its own `tracer: --fail-on COND: N found` lines in root's daemon.log are
# the verdict daemon-stop.sh takes, never a re-reading of a directory the
# job can write.
#
# Test names (TRACER_TESTS, default true): once the daemon watches, the
# test integrations `tracer record --tests` hands its command (a pytest
# plugin, a Node preload) are written, as the caller, into TRACER_TESTS_DIR
# (default $RUNNER_TEMP/tracer-tests, else STATE/tests) by `tracer
# integrations`, and the variables that load them, joined to the caller's
# PYTHONPATH and NODE_OPTIONS, are handed to the job's later steps: appended
# to $GITHUB_ENV when there is one, and written as `export` lines to
# STATE/tests.env (empty when off; the GitLab template sources it). A step's
# own `env:` (or an `export` in the job) still wins: that step then runs
# as without the integrations. A failure there is a warning: the daemon
# watches either way, and the suite runs as it would without them.
#
# --fail-open (TRACER_FAIL_OPEN=true): a daemon that cannot start (no BTF,
# an unsupported kernel, a scope that does not exist) is a ::warning, not a
# failure: its log is shown, root's directory is removed, the state
# directory says so (`fail-open`, the reason), and the job runs untraced;
# daemon-stop.sh --fail-open then has nothing to stop.
#
# Readiness is the daemon's own word: it prints "tracer: daemon watching ..."
# once its hooks are attached and the scope is set (see
# tracer-user/src/daemon.rs). No sleep-and-hope.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

output=${TRACER_OUTPUT:-tracer-report}
scope=${TRACER_SCOPE:-all}
state=${TRACER_STATE_DIR:-${RUNNER_TEMP:+$RUNNER_TEMP/tracer-daemon}}
timeout=${TRACER_READY_TIMEOUT:-120}
tests=${TRACER_TESTS:-true}
tests_dir=${TRACER_TESTS_DIR:-${RUNNER_TEMP:+$RUNNER_TEMP/tracer-tests}}
fail_open=${TRACER_FAIL_OPEN:-false}
while [ $# -gt 0 ]; do
    case $1 in
    --fail-open) fail_open=true; shift ;;
    --output) output=$2; shift 2 ;;
    --scope) scope=$2; shift 2 ;;
    --state) state=$2; shift 2 ;;
    --ready-timeout) timeout=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --tests-dir) tests_dir=$2; shift 2 ;;
    --) shift; break ;;
    *) ci_die "daemon-start.sh: unknown argument $1" ;;
    esac
done

# The GitHub Actions runner's worker process: every step of the job is its
# child, so it roots the job's process tree.
runner_worker() {
    pid=$$
    while [ "$pid" -gt 1 ] 2>/dev/null; do
        if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = Runner.Worker ]; then
            printf '%s\n' "$pid"
            return 0
        fi
        pid=$(proc_stat_field "$pid" 4) || return 1
    done
    return 1
}

case $tests in
true | false) ;;
*) ci_die "--tests (TRACER_TESTS) is true or false, not '$tests'" ;;
esac

case $scope in
all) set -- --all "$@" ;;
job)
    worker=$(runner_worker) || ci_die "scope job: no Runner.Worker among this step's ancestors (not a GitHub Actions job on the runner itself, e.g. a container job); use all, cgroup:PATH or root-pid:PID"
    set -- --root-pid "$worker" "$@"
    ;;
cgroup:?*) set -- --cgroup "${scope#cgroup:}" "$@" ;;
root-pid:?*) set -- --root-pid "${scope#root-pid:}" "$@" ;;
*) ci_die "unknown scope '$scope' (job, all, cgroup:PATH or root-pid:PID)" ;;
esac

tracer=$(tracer_bin)
# Root runs daemon-run.sh, which sources lib.sh: the same rule as for tracer.
launcher=$(ci_trusted_file "$here/daemon-run.sh")
ci_trusted_file "$here/lib.sh" >/dev/null
if [ -z "$state" ]; then
    state=$(mktemp -d "${TMPDIR:-/tmp}/tracer-daemon.XXXXXX") || ci_die "mktemp -d failed"
    ci_log "daemon state in $state: pass --state $state (or TRACER_STATE_DIR) to daemon-stop.sh"
    if [ -n "${GITHUB_ENV:-}" ]; then
        printf 'TRACER_STATE_DIR=%s\n' "$state" >>"$GITHUB_ENV"
    fi
fi
state=$(ci_private_dir "$state")
mkdir -p "$output"
output=$(cd "$output" && pwd)
if [ -f "$state/run" ] && run=$(ci_daemon_run_dir "$state" 2>/dev/null) && [ ! -f "$run/rc" ]; then
    ci_die "a daemon started from $state is still running (pid $(cat "$run/pid" 2>/dev/null)): stop it first"
fi
rm -f "$state/run" "$state/rc" "$state/daemon.log" "$state/output" "$state/fail-open"

# As root, in its own session (a step's end or Ctrl-C reaches nothing of it),
# every fd away from the step's pipes (the runner would wait on them). The
# intermediate `sh -c` prints root's own directory and exits at once, so
# daemon-run.sh is re-parented out of the job's process tree before it starts
# the daemon.
# shellcheck disable=SC2016 # expanded by the inner shell
run=$(as_root sh -c '
    launcher=$1 group=$2 tracer=$3 output=$4
    shift 4
    dir=$(mktemp -d "${TMPDIR:-/tmp}/tracer-daemon-run.XXXXXX") || exit 1
    # setgid: the files daemon-run.sh writes there are readable by the caller group.
    chgrp "$group" "$dir" && chmod 2750 "$dir" || exit 1
    # Where the reports go, kept by root: daemon-stop.sh never takes it
    # from the state directory of the caller, which the job can rewrite.
    printf "%s\n" "$output" >"$dir/output" || exit 1
    launch=setsid
    command -v setsid >/dev/null 2>&1 || launch=
    $launch "$launcher" "$dir" "$$" "$tracer" daemon --output "$output" \
        --fail-on unexpected-death,oom,foreign-signal "$@" \
        </dev/null >/dev/null 2>&1 &
    printf "%s\n" "$dir"
' sh "$launcher" "$(id -g)" "$tracer" "$output" "$@" </dev/null) ||
    ci_die "could not start the daemon as root"
printf '%s\n' "$run" >"$state/run"
run=$(ci_daemon_run_dir "$state")

# The daemon did not start: fail, or with --fail-open say so loudly and let
# the job run untraced.
not_started() {
    if [ "$fail_open" != true ]; then
        ci_die "$1"
    fi
    as_root rm -rf -- "$run"
    rm -f "$state/run"
    printf '%s\n' "$1" >"$state/fail-open"
    ci_log "$1; --fail-open: the job runs untraced"
    echo "::warning title=tracer::the tracer daemon could not start (fail-open), so this job runs untraced: $1"
    exit 0
}

ticks=$((timeout * 10))
while :; do
    if [ -f "$run/rc" ]; then
        cat "$run/daemon.log" >&2
        not_started "the daemon exited (status $(cat "$run/rc")) before it was watching"
    fi
    if [ -f "$run/start" ] && grep -q '^tracer: daemon watching' "$run/daemon.log"; then
        break
    fi
    ticks=$((ticks - 1))
    if [ "$ticks" -le 0 ]; then
        cat "$run/daemon.log" >&2 || true
        [ -f "$run/pid" ] && as_root kill -TERM "$(cat "$run/pid")" || true
        ci_die "the daemon was not watching after ${timeout}s"
    fi
    sleep 0.1
done
pid=$(cat "$run/pid")
cat "$run/daemon.log" >&2
ci_log "daemon pid $pid is watching; reports go to $output when daemon-stop.sh stops it"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'report-dir=%s\n' "$output" >>"$GITHUB_OUTPUT"
fi

# The test integrations, for the job's later steps. As the caller, never
# through as_root: root writing into a directory the job can reach is the
# hostile case docs/security.md guards, and nothing here needs root.
: >"$state/tests.env"
if [ "$tests" = true ]; then
    [ -n "$tests_dir" ] || tests_dir=$state/tests
    format=shell
    [ -z "${GITHUB_ENV:-}" ] || format=github-env
    # Into a file first: half an output is never loaded.
    if "$tracer" integrations --dir "$tests_dir" --format "$format" >"$state/tests.env.tmp"; then
        if [ "$format" = github-env ]; then
            cat "$state/tests.env.tmp" >>"$GITHUB_ENV"
            rm -f "$state/tests.env.tmp"
        else
            mv -f "$state/tests.env.tmp" "$state/tests.env"
        fi
        ci_log "test names: the later steps load tracer's test integrations from $tests_dir"
    else
        rm -f "$state/tests.env.tmp"
        ci_log "warning: test names: tracer integrations failed (above); the tests run without them"
    fi
fi
