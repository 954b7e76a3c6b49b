#!/usr/bin/env bash
# End to end: the CI integrations in ci/ run as written, against a real
# tracer, on this machine. As root (tracer loads eBPF programs).
#
#   e2e.sh PYTHON TRACER [SECTION...]
#
# PYTHON: the venv ci/test/venv.sh makes (PyYAML); TRACER: a built tracer.
# Sections (default: all, in this order):
#
#   github      ci/github/example-workflow.yml, every job, through gha.py (a
#               stand-in for the runner that runs the workflow's and the
#               composite action's own steps). The build job runs as root and
#               builds tracer from this checkout (install.sh: cargo xtask
#               build, the dev profile); the daemon and record jobs run their
#               steps as an unprivileged user with passwordless sudo, as on
#               GitHub's hosted runners.
#   gitlab      ci/gitlab/example.gitlab-ci.yml, both jobs, through glci.py,
#               as root (a Docker executor's user).
#   kubernetes  ci/kubernetes/ci-pod.yaml: the init container's, the
#               sidecar's and the CI container's commands, as written, the
#               init and CI ones as an unprivileged user (the test
#               integrations loaded with the copied tracer), the sidecar
#               with only the capabilities the manifest adds (setpriv
#               --bounding-set); the
#               DaemonSet's tracer arguments, with its capabilities only.
#   container   ci/container/build-in-container.sh (the Containerfile's build
#               stage), with the dev profile.
#
# `make test` in the examples becomes ci/test/workload.sh: a worker SIGKILLed
# by a sibling, a suite that passes. Each section asserts what a user would
# see: the verdict naming that death in the step summary / job log, a
# ::error annotation or a junit failure for it, the report directory with
# report.json/md/html, the job failing through --fail-on (86).
#
# Deterministic: every wait is on a real signal (the daemon's "watching"
# line, its exit status file, its pid gone), bounded. On any exit, every
# daemon this script started is stopped, and the user it made is removed.
set -euo pipefail

# Not realpath: the venv's bin/python is a link to the interpreter, and
# only through the link does it find the venv's packages (xmlschema).
python=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
tracer=$(realpath "$2")
shift 2
sections=("$@")
[ ${#sections[@]} -gt 0 ] || sections=(github gitlab kubernetes container)
repo=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "e2e.sh: needs root" >&2; exit 1; }
# cargo for the builds, when cargo test runs us with a PATH that lacks it.
if [ -n "${CARGO:-}" ]; then PATH=$(dirname "$CARGO"):$PATH; fi
export PATH

work=$(mktemp -d /tmp/tracer-ci-e2e.XXXXXX)
chmod 755 "$work"
# Its own user: another run of this script on the machine (another
# checkout's suite) must not delete this run's user or sudoers entry.
user=tracer-ci-e2e-$$
made_user=
http_pid=

fail() {
    echo "e2e: FAIL: $*" >&2
    exit 1
}
pass() { echo "e2e: ok: $*"; }

# Every daemon started under $work: a tracer whose command line names $work
# (its pid in a tracer.pid, or in the root-owned directory a `run` file of
# daemon-start.sh names).
stop_daemons() {
    local f pid
    while IFS= read -r f; do
        case $f in */run) f=$(cat "$f" 2>/dev/null)/pid ;; esac
        pid=$(cat "$f" 2>/dev/null) || continue
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = tracer ] || continue
        tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$work" || continue
        echo "e2e: stopping leftover daemon $pid" >&2
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 300); do [ -e "/proc/$pid" ] || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
    done < <(find "$work" \( -name run -o -name tracer.pid \) -type f 2>/dev/null)
}

cleanup() {
    local status=$?
    stop_daemons
    [ -z "${http_pid:-}" ] || kill "$http_pid" 2>/dev/null || true
    if [ -n "$made_user" ]; then
        rm -f "/etc/sudoers.d/$user"
        userdel -r "$user" 2>/dev/null || true
    fi
    if [ "$status" = 0 ]; then rm -rf "$work"; else echo "e2e: work left in $work" >&2; fi
}
trap cleanup EXIT

