#!/usr/bin/env bash
# GPU part 38: pinloader inside the frameworks users train with
# (python/tests/frameworks/: Lightning's Trainer.fit, HF accelerate's
# prepare() on 1 and 2 CPU processes, the HF Trainer), each two epochs of a
# small model with torch's loader and pinloader's, the losses compared.
# Needs lightning, accelerate, transformers and a torch they accept (the GPU
# machine has them; Debian's torch 1.13 is too old). Every script runs on
# the CPU; a few minutes in all. Exit status: non-zero if any script fails.
set -uo pipefail
cd "$(dirname "$0")/../.."
target=${PINLOADER_PY_TARGET:-/tmp/pinloader-gpu-py}
if [[ ! -d $target/pinloader ]]; then
  mkdir -p "$target"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-build-isolation \
    --no-deps --target "$target" . || exit 1
fi
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES=""
python3 -c 'import torch; print("torch", torch.__version__)'
status=0
for s in fw_lightning fw_accelerate fw_transformers; do
  echo "== $s"
  timeout 240 python3 "python/tests/frameworks/$s.py" || { echo "== $s: exit $?"; status=1; }
done
exit $status
