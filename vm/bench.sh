#!/bin/sh
# The guest bench (`cargo xtask bench --vm KERNEL`), run by /init instead of
# suite.sh: the bench's driver workloads bare, under `tracer record` as it
# attaches on this kernel (fentry where the kernel takes it), and forced onto
# the raw_syscalls rung, interleaved so the guest's drift hits all three
# alike; then each traced once more under --program-stats (the kernel's own
# ns per program run). Asserts nothing: xtask prints the ratios.
#
# Under TCG tracer's start-up (the verifier, mostly) takes seconds, more than
# a workload sized for this guest, so each workload is timed from inside the
# traced tree (`benchdrv time` runs it): tracer's start-up and teardown are
# outside the clock, the programs' cost and tracer's reading inside it. The
# start-up is timed apart (`-- /bin/true`).
# Usage: bench.sh TRACER DRIVER REPS WORKLOADS (a file of lines: KEY ARGS...)
# Every line meant for xtask starts with "@@tracer-vm ".
tracer=$1
drv=$2
reps=$3
workloads=$4
out=/tmp/bench-out

echo "@@tracer-vm kernel $(uname -r)"
echo "@@tracer-vm cpus $(grep -c ^processor /proc/cpuinfo) mem_kb $(awk '/MemTotal/{print $2}' /proc/meminfo)"

# The flags of TOOL: tracer as it attaches, or forced onto the raw_syscalls rung.
flags() {
    case $1 in
    raw) echo "--disable-hook kill_syscalls:fentry --disable-hook last_words:fentry" ;;
    esac
}

# traced TOOL [FLAGS...] -- CMD...: CMD under `tracer record` as TOOL runs
# it, tracer's own output dropped.
traced() {
    tool=$1
    shift
    rm -rf "$out"
    # shellcheck disable=SC2046 # flags() prints two flags, split on purpose
    "$tracer" record --output "$out" --user root $(flags "$tool") "$@" 2> /dev/null
}

rep=0
while [ "$rep" -lt "$reps" ]; do
    rep=$((rep + 1))
    for tool in tracer raw; do
        rm -rf "$out"
        # shellcheck disable=SC2046
        "$drv" time true "$tool" -- "$tracer" record --output "$out" --user root $(flags "$tool") -- /bin/true
        "$drv" time true bare -- /bin/true
    done
    while read -r key args; do
        # shellcheck disable=SC2086 # the workload's arguments, split on purpose
        "$drv" time "$key" bare -- "$drv" "$key" $args < /dev/null
        for tool in tracer raw; do
            # shellcheck disable=SC2086
            traced "$tool" -- "$drv" time "$key" "$tool" -- "$drv" "$key" $args < /dev/null
        done
    done < "$workloads"
done
while read -r key args; do
    for tool in tracer raw; do
        # shellcheck disable=SC2086
        traced "$tool" --program-stats -- "$drv" "$key" $args < /dev/null > /dev/null
        echo "@@tracer-vm stats $key $tool $(tail -n 1 "$out/events.ndjson")"
    done
done < "$workloads"
rm -rf "$out"
echo "@@tracer-vm bench-done"