# A GitHub-runner-like user: unprivileged, passwordless sudo.
make_user() {
    id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash "$user"
    made_user=1
    printf '%s ALL=(ALL) NOPASSWD: ALL\n' "$user" >"/etc/sudoers.d/$user"
    chmod 0440 "/etc/sudoers.d/$user"
    visudo -cf "/etc/sudoers.d/$user" >/dev/null || fail "sudoers entry for $user"
}

# What every report of the workload must show.
check_report() {
    local dir=$1 mode=$2
    for f in report.json report.md report.html events.ndjson; do
        [ -s "$dir/$f" ] || fail "$dir/$f missing"
    done
    [ "$(jq -r .run.mode "$dir/report.json")" = "$mode" ] || fail "$dir: mode is not $mode"
    jq -e '[.certificates[] | select(.rank == "unexpected" and .victim.argv == ["sleep", "300"]
            and .killer.relation == "sibling")] | length == 1' "$dir/report.json" >/dev/null ||
        fail "$dir/report.json: no unexpected death of sleep 300 by a sibling"
    # shellcheck disable=SC2016 # Markdown backquotes
    head -n 1 "$dir/report.md" | grep -q '^1 unexpected death: `sleep 300`' ||
        fail "$dir/report.md: verdict is $(head -n 1 "$dir/report.md")"
    # Our own launcher stays out of the job's tree (daemon-run.sh).
    ! grep -q daemon-run "$dir/report.md" || fail "$dir/report.md names daemon-run.sh"
}

wait_for_line() { # FILE PATTERN: bounded wait for the daemon's own words
    local _
    for _ in $(seq 600); do
        grep -q "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    cat "$1" >&2 || true
    fail "no '$2' in $1 after 60 s"
}

# check_tests_env WHAT DIR ENVFILE UID: the integrations are in DIR (0700,
# UID's, record --tests' files), and the workload's variables (ENVFILE,
# workload.sh's) load them: PYTHONPATH is DIR, NODE_OPTIONS requires
# DIR/tracer-node.js.
check_tests_env() {
    local what=$1 dir=$2 envf=$3 uid=$4
    [ "$(stat -c '%u %a' "$dir")" = "$uid 700" ] || fail "$what: $dir is not $uid's, 0700: $(stat -c '%u %a' "$dir")"
    for f in tracer_pytest.py tracer_pytest.dist-info/entry_points.txt tracer-node.js; do
        [ -s "$dir/$f" ] || fail "$what: $dir/$f missing"
    done
    grep -qxF "PYTHONPATH=$dir" "$envf" || fail "$what: the tests' PYTHONPATH: $(cat "$envf")"
    grep -qxF "NODE_OPTIONS=--require \"$dir/tracer-node.js\"" "$envf" ||
        fail "$what: the tests' NODE_OPTIONS: $(cat "$envf")"
}

# A release of $tracer under DIR/v0.1.0/, served by python's http.server
# on 127.0.0.1 (stopped on exit): sets release_url and release_sha.
serve_release() {
    local dir=$1 name version port
    version=$(sed -n 's/^TRACER_RELEASE_VERSION=//p' "$repo/ci/release.env")
    name=tracer-$version-x86_64-linux-musl
    mkdir -p "$dir/v$version/$name"
    cp "$tracer" "$dir/v$version/$name/tracer"
    cp "$repo/README.md" "$dir/v$version/$name/"
    tar -czf "$dir/v$version/$name.tar.gz" -C "$dir/v$version" "$name"
    release_sha=$(sha256sum "$dir/v$version/$name.tar.gz" | cut -d' ' -f1)
    "$python" -u -m http.server --bind 127.0.0.1 0 --directory "$dir" >"$work/http.log" 2>&1 &
    http_pid=$!
    for _ in $(seq 100); do
        port=$(sed -n 's/.* port \([0-9]*\) .*/\1/p' "$work/http.log")
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || fail "the release server did not start"
    release_url=http://127.0.0.1:$port
}

