#!/usr/bin/env bash
# Build the built-in dependency layer for one Lambda architecture without Docker.
#
#   layers/build.sh [x86_64|arm64]        -> layers/build/<arch>/python/...
#
# The pins live in infra/asyncz_cdk/lambda-requirements.txt (shipped with the construct);
# the build itself is asyncz_cdk.layer_build, which the construct runs during synth too.
# Calling this by hand is only needed for the benchmarks (tests/perf).
set -euo pipefail

arch="${1:-x86_64}"
case "$arch" in
  x86_64|arm64) ;;
  *) echo "usage: $0 [x86_64|arm64]" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
py="${PYTHON:-$root/.venv/bin/python}"
[[ -x "$py" ]] || py=python3
"$py" -m asyncz_cdk.layer_build "$arch" "$here/build/$arch" \
  2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
du -sh "$here/build/$arch/python" | awk -v a="$arch" '{print "layer " a ": " $1 " unzipped"}'
