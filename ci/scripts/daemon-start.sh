#!/bin/sh
# Start `tracer daemon` in the background for the rest of a CI job, and return
# once it is watching: a job step that runs after this is observed.
#
#   daemon-start.sh [--output DIR] [--scope SCOPE] [--state DIR]
#                   [--ready-timeout SECONDS] [-- extra tracer daemon options]
#
# SCOPE (TRACER_SCOPE, default all):
#   job           the GitHub Actions job: its Runner.Worker process and every
#                 process it starts (each step is its child)
#   all           every process the tracer can see
#   cgroup:PATH   a cgroup (v1 or v2 directory) and its children
#   root-pid:PID  a process and its descendants (GitLab: root-pid:$$ in
#                 before_script is the shell that runs before_script + script)
#
# Defaults: TRACER_OUTPUT (tracer-report), TRACER_STATE_DIR ($RUNNER_TEMP or
# /tmp, then /tracer-daemon), TRACER_READY_TIMEOUT (120). The state directory
# holds what daemon-stop.sh needs: pid, start (its start time, against pid
# reuse), output, daemon.log (the daemon's stderr) and, once it has exited,
# rc (its exit status).
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
state=${TRACER_STATE_DIR:-${RUNNER_TEMP:-${TMPDIR:-/tmp}}/tracer-daemon}
timeout=${TRACER_READY_TIMEOUT:-120}
while [ $# -gt 0 ]; do
    case $1 in
    --output) output=$2; shift 2 ;;
    --scope) scope=$2; shift 2 ;;
    --state) state=$2; shift 2 ;;
    --ready-timeout) timeout=$2; shift 2 ;;
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
mkdir -p "$state" "$output"
state=$(cd "$state" && pwd)
output=$(cd "$output" && pwd)
if [ -f "$state/pid" ] && [ ! -f "$state/rc" ]; then
    ci_die "a daemon started from $state is still running (pid $(cat "$state/pid")): stop it first"
fi
rm -f "$state/pid" "$state/start" "$state/rc" "$state/daemon.log"
printf '%s\n' "$output" >"$state/output"
: >"$state/daemon.log"

# As root, in its own session (a step's end or Ctrl-C reaches nothing of it),
# every fd away from the step's pipes (the runner would wait on them). The
# intermediate `sh -c` exits at once, so daemon-run.sh is re-parented out of
# the job's process tree before it starts the daemon.
# shellcheck disable=SC2016 # expanded by the inner shell
as_root sh -c '
    run=$1 state=$2 tracer=$3 output=$4
    shift 4
    launch=setsid
    command -v setsid >/dev/null 2>&1 || launch=
    $launch "$run" "$state" "$$" "$tracer" daemon --output "$output" "$@" \
        </dev/null >/dev/null 2>&1 &
' sh "$here/daemon-run.sh" "$state" "$tracer" "$output" "$@" </dev/null >/dev/null 2>&1

ticks=$((timeout * 10))
while :; do
    if [ -f "$state/rc" ]; then
        cat "$state/daemon.log" >&2
        ci_die "the daemon exited (status $(cat "$state/rc")) before it was watching"
    fi
    if [ -f "$state/pid" ] && grep -q '^tracer: daemon watching' "$state/daemon.log"; then
        break
    fi
    ticks=$((ticks - 1))
    if [ "$ticks" -le 0 ]; then
        cat "$state/daemon.log" >&2
        [ -f "$state/pid" ] && as_root kill -TERM "$(cat "$state/pid")" || true
        ci_die "the daemon was not watching after ${timeout}s"
    fi
    sleep 0.1
done
pid=$(cat "$state/pid")
proc_stat_field "$pid" 22 >"$state/start"
cat "$state/daemon.log" >&2
ci_log "daemon pid $pid is watching; reports go to $output when daemon-stop.sh stops it"
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'report-dir=%s\n' "$output" >>"$GITHUB_OUTPUT"
fi
