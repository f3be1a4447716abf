#!/usr/bin/env bash
# GPU part 75: time to the first batch (bench/first_batch.py), pinloader
# against torch's DataLoader in the same run, batch 256 into the GPU, for
# 1/4/16/32 workers, fork/forkserver/spawn, and for pinloader after
# load_state_dict(). Measured on the H200 (2026-12-04): each method's
# small-dataset run takes 1.5-2.5 minutes (fork with PL_FB_REPS=3: 3.5),
# the torch-Dataset run at 1 and 32 workers over 3, 1 GB with fork about 2;
# 1 GB with forkserver or spawn over 2 minutes a row at 4 workers (the
# objects are pickled once per worker, by torch and by pinloader alike),
# so keep those to few workers. Each device call is 10 minutes at most:
#   PL_FB_OBJECTS_MB=0 PL_FB_METHODS=fork PL_FB_REPS=3 scripts/gpu/75-first-batch.sh
#   PL_FB_OBJECTS_MB=0 PL_FB_METHODS=forkserver scripts/gpu/75-first-batch.sh
#   PL_FB_OBJECTS_MB=0 PL_FB_METHODS=spawn scripts/gpu/75-first-batch.sh
#   PL_FB_OBJECTS_MB=1024 PL_FB_METHODS=fork scripts/gpu/75-first-batch.sh
#   PL_FB_OBJECTS_MB=1024 PL_FB_METHODS=forkserver,spawn PL_FB_WORKERS=1,4 scripts/gpu/75-first-batch.sh
#   PL_FB_TORCH_DATASET=1 PL_FB_METHODS=forkserver,spawn PL_FB_WORKERS=1,32 scripts/gpu/75-first-batch.sh
# (PL_FB_WORKERS and PL_FB_REPS override the worker counts and the runs per
# case, default 1; PL_FB_CASE_TIMEOUT the seconds a case may take, default
# 240; PL_FB_TORCH_DATASET=1 makes the datasets torch Datasets of
# a module that imports torch, whose spawned workers import torch.) Results:
# $OUT (or $PL_GPU_LOGS, else gpu-out)/first-batch-<mb>mb-<methods>[-torchds].{json,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
out=${OUT:-${PL_GPU_LOGS:-$PWD/gpu-out}}
mkdir -p "$out"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1
# PL_FB_PACKAGE: a folder the package is installed in already (several
# runs in one device call install it once: 40-50 s on the H200).
if [[ -n ${PL_FB_PACKAGE:-} ]]; then
  target=$PL_FB_PACKAGE
  if [[ ! -d $target/pinloader ]]; then
    "$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
  fi
else
  target=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-py.XXXXXX")
  trap 'rm -rf "$target"' EXIT
  "$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
fi
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
mb=${PL_FB_OBJECTS_MB:-0}
methods=${PL_FB_METHODS:-fork,forkserver,spawn}
torchds=()
suffix=
if [[ ${PL_FB_TORCH_DATASET:-0} == 1 ]]; then
  torchds=(--torch-dataset)
  suffix=-torchds
fi
"$PY" bench/first_batch.py --device cuda --workers "${PL_FB_WORKERS:-1,4,16,32}" \
    --methods "$methods" --objects-mb "$mb" --reps "${PL_FB_REPS:-1}" --case-timeout "${PL_FB_CASE_TIMEOUT:-240}" \
    "${torchds[@]}" --out "$out" --name "first-batch-${mb}mb-${methods//,/-}$suffix"
