#!/bin/sh
# /init of the VM test initramfs (built by `cargo xtask vm-test`): mount what
# a booted system has, report the kernel's facts, run the suite, power off.
# Every line meant for xtask starts with "@@tracer-vm ".
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /tmp /dev/shm /root
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /dev/shm
# Keep printk off the console: it would interleave with the results.
echo 1 > /proc/sys/kernel/printk
hostname tracer-vm
# Loopback up: a daemon's /metrics on 127.0.0.1 (resources' daemon test).
ip link set lo up 2>/dev/null || ifconfig lo up

# Like our CI hosts: cgroup v1 memory at /sys/fs/cgroup/memory and cgroup2
# at /sys/fs/cgroup/unified. Kernels without v1 memcg (CONFIG_MEMCG_V1=n,
# Debian 6.12) get cgroup2 at /sys/fs/cgroup with the memory controller.
mount -t tmpfs cgroup /sys/fs/cgroup
mkdir -p /sys/fs/cgroup/memory /sys/fs/cgroup/unified
if mount -t cgroup -o memory memory /sys/fs/cgroup/memory 2>/dev/null; then
    mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified
else
    umount /sys/fs/cgroup
    mount -t cgroup2 cgroup2 /sys/fs/cgroup &&
        echo +memory > /sys/fs/cgroup/cgroup.subtree_control
fi

# The crash_stacks tests' crashers, built on the host (no compiler here).
[ -d /crashers ] && export TRACER_PREBUILT_CRASHERS=/crashers

# The guest bench's initramfs (`cargo xtask bench --vm`) has vm/bench.sh
# instead of the suite.
if [ -f /vm/bench.sh ]; then
    sh /vm/bench.sh $(cat /vm/args)
else
    sh /vm/suite.sh $(cat /vm/args)
fi
echo "@@tracer-vm poweroff"
sync
poweroff -f
# poweroff -f does not return; if it does, panic=-1 with -no-reboot ends qemu.
exit 0
