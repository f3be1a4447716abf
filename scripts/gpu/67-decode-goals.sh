#!/usr/bin/env bash
# GPU part 67: issue 28's measures in one call, every loader timed after a
# whole epoch (--warmup-epoch: nvJPEG's start and the prefetch depth are
# not timed), torchvision's ImageFolder + torch's DataLoader in the same run:
#   1. train, RandomResizedCrop(224) + flip, 16 workers: cpu, auto, gpu;
#   2. eval, Resize(256) + CenterCrop(224), 16 workers: cpu, auto, gpu;
#   3. train on 4 cores (taskset -c 0-3, 4 workers): cpu, auto, gpu;
#   4. ResNet-50 (bf16, channels_last) fed from the folder against the same
#      model on synthetic data on the GPU, with each feed's first batch.
# The four took 313 s in one call on the H100 box at 13b8686, the package's
# build and the folder's 12,000 JPEGs included
# (bench/results/h100-decode-goals-13b8686-2026-12-07): where a call cannot
# hold them, name fewer with PL_GOALS. Each step is cut at 280 s.
# Results: decode-*.{md,json} into $PL_GPU_LOGS (packed into
# $OUT/logs.tar.gz by gpu-check.sh), the tables printed.
#   scripts/gpu-check.sh 67      (PL_GOALS="train eval 4cores resnet")
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${PL_GPU_LOGS:-${OUT:-$PWD/gpu-out}}
mkdir -p "$out"
if [ -f .data/nvjpeg/libnvjpeg.so.13 ]; then
  export PL_NVJPEG_LIB=$PWD/.data/nvjpeg/libnvjpeg.so.13
fi
echo "== nvJPEG: ${PL_NVJPEG_LIB:-the wheel or the CUDA toolkit}"
pytarget=${PINLOADER_PY_TARGET:-/tmp/pinloader-gpu-py}
if [ ! -d "$pytarget/pinloader" ]; then
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-build-isolation \
    --no-deps --target "$pytarget" . >"$out/67-pip.log" 2>&1 ||
    { echo "python package build failed:"; tail -n 30 "$out/67-pip.log"; exit 1; }
fi
export PYTHONPATH=$pytarget${PYTHONPATH:+:$PYTHONPATH}
goals=${PL_GOALS:-train eval 4cores resnet}
rc=0
ivt() { # NAME ARGS...: bench/images_vs_torch.py, its table printed ($PIN: a prefix)
  local name=$1; shift
  echo "== $name: ${PIN:-}${PIN:+ }images_vs_torch.py $*"
  timeout 280 ${PIN:-} python3 bench/images_vs_torch.py --require-torchvision --decode cpu,auto,gpu \
    --batches 160 --warmup-epoch --out "$out" --name "$name" "$@" >"$out/$name.log" 2>&1 || {
    rc=1; tail -n 20 "$out/$name.log"; }
  grep '^|' "$out/$name.md" 2>/dev/null
}
for g in $goals; do
  case $g in
    train) ivt decode-train ;;
    eval) ivt decode-eval --eval ;;
    4cores) PIN="taskset -c 0-3" ivt decode-train-4cores --workers 4 ;;
    resnet)
      echo "== resnet: resnet_images.py --decode cpu,auto"
      timeout 280 python3 bench/resnet_images.py --decode cpu,auto --out "$out" \
        --name decode-resnet50 >"$out/decode-resnet50.log" 2>&1 || {
        rc=1; tail -n 20 "$out/decode-resnet50.log"; }
      grep '^|' "$out/decode-resnet50.md" 2>/dev/null ;;
    *) echo "PL_GOALS: no goal named $g"; rc=1 ;;
  esac
done
exit $rc
