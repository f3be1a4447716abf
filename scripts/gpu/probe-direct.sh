#!/usr/bin/env bash
# GPU probe, run by hand (`bash scripts/gpu/probe-direct.sh`; not a numbered
# part, so gpu-check.sh leaves it out): bench/direct_probe.cu, which measures
# ways of moving shuffled samples into a device batch against one plain
# cudaMemcpyAsync (issue 3's large-batch target), including a file mapping
# registered in place.
# Results: $PL_GPU_LOGS/probe-direct.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
logs=${PL_GPU_LOGS:-$PWD/gpu-out}
mkdir -p "$logs"
bin=$(mktemp -d)/direct_probe
nvcc -O2 -arch=native -o "$bin" bench/direct_probe.cu || exit 1
timeout 400 "$bin" "${PL_PROBE_DIR:-/tmp}" 2>&1 | tee "$logs/probe-direct.txt"
