#!/bin/sh
# The test suite in miniature that ci/test/e2e.sh runs in place of
# `make test`: one of its workers is SIGKILLed by a sibling (an unexpected
# death, "Worker exited unexpectedly"), and the suite itself passes, so only
# the tracer can fail the job. It signals nothing but its own children. It
# leaves the uid it ran as in ./workload-uid, and the variables the test
# integrations are loaded through (the daemon form's start hands them on)
# in ./workload-env.
set -u
id -u >workload-uid
printf 'PYTHONPATH=%s\nNODE_OPTIONS=%s\n' "${PYTHONPATH:-}" "${NODE_OPTIONS:-}" >workload-env
sleep 300 &
worker=$!
# Kill the worker only once it is `sleep` (exec'd), not the shell's fork
# that is about to become it: the report then names `sleep 300`.
while [ -e "/proc/$worker" ] && [ "$(cat "/proc/$worker/comm" 2>/dev/null)" != sleep ]; do :; done
sh -c 'kill -KILL "$1"' reaper "$worker"
status=0
wait "$worker" || status=$?
echo "workload: worker $worker exited unexpectedly (status $status); the suite passes anyway"
exit 0
