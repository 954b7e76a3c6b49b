#!/bin/sh
# Internal to daemon-start.sh, run as root: the shell around `tracer daemon`.
# It records the daemon's pid and start time first and its exit status last,
# for daemon-stop.sh, which runs in another step and cannot wait for it. DIR
# is root's own (made by daemon-start.sh's root shell with mktemp -d): no
# path written here can be swapped by the job.
#
#   daemon-run.sh DIR LAUNCHER-PID TRACER daemon ARGS...
#
# It first waits until LAUNCHER (the shell that forked it) has exited and it
# has been re-parented: only then does it start the daemon. So when the
# daemon looks for the job's processes, this shell is no longer one of them,
# and the report does not list it as a process the job left running.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

umask 027
state=$1
launcher=$2
shift 2
while [ "$(proc_stat_field $$ 4)" = "$launcher" ]; do
    sleep 0.05
done
"$@" >>"$state/daemon.log" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$state/pid"
# Written after pid, and read by daemon-start.sh as "the pid is there".
proc_stat_field "$pid" 22 >"$state/start.tmp" && mv "$state/start.tmp" "$state/start"
wait "$pid"
echo $? >"$state/rc.tmp" && mv "$state/rc.tmp" "$state/rc"
