#!/usr/bin/env bash
# GPU checks of the Python front end, run by scripts/gpu-check.sh on the GPU
# box (python3 there has torch with CUDA; no network): builds the extension
# with the CUDA backend (toolkit under CUDA_HOME or /usr/local/cuda) and runs
# all Python tests, the CUDA ones (python/tests/test_gpu.py) included.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The build stays in /tmp/pinloader-gpu-py for the parts after this one.
# The differential suite runs a few cases here; part 35 runs thousands.
# One pytest per test file, 6 at once (PINLOADER_PY_JOBS): the suite in
# one after another ran past a device call's 10 minutes.
PINLOADER_PY_JOBS=${PINLOADER_PY_JOBS:-6} \
PINLOADER_PY_LOGS=${PL_GPU_LOGS:-/tmp}/30-python-files \
PINLOADER_DIFF_N=${PINLOADER_DIFF_N_PY:-40} \
PINLOADER_PY_TARGET=${PINLOADER_PY_TARGET:-/tmp/pinloader-gpu-py} \
  exec scripts/python-test.sh "${PYTHON:-python3}"