# fail-open: a runner where tracer cannot start keeps running the tests, and
# a missing report is a warning, never a failure; without it, both fail the
# job. A daemon that cannot start stands in for a runner where tracer cannot
# load: its output directory is world-writable, which tracer refuses before
# it watches anything. The one-step form's untraced run (tracer-record
# --fail-open) writes no report, as the Tests step here writes none.
# $1: the world-readable copy of ci/.
section_github_fail_open() {
    local src=$1 result=$work/github-open.json job
    mkdir -p "$work/open-out"
    chmod 1777 "$work/open-out"
    cat >"$work/open.yml" <<'EOF'
name: fail-open
on: push
jobs:
  daemon-open:
    runs-on: ubuntu-latest
    steps:
      - uses: OWNER/tracer/ci/github@<commit-sha>
        with: { mode: start, scope: all, output: OPEN_OUT, fail-open: 'true' }
      - name: Tests
        run: touch tests-ran
      - uses: OWNER/tracer/ci/github@<commit-sha>
        if: always()
        with: { mode: stop, output: OPEN_OUT, fail-open: 'true' }
  daemon-closed:
    runs-on: ubuntu-latest
    steps:
      - uses: OWNER/tracer/ci/github@<commit-sha>
        with: { mode: start, scope: all, output: OPEN_OUT }
      - name: Tests
        run: touch tests-ran
  record-open:
    runs-on: ubuntu-latest
    steps:
      - name: Tests
        run: mkdir -p tracer-report && touch tests-ran
      - uses: OWNER/tracer/ci/github@<commit-sha>
        if: always()
        with: { mode: report, fail-open: 'true' }
  record-closed:
    runs-on: ubuntu-latest
    steps:
      - name: Tests
        run: mkdir -p tracer-report && touch tests-ran
      - uses: OWNER/tracer/ci/github@<commit-sha>
        if: always()
        with: { mode: report }
EOF
    sed -i "s|OPEN_OUT|$work/open-out|" "$work/open.yml"
    "$python" "$repo/ci/test/gha.py" --workflow "$work/open.yml" --work "$work/github-open" \
        --user "$user" --action "OWNER/tracer/ci/github@<commit-sha>=$src/ci/github" \
        --result "$result" >"$work/github-open.log" 2>&1 ||
        { cat "$work/github-open.log"; fail "github fail-open: gha.py"; }
    for job in daemon-open record-open; do
        [ "$(jq -r --arg j "$job" '.[$j].conclusion' "$result")" = success ] ||
            { cat "$work/github-open.log"; fail "github $job: fail-open should keep the job green"; }
        [ -f "$(jq -r --arg j "$job" '.[$j].workspace' "$result")/tests-ran" ] ||
            fail "github $job: the tests did not run"
        jq -e --arg j "$job" '.[$j].annotations | map(select(.level == "error")) | length == 0' \
            "$result" >/dev/null || fail "github $job: an ::error annotation under fail-open"
    done
    jq -e '."daemon-open".annotations | map(select(.level == "warning"
            and (.message | contains("could not start (fail-open)")))) | length == 1' "$result" >/dev/null ||
        fail "github daemon-open: no ::warning that the daemon could not start"
    jq -e '."daemon-open".log | contains("no daemon to stop")' "$result" >/dev/null ||
        fail "github daemon-open: the stop step did not say there was nothing to stop"
    jq -e '."record-open".annotations | map(select(.level == "warning"
            and (.message | contains("no tracer report")))) | length == 1' "$result" >/dev/null ||
        fail "github record-open: no ::warning for the missing report"
    [ "$(jq -r '."daemon-closed".conclusion' "$result")" = failure ] || fail "github daemon-closed: should fail"
    [ ! -f "$(jq -r '."daemon-closed".workspace' "$result")/tests-ran" ] ||
        fail "github daemon-closed: the tests ran after the start step failed"
    [ "$(jq -r '."record-closed".conclusion' "$result")" = failure ] || fail "github record-closed: should fail"
    jq -e '."record-closed".annotations | map(select(.level == "error"
            and (.message | contains("no tracer report")))) | length == 1' "$result" >/dev/null ||
        fail "github record-closed: no ::error for the missing report"
    pass "github fail-open: a daemon that cannot start and a missing report warn and the tests run; without it both fail"
}

