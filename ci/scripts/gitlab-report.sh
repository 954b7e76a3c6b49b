#!/bin/sh
# The GitLab CI end of a tracer run (after_script): the report directory
# handed back to the job's user, the verdict and report.md in the job log (a
# collapsed section), and two files the job template declares as reports:
#
#   DIR/gitlab-annotations.json  artifacts:reports:annotations: links to
#                                report.html, report.md and the event log on
#                                the job page
#   DIR/junit.xml                artifacts:reports:junit: one failed test case
#                                per unexpected death (and per signal across
#                                the job's boundary), named the same in every
#                                run, so the merge request's test summary and
#                                its "failed N times" history name them
#                                (`tracer report --junit`: tracer's own)
#
#   gitlab-report.sh DIR
#
# It never fails the job (after_script cannot): failing on a death is
# `tracer-record --fail-on` or `daemon-stop.sh --fail-on` in the script.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

dir=${1:-${TRACER_OUTPUT:-tracer-report}}
if ! (collect_reports "$dir"); then
    ci_log "no tracer report in $dir"
    exit 0
fi

# Collapsed section with the report, headed by the verdict.
esc=$(printf '\033')
now=$(date +%s)
printf '%s[0Ksection_start:%s:tracer_report[collapsed=true]\r%s[0Ktracer: %s\n' \
    "$esc" "$now" "$esc" "$(head -n 1 "$dir/report.md")"
cat "$dir/report.md"
printf '%s[0Ksection_end:%s:tracer_report\r%s[0K\n' "$esc" "$(date +%s)" "$esc"

# Links, when the job knows its own URL: artifact files are served under
# $CI_JOB_URL/artifacts/file/<path from the project directory>.
if [ -n "${CI_JOB_URL:-}" ] && [ -n "${CI_PROJECT_DIR:-}" ]; then
    abs=$(cd "$dir" && pwd)
    rel=${abs#"$CI_PROJECT_DIR"/}
    base=$CI_JOB_URL/artifacts/file/$rel
    cat >"$dir/gitlab-annotations.json" <<JSON
{
  "tracer": [
    {"external_link": {"label": "report.html (timeline and death certificates)", "url": "$base/report.html"}},
    {"external_link": {"label": "report.md", "url": "$base/report.md"}},
    {"external_link": {"label": "report.json", "url": "$base/report.json"}},
    {"external_link": {"label": "events.ndjson (the evidence)", "url": "$base/events.ndjson"}}
  ]
}
JSON
    ci_log "report: $base/report.html"
fi

# tracer's own JUnit file, from the log (the reports are re-rendered byte
# for byte on the way). Informational, like the rest of this step: it reads
# the directory after it was handed to the job's user.
errs=$(mktemp)
if ! "$(tracer_bin)" report "$dir" --junit "$dir/junit.xml" >/dev/null 2>"$errs"; then
    ci_log "no junit.xml: tracer report --junit failed: $(cat "$errs")"
fi
rm -f "$errs"
