#!/bin/sh
# The VM test suite, run by /init in each VM and directly on the host by
# `cargo xtask vm-test`: the capture self-test, then each module of the kernel
# test binary, one at a time.
# Usage: suite.sh TRACER [skip=PATH...] MODULE=TEST_BINARY... (and static=TRACER_STATIC)
#        suite.sh --select MODULE [skip=PATH...] < LIST   (print what MODULE runs)
# skip=PATH: a host-only module or test (xtask's HOST_ONLY, with the reasons).
# Every line meant for xtask starts with "@@tracer-vm ".

skips=
for spec in "$@"; do
    case $spec in skip=*) skips="$skips ${spec#skip=}" ;; esac
done

# The tests of module $1 out of a `--list --format terse` on stdin, by their
# exact names (libtest's own filters match a substring anywhere: `oom` alone
# would run certificates' OOM test too): every test under the module, its
# submodules' too (compat's one x86-64 test is compat::ia32::…), but those
# under a skipped path.
select_tests() {
    sed -n "s/^\($1::[^ ]*\): test\$/\1/p" | while read -r t; do
        keep=yes
        for s in $skips; do
            case $t in "$s" | "$s"::*) keep= ;; esac
        done
        if [ -n "$keep" ]; then echo "$t"; fi
    done
}

if [ "$1" = --select ]; then
    select_tests "$2"
    exit 0
fi

tracer=$1
shift
work=$(mktemp -d /tmp/tracer-vm.XXXXXX)

echo "@@tracer-vm kernel $(uname -r)"
if [ -r /sys/kernel/btf/vmlinux ]; then
    echo "@@tracer-vm btf yes"
else
    echo "@@tracer-vm btf no"
fi
if [ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    echo "@@tracer-vm cgroup v1-memory"
elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
    echo "@@tracer-vm cgroup v2-memory"
    # The memcg tests that need cgroup v2 (memory.oom.group) must run here.
    export TRACER_REQUIRE_CGROUP_V2=1
else
    echo "@@tracer-vm cgroup no-memcg"
fi
echo "@@tracer-vm cpus $(grep -c ^processor /proc/cpuinfo) mem_kb $(awk '/MemTotal/{print $2}' /proc/meminfo)"

# Self-test: a child killed by SIGTERM, then exit 3. tracer record exits with
# the command's status, and the log must hold each kind of event.
echo "@@tracer-vm begin selftest"
start=$(date +%s)
"$tracer" record --output "$work/selftest" -- sh -c 'sleep 0.2 & kill -TERM $!; wait; exit 3' 2>&1
rc=$?
log=$work/selftest/events.ndjson
missing=
for type in header fork exec signal kill_call exit; do
    grep -q "\"type\":\"$type\"" "$log" 2>/dev/null || missing="$missing $type"
done
if [ -f "$log" ]; then
    echo "@@tracer-vm header $(head -n 1 "$log")"
fi
secs=$(($(date +%s) - start))
if [ "$rc" = 3 ] && [ -z "$missing" ]; then
    echo "@@tracer-vm result selftest pass secs=$secs"
else
    echo "@@tracer-vm result selftest fail secs=$secs rc=$rc missing:${missing:- none}"
    # Why: a program this kernel refused says so at the end of the
    # verifier's log, which only the debug log carries.
    TRACER_LOG=debug "$tracer" record --output "$work/selftest-debug" -- true 2>&1 | tail -n 40
fi

# Which fields oom:mark_victim has on this kernel (tracer mounted tracefs).
for fmt in /sys/kernel/tracing/events/oom/mark_victim/format \
    /sys/kernel/debug/tracing/events/oom/mark_victim/format; do
    if [ -r "$fmt" ]; then
        fields=$(sed -n 's/.*field:[^;]* \**\([a-z_]*\);.*/\1/p' "$fmt" | grep -v '^common_' | tr '\n' ' ')
        echo "@@tracer-vm mark_victim $fields"
        break
    fi
done

# The static release binary (`cargo xtask vm-test --dist`), alone in a chroot
# with no libc at all: it records a real process and writes its reports.
static_check() {
    root=$work/static
    mkdir -p "$root/proc" "$root/sys" "$root/out"
    cp "$1" "$root/tracer"
    mount -o bind /proc "$root/proc" && mount -o bind /sys "$root/sys" || return 1
    chroot "$root" /tracer record --output /out -- /tracer --version 2>&1
    rc=$?
    umount "$root/sys/kernel/tracing" 2>/dev/null
    umount "$root/sys" "$root/proc"
    [ "$rc" = 0 ] && [ -s "$root/out/report.json" ] &&
        grep -q '"type":"exec"' "$root/out/events.ndjson"
}

for spec in "$@"; do
    name=${spec%%=*}
    bin=${spec#*=}
    if [ "$name" = skip ]; then
        continue
    fi
    if [ "$name" = static ]; then
        echo "@@tracer-vm begin static"
        start=$(date +%s)
        if static_check "$bin"; then
            echo "@@tracer-vm result static pass secs=$(($(date +%s) - start))"
        else
            echo "@@tracer-vm result static fail secs=$(($(date +%s) - start))"
        fi
        continue
    fi
    echo "@@tracer-vm begin $name"
    start=$(date +%s)
    tests=$("$bin" --list --format terse 2>/dev/null | select_tests "$name")
    if [ -n "$tests" ]; then
        # shellcheck disable=SC2086 # one word per test name
        RUST_BACKTRACE=0 "$bin" --test-threads=1 --exact $tests 2>&1
        rc=$?
    else
        echo "no test named $name::... in $bin"
        rc=no-tests
    fi
    secs=$(($(date +%s) - start))
    if [ "$rc" = 0 ]; then
        echo "@@tracer-vm result $name pass secs=$secs"
    else
        echo "@@tracer-vm result $name fail secs=$secs rc=$rc"
    fi
done
rm -rf "$work"
echo "@@tracer-vm done"
