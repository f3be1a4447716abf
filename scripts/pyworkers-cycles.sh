#!/usr/bin/env bash
# The long leak check of issue 11: PINLOADER_CYCLES (default 10000)
# create / iterate / destroy cycles of a DataLoader with worker processes
# (whole epochs, epochs abandoned mid-way, epochs ended by an exception),
# asserting that no process, file descriptor or memfd mapping is left.
# Not in CI's time budget (CI runs a few dozen cycles in test_workers.py).
# Usage: scripts/pyworkers-cycles.sh [PYTHON]   (about 20 ms a cycle)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1
target=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-py.XXXXXX")
trap 'rm -rf "$target"' EXIT
"$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
cd python/tests
PINLOADER_CYCLES=${PINLOADER_CYCLES:-10000} exec "$PY" -m pytest -q -p no:cacheprovider \
    test_workers.py -k cycles
