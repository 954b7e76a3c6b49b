#!/bin/sh
# Stop the daemon daemon-start.sh started (SIGTERM: it writes its reports and
# exits), wait until it has exited, and hand the reports to the caller.
#
#   daemon-stop.sh [--state DIR] [--stop-timeout SECONDS] [--fail-on LIST] [--fail-open]
#
# --fail-open (TRACER_FAIL_OPEN=true): when daemon-start.sh --fail-open
# could not start the daemon (its `fail-open` note in the state directory),
# there is nothing to stop or judge: it says so and exits 0. Without it, a
# daemon that never started fails the step as ever.
#
# Idempotent: a daemon already stopped is not signalled again, so a job can
# stop it at the end of its script (with --fail-on, to fail the job) and again
# in an always-run clean-up step. --fail-on (TRACER_FAIL_ON) takes the
# conditions a daemon's log can judge: unexpected-death, oom,
# foreign-signal (its own stop excepted); exit 86 when one is met. The
# verdict is the daemon's own, read from root's directory by the stop that
# collects it: the daemon judged all three itself, and its exit status (86)
# and its `tracer: --fail-on COND: N found` lines say which were met. The
# report directory, which the job can write, is never re-read to judge.
# TRACER_STOP_TIMEOUT (600 s) bounds the wait: a long job's report takes a
# while to render. The state directory is TRACER_STATE_DIR, else
# $RUNNER_TEMP/tracer-daemon; without either, pass the one daemon-start.sh
# printed. Once the daemon has exited, its rc, daemon.log and output (the
# report directory, as root kept it) are copied into the state directory
# and root's own directory is removed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

state=${TRACER_STATE_DIR:-${RUNNER_TEMP:+$RUNNER_TEMP/tracer-daemon}}
timeout=${TRACER_STOP_TIMEOUT:-600}
fail_on=${TRACER_FAIL_ON:-}
fail_open=${TRACER_FAIL_OPEN:-false}
while [ $# -gt 0 ]; do
    case $1 in
    --fail-open) fail_open=true; shift ;;
    --state) state=$2; shift 2 ;;
    --stop-timeout) timeout=$2; shift 2 ;;
    --fail-on) fail_on=$2; shift 2 ;;
    *) ci_die "daemon-stop.sh: unknown argument $1" ;;
    esac
done

[ -n "$state" ] || ci_die "which daemon? pass --state DIR (daemon-start.sh printed it) or set TRACER_STATE_DIR"
state=$(ci_private_dir "$state")

if [ "$fail_open" = true ] && [ ! -f "$state/run" ] && [ -f "$state/fail-open" ]; then
    ci_log "no daemon to stop: it did not start ($(cat "$state/fail-open")); --fail-open: the job ran untraced"
    exit 0
fi
if [ ! -f "$state/run" ] && [ -f "$state/rc" ]; then
    # Its verdict was given by the stop that collected it; the copies here
    # are the caller's (the job could rewrite them), so nothing is judged.
    ci_log "the daemon has already exited and been collected (its verdict was that stop's)"
    exit 0
fi
run=$(ci_daemon_run_dir "$state")
output=$(cat "$run/output") || ci_die "$run has no output file: not a daemon daemon-start.sh started"
pid=$(cat "$run/pid")
if [ -f "$run/rc" ]; then
    ci_log "the daemon (pid $pid) has already exited"
    cat "$run/daemon.log" >&2
else
    # Signal only the process we started: the pid and its start time. If
    # it is gone, the shell around it is writing its exit status now.
    if [ "$(proc_stat_field "$pid" 22)" = "$(cat "$run/start")" ]; then
        ci_log "stopping the daemon (pid $pid)"
        as_root kill -TERM "$pid"
    fi
    ticks=$((timeout * 10))
    while [ ! -f "$run/rc" ]; do
        ticks=$((ticks - 1))
        if [ "$ticks" -le 0 ]; then
            cat "$run/daemon.log" >&2
            ci_die "the daemon (pid $pid) has not exited ${timeout}s after SIGTERM"
        fi
        sleep 0.1
    done
    # What it said after the line daemon-start.sh showed: the summary,
    # verdict first. (`sed '1,/re/d'` deleted everything when that line
    # was line 1: a range's end is looked for from line 2 on.) All of
    # it when the line is missing.
    awk 'NR == FNR { if (!m && /^tracer: daemon watching/) m = FNR; next }
         FNR > m' "$run/daemon.log" "$run/daemon.log" >&2
fi
# The daemon's own verdict, from root's directory (the job can write
# neither its exit status nor its stderr): 86 when a condition it judged was
# met, and which ones in its own words.
rc=$(cat "$run/rc")
judged=0
case $rc in
0) ;;
86)
    for c in $(printf '%s\n' "$fail_on" | tr ',' ' '); do
        if grep -q "^tracer: --fail-on $c: [0-9]* found" "$run/daemon.log"; then
            judged=86
        fi
    done
    # 86 without any condition named: a reason this script does not know
    # (fail closed).
    if [ -n "$fail_on" ] && ! grep -q '^tracer: --fail-on [a-z-]*: [0-9]* found' "$run/daemon.log"; then
        judged=86
    fi
    ;;
87)
    # --fail-on could not certify the run: events were lost (fail closed).
    ci_log "the daemon cannot certify the run: events were lost (its log is above)"
    judged=87
    ;;
*)
    ci_log "the daemon exited with status $rc (its log is above)"
    judged=1
    ;;
esac
# The caller's copies, then root's directory goes: `run` last, so a stop
# cut short here is simply run again.
cp "$run/rc" "$run/daemon.log" "$run/output" "$state/"
as_root rm -rf -- "$run"
rm -f "$state/run"
case $judged in
0) [ -z "$fail_on" ] || ci_log "--fail-on $fail_on: none found (the daemon's own verdict)" ;;
86) ci_log "failing: a --fail-on condition was met ($fail_on; the daemon's own verdict)" ;;
esac
ci_hand_back_logs "$output"
collect_reports "$output" daemon
exit "$judged"
