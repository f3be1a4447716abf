#!/usr/bin/env bash
# Two ranks under torchrun, one GPU each: sharding covers the data set,
# bytes reach each GPU intact, aggregate throughput next to one GPU's. See
# scripts/gpu/dist_torchrun.py. Runs with one GPU too (world size 1).
# Environment: PL_DIST_NPROC (ranks; default: min(GPUs, 2)), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/../.."
# NVLink SHARP / multicast stay off on these machines (see the device notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PY=${PYTHON:-python3}

ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if ((ngpu == 0)); then
  echo "skip: no GPU"
  exit 77
fi
if ! "$PY" -c 'import torch, numpy, torch.distributed' 2>/dev/null; then
  echo "skip: $PY has no torch / numpy"
  exit 77
fi
nproc=${PL_DIST_NPROC:-$((ngpu < 2 ? ngpu : 2))}

if [[ ! -x build-gpu/pinloader ]]; then
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build-gpu -j"$(nproc)" --target pinloader_cli
fi

echo "torchrun: $nproc rank(s) of $ngpu GPU(s)"
timeout 170 "$PY" -m torch.distributed.run --standalone --nproc_per_node="$nproc" \
  scripts/gpu/dist_torchrun.py --cli build-gpu/pinloader "$@"
