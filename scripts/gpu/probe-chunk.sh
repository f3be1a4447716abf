#!/usr/bin/env bash
# GPU probe, run by hand (`bash scripts/gpu/probe-chunk.sh`; not a numbered
# part, so gpu-check.sh leaves it out): bench/chunk_probe.c, a gather in
# small pinned chunks each copied as soon as it is full, against
# whole-batch staging (issue 3).
# Results: $PL_GPU_LOGS/probe-chunk.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
logs=${PL_GPU_LOGS:-$PWD/gpu-out}
mkdir -p "$logs"
cuda=${CUDA_HOME:-/usr/local/cuda}
bin=$(mktemp -d)/chunk_probe
gcc -O2 -o "$bin" bench/chunk_probe.c -I"$cuda/include" -L"$cuda/lib64" \
  -lcudart_static -ldl -lrt -lpthread || exit 1
for t in 14 8; do
  timeout 300 "$bin" $t 2>&1 | tee -a "$logs/probe-chunk.txt"
done
