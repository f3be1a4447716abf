#!/usr/bin/env bash
# GPU soak (~90 s): many epochs of Fashion-MNIST through the CUDA loader
# (workers 8, prefetch 4), host RSS per epoch from the soak program and
# device memory every 5 s from nvidia-smi: both must be flat after warm-up.
# Then 20 s recreating the loader every 5 epochs (create/destroy leaks of
# pinned or device memory). Tables go to $PL_GPU_LOGS (packed by
# scripts/gpu-check.sh), else build-gpu-soak/.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=build-gpu-soak
LOG=${PL_GPU_LOGS:-$B}
mkdir -p "$LOG" "$B"
fm=${PL_FASHION_DIR:-/usr/share/datasets/fashion-mnist}
data=(--images "$fm/train-images-idx3-ubyte.gz" --labels "$fm/train-labels-idx1-ubyte.gz")
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPL_BUILD_TESTS=OFF \
  >"$LOG/soak-configure.log" 2>&1 || { tail -30 "$LOG/soak-configure.log"; exit 1; }
grep 'CUDA backend' "$LOG/soak-configure.log" || true
rc=0
BUILD_DIR=$PWD/$B SOAK_NVSMI=1 scripts/soak.sh --device cuda --epochs 100000 \
  --seconds 60 --every 10 --workers 8 --prefetch 4 "${data[@]}" \
  | tee "$LOG/soak-cuda.md" || rc=1
BUILD_DIR=$PWD/$B SOAK_NVSMI=1 scripts/soak.sh --device cuda --epochs 100000 \
  --seconds 20 --every 10 --float --recreate 5 "${data[@]}" \
  | tee "$LOG/soak-cuda-recreate.md" || rc=1
echo "50-soak: rc=$rc"
exit $rc
