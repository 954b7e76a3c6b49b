#!/bin/sh
# Make a report directory usable by the CI job's own user: hand back files the
# tracer wrote as root, and render the reports from the event log if a capture
# was cut short before it wrote them. Fails when no reports can be had.
#
#   collect.sh DIR
#
# TRACER_FAIL_OPEN=true: a directory with neither reports nor an event log
# (tracer-record --fail-open ran the command untraced) is said, not failed:
# the report step warns about it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

[ $# -eq 1 ] || ci_die "usage: collect.sh DIR"
if [ "${TRACER_FAIL_OPEN:-false}" = true ] && [ ! -f "$1/report.json" ] && [ ! -f "$1/events.ndjson" ]; then
    ci_log "no tracer report in $1: tracer did not run (fail-open)"
    exit 0
fi
collect_reports "$1"