section_github() {
    make_user
    local uid src gh result
    uid=$(id -u "$user")
    # What the unprivileged steps see: a world-readable copy of ci/ (this
    # checkout may sit in a directory only root can enter).
    src=$work/src
    mkdir -p "$src"
    cp -r "$repo/ci" "$src/"
    chmod -R a+rX "$src"
    gh=(--workflow "$repo/ci/github/example-workflow.yml" --work "$work/github"
        --substitute "make test=sh $src/ci/test/workload.sh")
    mkdir -p "$work/github"

    # The release the action's copy pins: this tracer in a tarball laid out
    # as `cargo xtask dist` makes it, served on 127.0.0.1, its URL and
    # checksum written into the copy's ci/release.env. The jobs install it
    # as a real job would, by default, verified first.
    serve_release "$work/releases"
    sed -i -e "s|^TRACER_RELEASE_URL=.*|TRACER_RELEASE_URL=$release_url|" \
        -e "s|^TRACER_RELEASE_SHA256_X86_64=.*|TRACER_RELEASE_SHA256_X86_64=$release_sha|" \
        "$src/ci/release.env"

    # The daemon and record jobs, steps as $user, under a Runner.Worker.
    "$python" "$repo/ci/test/gha.py" "${gh[@]}" --job daemon --job record --user "$user" \
        --as-runner-worker --action "OWNER/tracer/ci/github@<commit-sha>=$src/ci/github" \
        --result "$work/github.json"
    result=$work/github.json

    local job ws
    for job in daemon record; do
        ws=$(jq -r ".$job.workspace" "$result")
        [ "$(jq -r ".$job.conclusion" "$result")" = failure ] || fail "github $job: the job should fail (--fail-on)"
        check_report "$ws/tracer-report" "$([ $job = daemon ] && echo daemon || echo record)"
        [ "$(find "$ws/tracer-report" ! -user "$uid" | wc -l)" = 0 ] ||
            fail "github $job: report files not handed back to $user"
        [ "$(cat "$ws/workload-uid")" = "$uid" ] || fail "github $job: the tests did not run as $user"
        jq -e --arg v "$(head -n 1 "$ws/tracer-report/report.md")" \
            ".$job.summary | contains(\$v)" "$result" >/dev/null ||
            fail "github $job: the step summary lacks the verdict"
        jq -e ".$job.annotations | map(select(.level == \"error\"
                and (.properties.title | contains(\"unexpected death of sleep 300\"))
                and (.message | contains(\"a sibling\")))) | length == 1" "$result" >/dev/null ||
            fail "github $job: no ::error annotation for the death"
        for f in report.json report.md report.html; do
            [ -f "$work/github/artifacts/tracer-report-$job/$f" ] || fail "github $job: artifact lacks $f"
        done
        pass "github $job: summary, ::error annotation, artifact, files owned by $user"
    done
    # The daemon form's start handed the later steps the test integrations
    # through GITHUB_ENV (`tests` defaults to 'true'): written as $user into
    # RUNNER_TEMP, loaded by the Tests step; the record job (no --tests)
    # got none.
    check_tests_env "github daemon" "$(jq -r .daemon.temp "$result")/tracer-tests" \
        "$(jq -r .daemon.workspace "$result")/workload-env" "$uid"
    jq -e --arg d "$(jq -r .daemon.temp "$result")/tracer-tests" \
        '.daemon.github_env.PYTHONPATH == $d' "$result" >/dev/null ||
        fail "github daemon: the start step wrote no PYTHONPATH naming the integrations to GITHUB_ENV"
    grep -qx 'PYTHONPATH=' "$(jq -r .record.workspace "$result")/workload-env" ||
        fail "github record: PYTHONPATH was changed without --tests"
    pass "github daemon: start handed the Tests step the test integrations (GITHUB_ENV), written as $user"

    # How each failed: the daemon job in the action's stop step (86: judged
    # as root before the reports are handed back, the verdict the job's
    # files cannot forge), and again in its report step (86, after the
    # summary); the record job in its Tests step (tracer-record: 86).
    jq -e '.daemon.steps | map(select(.id == "stop" and .outcome != "skipped")) | .[0].exit_code == 86' "$result" >/dev/null ||
        fail "github daemon: the stop step did not exit 86"
    jq -e '.daemon.steps | map(select(.id == "report" and .outcome != "skipped")) | .[0].exit_code == 86' "$result" >/dev/null ||
        fail "github daemon: the report step did not exit 86"
    jq -e '.record.steps | map(select(.name == "Tests")) | .[0].exit_code == 86' "$result" >/dev/null ||
        fail "github record: the Tests step did not exit 86"
    # The daemon judged its own log (daemon-start.sh's --fail-on): 86.
    [ "$(cat "$(jq -r .daemon.temp "$result")/tracer-daemon/rc")" = 86 ] || fail "github daemon: daemon exit status"
    jq -e --arg u "$user" '.run.command_user | startswith($u + " (uid ")' \
        "$(jq -r .record.workspace "$result")/tracer-report/report.json" >/dev/null ||
        fail "github record: the command did not run as $user"
    pass "github: the daemon job failed in its stop and report steps (86), the record job in its Tests step (86)"
    # The stop step keeps the verdict in the job's log (the daemon's
    # summary, verdict first), not only "--fail-on ...: 1 found".
    jq -e --arg v "tracer: $(jq -r .verdict "$(jq -r .daemon.workspace "$result")/tracer-report/report.json")" \
        '.daemon.log | contains($v)' "$result" >/dev/null ||
        fail "github daemon: the job log lacks the verdict"
    pass "github daemon: the stop step printed the verdict in the job log"
    section_github_fail_open "$src"


    # The fallback, `build: 'true'`, twice, as root: the first job builds
    # tracer from the action's own checkout (this one; the dev profile
    # here) and saves it in the cache, the second restores it and builds
    # nothing.
    cat >"$work/build.yml" <<'EOF'
name: build fallback
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - id: tracer
        uses: OWNER/tracer/ci/github@<commit-sha>
        with:
          mode: install
          build: 'true'
      - run: tracer --version
EOF
    local n log
    for n in 1 2; do
        log=$work/build-$n.log
        "$python" "$repo/ci/test/gha.py" --workflow "$work/build.yml" --work "$work/github-build" \
            --action "OWNER/tracer/ci/github@<commit-sha>=$repo/ci/github" \
            --env TRACER_PROFILE=debug --result "$work/build-$n.json" >"$log" 2>&1 || { cat "$log"; fail "github build $n"; }
        [ "$(jq -r .build.conclusion "$work/build-$n.json")" = success ] || { cat "$log"; fail "github build $n"; }
    done
    grep -q "building tracer from" "$work/build-1.log" || fail "github build 1 did not build"
    grep -q "cache: saved" "$work/build-1.log" || fail "github build 1 saved no cache"
    grep -q "cache: restored" "$work/build-2.log" || fail "github build 2 restored no cache"
    ! grep -q "building tracer from" "$work/build-2.log" || fail "github build 2 built again"
    pass "github: build: 'true' built from source once, the next job restored it from the cache"
}

section_gitlab() {
    local result=$work/gitlab.json dir job
    mkdir -p "$work/gitlab"
    "$python" "$repo/ci/test/glci.py" --pipeline "$repo/ci/gitlab/example.gitlab-ci.yml" --root "$repo" \
        --work "$work/gitlab" --result "$result" \
        --var "TRACER_SOURCE=$repo" --var "TRACER_BINARY=$tracer" \
        --substitute "make test=sh $repo/ci/test/workload.sh"
    for job in test test-daemon; do
        dir=$(jq -r ".\"$job\".project_dir" "$result")/tracer-report
        [ "$(jq -r ".\"$job\".script_exit" "$result")" = 86 ] || fail "gitlab $job: script should exit 86"
        [ "$(jq -r ".\"$job\".after_script_exit" "$result")" = 0 ] || fail "gitlab $job: after_script failed"
        jq -e ".\"$job\".artifact_problems == []" "$result" >/dev/null || fail "gitlab $job: artifacts"
        check_report "$dir" "$([ $job = test ] && echo record || echo daemon)"
        jq -e '.tracer[0].external_link.url | test("^https://gitlab.invalid/group/project/-/jobs/[0-9]+/artifacts/file/tracer-report/report.html$")' \
            "$dir/gitlab-annotations.json" >/dev/null || fail "gitlab $job: annotations link"
        "$python" "$repo/ci/test/junit.py" "$dir/junit.xml" >/dev/null || fail "gitlab $job: junit.xml is not schema-valid JUnit"
        "$python" - "$dir/junit.xml" <<'EOF' || fail "gitlab $job: junit.xml"
import sys, xml.etree.ElementTree as ET
suite = ET.parse(sys.argv[1]).getroot().find("testsuite")
failures = [c for c in suite.iter("testcase") if c.find("failure") is not None]
assert suite.get("failures") == "1" and len(failures) == 1, "one failure"
# Named by its signature: the same in every run, no pid.
assert failures[0].get("name").startswith("sleep <n> killed by SIGKILL from a sibling"), failures[0].get("name")
assert "(pid " in failures[0].find("failure").get("message")
EOF
        pass "gitlab $job: failed with 86, artifacts declared exist, annotations link, junit failure"
    done
    # The daemon job's script got the test integrations (the template
    # sources daemon-start.sh's export lines); the record job none.
    dir=$(jq -r '."test-daemon".project_dir' "$result")
    check_tests_env "gitlab test-daemon" "$dir/.tracer-state/tests" "$dir/workload-env" 0
    grep -qx 'PYTHONPATH=' "$(jq -r .test.project_dir "$result")/workload-env" ||
        fail "gitlab test: PYTHONPATH was changed without --tests"
    pass "gitlab test-daemon: before_script handed script the test integrations"
    jq -e '.log.warnings == []' "$(jq -r '."test-daemon".project_dir' "$result")/tracer-report/report.json" \
        >/dev/null || fail "gitlab test-daemon: the log is incomplete"

    # Once more without a checkout: the template clones TRACER_REPO_URL
    # (this repository's committed HEAD) into .tracer and runs its scripts.
    result=$work/gitlab-clone.json
    "$python" "$repo/ci/test/glci.py" --pipeline "$repo/ci/gitlab/example.gitlab-ci.yml" --root "$repo" \
        --work "$work/gitlab" --result "$result" --job test \
        --var "TRACER_REPO_URL=file://$repo" --var "TRACER_BINARY=$tracer" \
        --substitute "make test=sh $repo/ci/test/workload.sh"
    dir=$(jq -r .test.project_dir "$result")
    [ -x "$dir/.tracer/ci/scripts/install.sh" ] || fail "gitlab clone: no checkout in .tracer"
    [ "$(jq -r .test.script_exit "$result")" = 86 ] || fail "gitlab clone: script should exit 86"
    jq -e '.test.artifact_problems == []' "$result" >/dev/null || fail "gitlab clone: artifacts"
    check_report "$dir/tracer-report" record
    pass "gitlab test, scripts cloned from TRACER_REPO_URL: the same report"
}

section_kubernetes() {
    local dir=$work/k8s/reports ctl=$work/k8s/control bin=$work/k8s/bin sidecar ci init out status
    mkdir -p "$dir" "$ctl" "$bin"
    # The two commands exactly as the manifest has them, /reports and
    # /control moved here.
    sidecar=$("$python" -c 'import sys, yaml
pod = yaml.safe_load(open(sys.argv[1]))
print(next(c for c in pod["spec"]["containers"] if c["name"] == "tracer")["command"][2])' \
        "$repo/ci/kubernetes/ci-pod.yaml")
    ci=$("$python" -c 'import sys, yaml
pod = yaml.safe_load(open(sys.argv[1]))
print(next(c for c in pod["spec"]["containers"] if c["name"] == "ci")["command"][2])' \
        "$repo/ci/kubernetes/ci-pod.yaml")
    init=$("$python" -c 'import sys, yaml
pod = yaml.safe_load(open(sys.argv[1]))
print(next(c for c in pod["spec"]["initContainers"] if c["name"] == "tracer-bin")["command"][2])' \
        "$repo/ci/kubernetes/ci-pod.yaml")
    # The sidecar with exactly the capabilities the manifest gives it (the
    # bounding set is all a root process then has); the CI container's
    # command as an unprivileged user, who can write /control and its
    # workspace but not /reports.
    local caps ws=$work/k8s/ws uid gid
    caps=$("$python" -c 'import sys, yaml
pod = yaml.safe_load(open(sys.argv[1]))
c = next(c for c in pod["spec"]["containers"] if c["name"] == "tracer")
print(",".join("+" + cap.lower() for cap in c["securityContext"]["capabilities"]["add"]))' \
        "$repo/ci/kubernetes/ci-pod.yaml")
    make_user
    uid=$(id -u "$user")
    gid=$(id -g "$user")
    mkdir -p "$ws"
    chown "$uid:$gid" "$ctl" "$ws" "$bin"
    chmod 755 "$work/k8s" "$dir"
    sidecar=${sidecar//\/reports/$dir}
    ci=${ci//\/reports/$dir}
    # The image has tracer on PATH; so does this shell.
    PATH=$(dirname "$tracer"):$PATH setpriv --bounding-set "-all,$caps" \
        sh -c "${sidecar//\/control/$ctl}" &
    local sidecar_pid=$!
    # The init container's copy of the image's tracer, as the CI user.
    init=${init//\/usr\/local\/bin\/tracer/$tracer}
    setpriv --reuid "$uid" --regid "$gid" --clear-groups sh -c "${init//\/opt\/tracer/$bin}" ||
        fail "kubernetes: the init container's command failed"
    ci=${ci//\/opt\/tracer/$bin}
    # The work directory as an argument the workload ignores: the daemon
    # watches the whole machine, where another run of this suite may kill
    # its own `sleep 300` at the same moment (two kernel-test runs at once
    # certified both); the certificate asked for below is the one under it.
    out=$(cd "$ws" && HOME=$ws TEST_COMMAND="sh $repo/ci/test/workload.sh $work" \
        setpriv --reuid "$uid" --regid "$gid" --clear-groups sh -c "${ci//\/control/$ctl}") ||
        fail "kubernetes: the CI container's command failed"
    wait "$sidecar_pid" && status=0 || status=$?
    [ "$status" = 0 ] || fail "kubernetes: the sidecar exited $status"
    # --all here is the whole machine: other deaths may share the verdict.
    grep -Eq '^[0-9]+ unexpected deaths?: ' <<<"$out" || fail "kubernetes: the CI log lacks the verdict: $out"
    grep -q '^tracer: daemon watching all' "$dir/daemon.log" || fail "kubernetes: daemon.log"
    [ -s "$dir/report.html" ] && [ -s "$dir/report.json" ] || fail "kubernetes: reports"
    jq -e --arg work "$work" '. as $r
        | def chain($id): ($r.ancestors[] | select(.id == $id)) as $a
            | $a, (if $a.parent_id == null then empty else chain($a.parent_id) end);
        [.certificates[] | select(.victim.argv == ["sleep", "300"] and .rank == "unexpected")
            | select(any(chain(.victim.ancestry_id); .argv | index([$work]) != null))]
        | length == 1' \
        "$dir/report.json" >/dev/null || fail "kubernetes: the death is not certified"
    [ -s "$ws/tracer-report/report.json" ] || fail "kubernetes: the CI container has no copy of the reports"
    jq -e '.run.hooks | all(.attached)' "$dir/report.json" >/dev/null ||
        fail "kubernetes: a hook did not attach with the manifest's capabilities ($caps)"
    pass "kubernetes pod: sidecar ($caps only) ready before the tests, stopped by the unprivileged CI container through /control, verdict in its log"
    check_tests_env kubernetes "$ws/.tracer-tests" "$ws/workload-env" "$uid"
    pass "kubernetes pod: the CI container loaded the test integrations with the tracer its init container copied, as its own user"

    # The DaemonSet's arguments, its hostPath moved here.
    local ds=$work/k8s/ds args pid
    mkdir -p "$ds"
    mapfile -t args < <("$python" -c 'import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc["kind"] == "DaemonSet":
        print("\n".join(doc["spec"]["template"]["spec"]["containers"][0]["args"]))' \
        "$repo/ci/kubernetes/daemonset.yaml")
    args=("${args[@]//\/var\/log\/tracer/$ds}")
    # Its metrics port, on a port of the kernel's choosing on loopback only.
    args=("${args[@]/#0.0.0.0:9464/127.0.0.1:0}")
    caps=$("$python" -c 'import sys, yaml
for doc in yaml.safe_load_all(open(sys.argv[1])):
    if doc["kind"] == "DaemonSet":
        c = doc["spec"]["template"]["spec"]["containers"][0]
        print(",".join("+" + cap.lower() for cap in c["securityContext"]["capabilities"]["add"]))' \
        "$repo/ci/kubernetes/daemonset.yaml")
    setpriv --bounding-set "-all,$caps" "$tracer" "${args[@]}" 2>"$work/k8s/ds.log" &
    pid=$!
    wait_for_line "$work/k8s/ds.log" '^tracer: daemon watching all'
    local metrics
    metrics=$(sed -n 's|^tracer: metrics on \(http://.*\)$|\1|p' "$work/k8s/ds.log")
    [ -n "$metrics" ] || fail "kubernetes DaemonSet: its arguments serve no metrics"
    "$python" -c 'import sys, urllib.request
body = urllib.request.urlopen(sys.argv[1], timeout=10).read().decode()
sys.exit(0 if "\ntracer_build_info{" in body else 1)' "$metrics" ||
        fail "kubernetes DaemonSet: $metrics has no tracer_build_info"
    # This daemon watches the whole machine: other tests running beside
    # this one (the JUnit ones run the same workload) are in its report
    # too, so the death looked for is the one this workload names.
    local said worker
    said=$(cd "$work/k8s" && sh "$repo/ci/test/workload.sh")
    worker=$(printf '%s\n' "$said" | sed -n 's/^workload: worker \([0-9]*\) exited.*/\1/p')
    [ -n "$worker" ] || fail "kubernetes DaemonSet: the workload did not say its worker's pid: $said"
    kill -TERM "$pid"
    wait "$pid" || fail "kubernetes DaemonSet: the daemon exited $?"
    jq -e --argjson w "$worker" '[.certificates[] | select(.victim.pid == $w and .victim.argv == ["sleep", "300"] and .rank == "unexpected")] | length == 1' \
        "$ds/report.json" >/dev/null || fail "kubernetes DaemonSet: the death of worker $worker is not certified"
    jq -e '.run.hooks | all(.attached)' "$ds/report.json" >/dev/null ||
        fail "kubernetes DaemonSet: a hook did not attach with the manifest's capabilities ($caps)"
    pass "kubernetes DaemonSet: its arguments, with its capabilities ($caps) only, run a daemon that serves metrics and reports on SIGTERM"
}

section_container() {
    "$repo/ci/container/build-in-container.sh" "$work/image"
    "$work/image/tracer" --version | grep -q '^tracer ' || fail "container: the built binary does not run"
    [ "$(cd "$work/image" && echo *)" = "busybox tracer" ] ||
        fail "container: the image holds more than tracer and busybox: $(cd "$work/image" && echo *)"
    # The image's sidecar loop, run by the image's own shell alone.
    env -i "$work/image/busybox" sh -c 'for t in 1 2; do sleep 0; done; echo finished' | grep -q finished ||
        fail "container: the image's shell cannot run the sidecar's loop"
    pass "container: the build stage's script builds the static tracer and a static shell, nothing else"

    # The release image's context, from a release tarball of that static
    # tracer: made only when the checksum matches, static binaries only.
    local rel=$work/release name=tracer-0.0.0-x86_64-linux-musl sha
    mkdir -p "$rel/$name"
    cp "$work/image/tracer" "$rel/$name/tracer"
    tar -czf "$rel/$name.tar.gz" -C "$rel" "$name"
    sha=$(sha256sum "$rel/$name.tar.gz" | cut -d' ' -f1)
    ! "$repo/ci/container/release-context.sh" "$rel/$name.tar.gz" "$(printf '%064d' 0)" "$rel/bad" \
        "$work/image/busybox" 2>/dev/null || fail "container: release-context.sh took a wrong checksum"
    [ ! -e "$rel/bad/tracer" ] || fail "container: release-context.sh unpacked despite the mismatch"
    "$repo/ci/container/release-context.sh" "$rel/$name.tar.gz" "$sha" "$rel/ctx" "$work/image/busybox" >/dev/null ||
        fail "container: release-context.sh"
    [ "$(cd "$rel/ctx" && echo *)" = "busybox tracer" ] || fail "container: release context: $(cd "$rel/ctx" && echo *)"
    pass "container: the release image's context holds the verified static tracer and busybox, nothing else"
}

for s in "${sections[@]}"; do
    echo "e2e: === $s"
    "section_$s"
done
echo "e2e: all sections passed: ${sections[*]}"
