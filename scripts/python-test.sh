#!/usr/bin/env bash
# Builds the Python package into a scratch directory (not site-packages:
# Debian's pip refuses that) and runs its tests. Used by scripts/test.sh with
# Debian's python3 (CPU torch) and by scripts/gpu/30-python.sh on the GPU box.
# Usage: scripts/python-test.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1

"$PY" -c 'import setuptools, pytest, numpy' || {
  echo "python-test: $PY lacks setuptools, pytest or numpy" >&2
  exit 1
}
target=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-py.XXXXXX")
trap 'rm -rf "$target"' EXIT

echo "python-test: building the extension with $PY"
"$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import pinloader; print("pinloader", pinloader.__version__, "| cuda usable:", pinloader.cuda_available())'
# From inside python/tests so that `import pinloader` is the installed one.
cd python/tests
"$PY" -m pytest -q -p no:cacheprovider -rs .
