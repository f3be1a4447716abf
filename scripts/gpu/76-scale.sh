#!/usr/bin/env bash
# GPU part 76: cost as the dataset grows (bench/scale_vs_torch.py): an image
# folder of ImageNet's size (1.28 M hard links, made once under
# $PL_SCALE_DATA, about a minute) and 1 B / 10 B-token sparse shard sets,
# pinloader against torchvision's ImageFolder and a np.memmap window dataset
# through torch's DataLoader, on the CPU side (time to the first batch,
# RSS / USS / PSS of the parent and each worker, state size) for 0/4/16
# workers (PL_SCALE_WORKERS). A few minutes on the H200 machine. Results:
# $OUT (or $PL_GPU_LOGS, else gpu-out)/scale-h200.{json,md}.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
out=${OUT:-${PL_GPU_LOGS:-$PWD/gpu-out}}
mkdir -p "$out"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1
target=$(mktemp -d "${TMPDIR:-/tmp}/pinloader-py.XXXXXX")
trap 'rm -rf "$target"' EXIT
"$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$target" .
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
"$PY" bench/scale_vs_torch.py --data "${PL_SCALE_DATA:-/tmp/pl-scale}" \
    --workers "${PL_SCALE_WORKERS:-0,4,16}" --batch 256 --out "$out" --name scale-h200
