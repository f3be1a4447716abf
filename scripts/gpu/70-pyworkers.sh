#!/usr/bin/env bash
# GPU part 70: Python datasets through pinloader's worker processes against
# torch.utils.data.DataLoader in the same run (bench/python_workers.py):
# numpy augmentation at 6 and 14 workers, the seeds' benchmark (torchvision
# CIFAR10 + ToTensor, passed unchanged), a torchvision transforms pipeline,
# token windows, workers' PSS; then the worker-process and torch-parity
# tests on this machine (start methods, failures, Ctrl-C, cycles).
# Needs torch with CUDA and torchvision (CIFAR-10 data is generated locally).
# Results: $PL_GPU_LOGS/70-pyworkers/ (python_workers.json, .md, tests.log).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
logs=${PL_GPU_LOGS:-$PWD/gpu-out}/70-pyworkers
mkdir -p "$logs"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1
target=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-py.XXXXXX")
trap 'rm -rf "$target"' EXIT
"$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -c 'import pinloader, torch; print("pinloader", pinloader.__version__, "cuda", pinloader.cuda_available(), "torch", torch.__version__)'
rc=0
"$PY" bench/python_workers.py --out "$logs" --workers "${PL_PYW_WORKERS:-6,14}" || rc=1
# A 10,000-cycle leak run is scripts/pyworkers-cycles.sh; here a few hundred.
(cd python/tests && PINLOADER_CYCLES=${PINLOADER_CYCLES:-300} "$PY" -m pytest -q -p no:cacheprovider \
    test_workers.py test_torch_compat.py 2>&1) | tee "$logs/tests.log" || rc=1
exit $rc
