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
# Ship bytecode, compiled by a 3.12 interpreter (the runtime's) with hash-based
# invalidation: CDK copies the asset (new mtimes) and /opt is read-only, so without
# it every cold start compiles everything again (api cold start ~2.6 s -> ~0.75 s).
py312=""
for cand in "$root/.venv/bin/python" "$(command -v python3.12 || true)" \
            "$( (pyenv root 2>/dev/null || true) )/versions/3.12.1/bin/python"; do
  if [[ -x "$cand" ]] && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))'; then
    py312="$cand"; break
  fi
done
if [[ -n "$py312" ]]; then
  "$py312" -m compileall -q -j0 --invalidation-mode unchecked-hash "$staging/python" >/dev/null
else
  echo "layer: no Python 3.12 here; shipping without bytecode (slower cold starts)" >&2
fi
# Lets the CDK app tell a stale build from a current one (infra/layer_build.py).
(cd "$here" && cat requirements.txt build.sh | sha256sum) >"$staging/requirements.sha256"

# Swap in at the end so a reader never sees a half-built tree.
rm -rf "$out"
mv "$staging" "$out"
trap - EXIT
du -sh "$out/python" | awk -v a="$arch" '{print "layer " a ": " $1 " unzipped"}'
