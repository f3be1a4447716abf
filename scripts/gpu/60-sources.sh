#!/usr/bin/env bash
# GPU part 60: the native sources' benchmarks (issue 13). Builds the Python
# package into a scratch dir, then bench/images_vs_torch.py (generated
# ImageNet-like folder, torchvision ImageFolder + RandomResizedCrop(224) +
# flip vs pinloader, 16 workers, batch 256, uint8, into the GPU) and
# bench/tokens_vs_nanogpt.py (B=32, T=1024). Into $OUT: images.json,
# tokens.json. Budget: about 8 minutes (folder generation is most of it).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
PY=${PYTHON:-python3}
target=$(mktemp -d)
PIP_BREAK_SYSTEM_PACKAGES=1 "$PY" -m pip install -q --no-index --no-build-isolation --no-deps \
  --target "$target" . || { echo "python build failed"; exit 1; }
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
timeout 420 "$PY" bench/images_vs_torch.py --workers 16 --batch 256 --json "$out/images.json"
timeout 180 "$PY" bench/tokens_vs_nanogpt.py --json "$out/tokens.json"
