#!/usr/bin/env bash
# Builds the Python package into a scratch directory (not site-packages:
# Debian's pip refuses that) and runs its tests. Used by scripts/test.sh with
# Debian's python3 (CPU torch) and by scripts/gpu/30-python.sh on the GPU box.
# PINLOADER_NO_CUDA=1 builds and tests the host-only extension (no CUDA
# backend compiled in; scripts/test.sh runs both).
# Usage: [PINLOADER_NO_CUDA=1] scripts/python-test.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1

"$PY" -c 'import setuptools, pytest, numpy' || {
  echo "python-test: $PY lacks setuptools, pytest or numpy" >&2
  exit 1
}
# PINLOADER_PY_TARGET: build into that folder and keep it (the GPU parts
# reuse one build); by default a scratch folder, removed at the end.
if [[ -n ${PINLOADER_PY_TARGET:-} ]]; then
  target=$PINLOADER_PY_TARGET
  rm -rf "$target" && mkdir -p "$target"
else
  target=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-py.XXXXXX")
  trap 'rm -rf "$target"' EXIT
fi

echo "python-test: building the extension with $PY"
"$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import pinloader; print("pinloader", pinloader.__version__, "| cuda usable:", pinloader.cuda_available())'
if [[ ${PINLOADER_NO_CUDA:-0} != 0 ]]; then
  # The host-only build imports (every symbol resolved) and has no CUDA.
  "$PY" -c 'import pinloader, sys; sys.exit(pinloader.cuda_available())' ||
    { echo "python-test: PINLOADER_NO_CUDA=1 build reports CUDA" >&2; exit 1; }
fi
# From inside python/tests so that `import pinloader` is the installed one.
cd python/tests
"$PY" -m pytest -q -p no:cacheprovider -rfEs .
