#!/usr/bin/env bash
# Build the dependency layer for one Lambda architecture without Docker.
#
#   layers/build.sh [x86_64|arm64]        -> layers/build/<arch>/python/...
#
# pip downloads only manylinux binary wheels for CPython 3.12 on the target
# architecture, whatever the host is. The CDK app runs this script itself when
# the folder is missing (see infra/constructs/layer.py), so calling it by hand
# is only needed to rebuild after editing requirements.txt.
set -euo pipefail

arch="${1:-x86_64}"
case "$arch" in
  x86_64) plat="x86_64" ;;
  arm64) plat="aarch64" ;;
  *) echo "usage: $0 [x86_64|arm64]" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
pip="${PIP:-}"
if [[ -z "$pip" ]]; then
  if [[ -x "$root/.venv/bin/python" ]]; then pip="$root/.venv/bin/python -m pip"; else pip="python3 -m pip"; fi
fi

out="$here/build/$arch"
mkdir -p "$here/build"
# One build at a time (parallel `cdk synth` runs may all find the layer missing).
exec 9>"$here/build/.lock"
flock 9
staging="$(mktemp -d "$here/build/.$arch.XXXXXX")"
chmod 755 "$staging"
trap 'rm -rf "$staging"' EXIT

# shellcheck disable=SC2086  # $pip may be "python -m pip"
$pip install \
  --quiet --disable-pip-version-check --no-input \
  --platform "manylinux2014_$plat" --platform "manylinux_2_28_$plat" \
  --implementation cp --python-version 3.12 --only-binary=:all: \
  --no-compile --target "$staging/python" \
  -r "$here/requirements.txt" \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

# The Lambda runtime ships boto3/botocore; aws-xray-sdk drags a second copy in
# (~25 MB) that would shadow the runtime's. Drop it.
(cd "$staging/python" && rm -rf boto3 boto3-*.dist-info botocore botocore-*.dist-info \
  s3transfer s3transfer-*.dist-info bin)
find "$staging/python" -name '__pycache__' -type d -prune -exec rm -rf {} +
# Lets the CDK app tell a stale build from a current one (infra/layer_build.py).
(cd "$here" && sha256sum requirements.txt) >"$staging/requirements.sha256"

# Swap in at the end so a reader never sees a half-built tree.
rm -rf "$out"
mv "$staging" "$out"
trap - EXIT
du -sh "$out/python" | awk -v a="$arch" '{print "layer " a ": " $1 " unzipped"}'
