#!/bin/sh
# The GitHub Actions end of a tracer run: the report directory handed back to
# the runner's user, report.md appended to the job's step summary, one
# `::error` annotation per unexpected death (a `::warning` when the log is
# incomplete), then --fail-on judged by the tracer itself.
#
#   github-report.sh [--fail-on LIST] [--fail-open] [--artifact-url URL] [--artifact-name NAME] DIR
#
# Environment: GITHUB_STEP_SUMMARY (the summary file; skipped when unset),
# TRACER_FAIL_ON, TRACER_FAIL_OPEN (true: as --fail-open),
# TRACER_ARTIFACT_URL, TRACER_ARTIFACT_NAME. Needs jq (on GitHub's runner
# images) for the annotations.
#
# --fail-open: the job chose to run untraced where tracer cannot start
# (tracer-record --fail-open, the action's fail-open input): a missing
# report is then a ::warning, never a failure.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

fail_on=${TRACER_FAIL_ON:-}
fail_open=${TRACER_FAIL_OPEN:-false}
artifact_url=${TRACER_ARTIFACT_URL:-}
artifact_name=${TRACER_ARTIFACT_NAME:-}
dir=
while [ $# -gt 0 ]; do
    case $1 in
    --fail-on) fail_on=$2; shift 2 ;;
    --fail-open) fail_open=true; shift ;;
    --artifact-url) artifact_url=$2; shift 2 ;;
    --artifact-name) artifact_name=$2; shift 2 ;;
    -*) ci_die "github-report.sh: unknown option $1" ;;
    *) dir=$1; shift ;;
    esac
done
[ -n "$dir" ] || ci_die "usage: github-report.sh [options] DIR"

if ! (collect_reports "$dir"); then
    if [ "$fail_open" = true ]; then
        echo "::warning title=tracer::no tracer report in $dir: tracer did not run (fail-open), so this job ran untraced and was not judged (see the step log)"
        exit 0
    fi
    echo "::error title=tracer::no tracer report in $dir (see the step log)"
    exit 1
fi

# The step summary takes at most 1 MiB per step: a long report is cut at a
# line, and the whole one is in the artifact.
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    limit=900000
    {
        if [ "$(wc -c <"$dir/report.md")" -le "$limit" ]; then
            cat "$dir/report.md"
        else
            head -c "$limit" "$dir/report.md" | sed '$d'
            printf '\n\n_(report.md cut here to fit the step summary)_\n'
        fi
        printf '\n'
        if [ -n "$artifact_url" ]; then
            printf '_The full report (report.html, report.json, events.ndjson): [%s](%s)._\n' \
                "${artifact_name:-tracer report artifact}" "$artifact_url"
        elif [ -n "$artifact_name" ]; then
            # shellcheck disable=SC2016 # Markdown backquotes
            printf '_The full report (report.html, report.json, events.ndjson) is in the artifact `%s`._\n' \
                "$artifact_name"
        fi
    } >>"$GITHUB_STEP_SUMMARY"
fi

# Workflow commands: in a message %, CR and LF are escaped; in a property
# also : and ,. Other control characters (ESC and the rest: argv is the
# job's to choose) become U+FFFD, so no terminal escape reaches the log.
# GitHub shows at most 10 error annotations per step: the tenth says how
# many more there are.
command -v jq >/dev/null 2>&1 || ci_die "jq not found: it reads report.json for the annotations"
jq -r '
  def msg: gsub("[\u0001-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]"; "\ufffd")
    | gsub("%"; "%25") | gsub("\r"; "%0D") | gsub("\n"; "%0A");
  def prop: msg | gsub(":"; "%3A") | gsub(","; "%2C");
  def clip(n): if length > n then .[0:n-1] + "…" else . end;
  # The short name the headline leads with (`node …/vitest/dist/workers/forks.js`),
  # else the command line.
  def short_name: (.headline | capture("^`(?<n>[^`]+)`") | .n) // .victim.command;
  [.certificates[] | select(.rank == "unexpected")] as $deaths
  | ($deaths | length) as $n
  | ($deaths[0:(if $n > 10 then 9 else 10 end)][]
     | "::error title=" + ("tracer: unexpected death of " + (short_name | clip(60))
                          + " (pid " + (.victim.pid | tostring) + ")" | prop)
       + "::" + (.headline | msg)),
    (if $n > 10 then "::error title=tracer::" + ("\($n - 9) more unexpected deaths: see the step summary" | msg)
     else empty end),
    (.log.warnings[]? | "::warning title=" + ("tracer: incomplete log" | prop) + "::" + msg)
' "$dir/report.json"

check_fail_on "$dir" "$fail_on"
