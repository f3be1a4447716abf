#!/usr/bin/env bash
# GPU part 65: device transforms (issue 14). The kernels' and the CUDA
# loader's equality with the host reference (tests/gpu/test_gpu_transform,
# python/tests/test_transforms.py's CUDA cases), then bench/transforms_bench.py:
# the seeds' benchmark with normalization on the device (floor 4.90 s),
# ImageNet-shaped uint8 -> normalized bf16 against the uint8 rate, and a
# ResNet-18 loop fed by pinloader's device crop/flip/normalize against
# synthetic data on the GPU and torch's DataLoader, all in one run.
#
# Into $OUT: transforms.json, transforms.log. Budget: about 5 minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
logs=${PL_GPU_LOGS:-$out}
mkdir -p "$out" "$logs"
rc=0

if [[ ${PL_GPU_TESTS_ONLY:-0} != 0 && -d build-gpu && -d /tmp/pinloader-gpu-py ]]; then
  # gpu-check.sh --tests: the builds of parts 10 and 30, the tests alone.
  echo "== tests: build-gpu (part 10's build), ctest -R transform"
  ctest --test-dir build-gpu --output-on-failure -R transform || rc=1
  echo "== python/tests/test_transforms.py (part 30's build, CUDA backend)"
  (cd python/tests && PYTHONPATH=/tmp/pinloader-gpu-py python3 -m pytest -q -p no:cacheprovider \
    -rs test_transforms.py) || rc=1
  exit $rc
fi

echo "== tests: build-gpu-xf (RelWithDebInfo), ctest -R transform"
if cmake -S . -B build-gpu-xf -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$logs/60-build.log" 2>&1 &&
   cmake --build build-gpu-xf -j"$(nproc)" >>"$logs/60-build.log" 2>&1; then
  ctest --test-dir build-gpu-xf --output-on-failure -R transform || rc=1
else
  echo "build failed:"; tail -n 40 "$logs/60-build.log"; rc=1
fi

echo "== the Python package (CUDA backend, nvcc kernels)"
pytarget=$(mktemp -d /tmp/pinloader-py.XXXXXX)
if PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-build-isolation \
     --no-deps --target "$pytarget" . >"$logs/60-pip.log" 2>&1; then
  export PYTHONPATH="$pytarget${PYTHONPATH:+:$PYTHONPATH}"
  (cd python/tests && python3 -m pytest -q -p no:cacheprovider -rs test_transforms.py) || rc=1
  echo "== bench/transforms_bench.py"
  PL_COMMIT=${PL_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)} \
    timeout 400 python3 bench/transforms_bench.py --out "$out" 2>&1 | tee "$out/transforms.log"
  r=${PIPESTATUS[0]}
  if [ "$r" -ne 0 ]; then echo "transforms_bench.py: exit $r (124 = over its 400 s)"; rc=1; fi
else
  echo "python package build failed:"; tail -n 30 "$logs/60-pip.log"; rc=1
fi
exit $rc
