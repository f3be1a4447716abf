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
# Large samples (64 KiB images, 16 MiB batches): the chunked gather, then
# direct mode (--direct: the 260 MB of files page-locked in place), each
# with the loader recreated every 5 epochs (registration and
# unregistration).
big=$(mktemp -d /tmp/pl-soak.XXXXXX)
python3 - "$big" <<'PY' || rc=1
import sys, numpy as np
d, n = sys.argv[1], 4000
hdr = lambda magic, *dims: np.array([magic, *dims], dtype=">u4").tobytes()
open(f"{d}/img", "wb").write(hdr(0x803, n, 256, 256) + np.random.default_rng(0).integers(0, 256, n * 65536, dtype=np.uint8).tobytes())
open(f"{d}/lbl", "wb").write(hdr(0x801, n) + np.random.default_rng(1).integers(0, 10, n, dtype=np.uint8).tobytes())
PY
for mode in chunked direct; do
  flag=(); [ $mode = direct ] && flag=(--direct)
  BUILD_DIR=$PWD/$B SOAK_NVSMI=1 scripts/soak.sh --device cuda --epochs 100000 \
    --seconds 25 --every 20 --workers 8 --prefetch 4 --batch 256 --recreate 5 \
    "${flag[@]}" --images "$big/img" --labels "$big/lbl" \
    | tee "$LOG/soak-cuda-$mode.md" || rc=1
done
rm -rf "$big"
echo "50-soak: rc=$rc"
exit $rc
