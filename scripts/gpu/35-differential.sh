#!/usr/bin/env bash
# GPU part 35: the differential conformance suite (python/tests/
# test_differential.py, docs/testing.md) with device="cuda" in its draws and
# a budget of several thousand configurations (CI runs a few hundred on the
# CPU). Uses part 30's build of the Python package (CUDA backend) when it is
# there, else builds one.
set -euo pipefail
cd "$(dirname "$0")/../.."
target=${PINLOADER_PY_TARGET:-/tmp/pinloader-gpu-py}
if [[ ! -d $target/pinloader ]]; then
  mkdir -p "$target"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-build-isolation \
    --no-deps --target "$target" .
fi
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import pinloader, sys; sys.exit(0 if pinloader.cuda_available() else 1)' ||
  { echo "35-differential: this build has no usable CUDA device"; exit 1; }
cd python/tests
PINLOADER_DIFF_N=${PINLOADER_DIFF_N:-3000} python3 -m pytest -q -p no:cacheprovider -x \
  test_differential.py
