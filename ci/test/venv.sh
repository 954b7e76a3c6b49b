#!/bin/sh
# Make (or reuse) the Python venv with the pinned CI test tools (see
# requirements.txt: yamllint, check-jsonschema, kubernetes-validate, the
# ShellCheck binary, PyYAML) and print its path. Idempotent: a venv whose stamp
# matches requirements.txt is used as it is; no network then.
#
#   venv.sh DIR
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: venv.sh DIR}
req=$here/requirements.txt
if [ -x "$dir/bin/python" ] && cmp -s "$req" "$dir/requirements.stamp"; then
    printf '%s\n' "$dir"
    exit 0
fi
rm -rf "$dir"
python3 -m venv "$dir" >&2 || {
    echo "venv.sh: python3 -m venv failed (on Debian's python3: apt-get install python3-venv)" >&2
    exit 1
}
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-input -r "$req" >&2
cp "$req" "$dir/requirements.stamp"
printf '%s\n' "$dir"
