#!/bin/sh
# Make a report directory usable by the CI job's own user: hand back files the
# tracer wrote as root, and render the reports from the event log if a capture
# was cut short before it wrote them. Fails when no reports can be had.
#
#   collect.sh DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

[ $# -eq 1 ] || ci_die "usage: collect.sh DIR"
collect_reports "$1"
