#!/bin/sh
# The build context of ci/container/release.Containerfile: the `tracer` of a
# release tarball, unpacked only once the tarball matched its SHA-256, and
# a static busybox from the distribution's busybox-static package (apt-get
# download: the package's own signature chain, no image pulled); both
# checked to need no shared library (the image is `scratch`).
#
#   release-context.sh TARBALL SHA256 CONTEXT-DIR [BUSYBOX]
#
# BUSYBOX: a static busybox to use instead of downloading the package.
set -eu
tarball=${1:?usage: release-context.sh TARBALL SHA256 CONTEXT-DIR [BUSYBOX]}
sha256=${2:?usage: release-context.sh TARBALL SHA256 CONTEXT-DIR [BUSYBOX]}
out=${3:?usage: release-context.sh TARBALL SHA256 CONTEXT-DIR [BUSYBOX]}
busybox=${4:-}
die() {
    echo "release-context: $*" >&2
    exit 1
}

got=$(sha256sum "$tarball" | cut -d' ' -f1)
[ "$got" = "$sha256" ] || die "$tarball: SHA-256 $got, expected $sha256: nothing unpacked"
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work" --no-same-owner
bin=$(find "$work" -type f -name tracer | head -n 1)
[ -n "$bin" ] || die "$tarball holds no tracer"
cp "$bin" "$out/tracer"

if [ -z "$busybox" ]; then
    (cd "$work" && apt-get download busybox-static >&2) || die "apt-get download busybox-static failed"
    dpkg-deb -x "$work"/busybox-static_*.deb "$work/pkg"
    busybox=$work/pkg/bin/busybox
fi
cp "$busybox" "$out/busybox"
chmod 0755 "$out/tracer" "$out/busybox"

for b in tracer busybox; do
    # `file` is not everywhere; ldd says "not a dynamic executable" (glibc)
    # or "statically linked" / fails (musl) for a static one, and names
    # the libraries of a dynamic one.
    if ldd "$out/$b" 2>&1 | grep -q '=>'; then
        ldd "$out/$b" >&2
        die "$b links shared libraries; the image has none"
    fi
done
"$out/tracer" --version
echo "release-context: $out holds a static tracer and busybox"
