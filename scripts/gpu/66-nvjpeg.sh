#!/usr/bin/env bash
# GPU part 66: JPEG decode on the GPU beside the CPU (nvJPEG, decode=gpu /
# auto). nvJPEG comes from .data/nvjpeg/libnvjpeg.so.13 (made by
# scripts/nvjpeg-bundle.sh from the nvidia-nvjpeg wheel; the device call
# carries .data), else the installed wheel or the CUDA toolkit.
#   1. tests: test_gpu_nvjpeg (GPU crops against the CPU path's, PSNR >= 35
#      dB, train and eval; fallbacks counted; decode=auto), test_nvjpeg_lib
#      (the real library's entry points), test_decode_split (the split
#      logic), python/tests/test_gpu_decode.py and test_decode.py. A skip
#      of the GPU tests (no nvJPEG found) fails this part.
#   2. (not with --tests) bench/images_vs_torch.py: images/s with
#      decode=cpu, auto and gpu against torchvision's ImageFolder, all 16
#      cores and then 4 (taskset -c 0-3, 4 workers).
# Into $OUT: images-cuda-decode.{json,md}, images-cuda-decode-4cores.*.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
logs=${PL_GPU_LOGS:-$out}
mkdir -p "$out" "$logs"
rc=0
if [ -f .data/nvjpeg/libnvjpeg.so.13 ]; then
  export PL_NVJPEG_LIB=$PWD/.data/nvjpeg/libnvjpeg.so.13
fi
export PL_TEST_NVJPEG_LIB=${PL_NVJPEG_LIB:-}
echo "== nvJPEG: ${PL_NVJPEG_LIB:-not bundled, the wheel or the CUDA toolkit}"

# No skip passes: the GPU test must have found a GPU and nvJPEG.
no_skip() { # LOG
  if grep -q "skipped" "$1"; then
    echo "a GPU test skipped (above): this part needs the GPU and nvJPEG"; rc=1
  fi
}

if [[ ${PL_GPU_TESTS_ONLY:-0} != 0 && -d build-gpu ]]; then
  build=build-gpu # part 10's
else
  build=build-gpu-nvj
  if ! { cmake -S . -B $build -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$logs/66-build.log" 2>&1 &&
         cmake --build $build -j"$(nproc)" >>"$logs/66-build.log" 2>&1; }; then
    echo "build failed:"; tail -n 40 "$logs/66-build.log"; exit 1
  fi
fi
echo "== ctest ($build): nvjpeg, decode_split"
ctest --test-dir $build --output-on-failure -V -R 'nvjpeg|decode_split' 2>&1 |
  tee "$logs/66-ctest.log" | grep -E 'test_gpu_nvjpeg:|test_nvjpeg_lib:|test_decode_split:|tests passed|Failed|FAILED'
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
no_skip "$logs/66-ctest.log"
echo "== test_gpu_nvjpeg again with whole-image decodes (PL_NVJPEG_NO_ROI=1)"
PL_NVJPEG_NO_ROI=1 timeout 300 $build/tests/test_gpu_nvjpeg 2>&1 | tee "$logs/66-noroi.log" | tail -n 8
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1

if [[ ${PL_GPU_TESTS_ONLY:-0} != 0 && -d /tmp/pinloader-gpu-py ]]; then
  pytarget=/tmp/pinloader-gpu-py # part 30's
else
  pytarget=$(mktemp -d /tmp/pinloader-py.XXXXXX)
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-build-isolation \
    --no-deps --target "$pytarget" . >"$logs/66-pip.log" 2>&1 ||
    { echo "python package build failed:"; tail -n 30 "$logs/66-pip.log"; exit 1; }
fi
echo "== python/tests/test_gpu_decode.py test_decode.py"
(cd python/tests && PYTHONPATH=$pytarget python3 -m pytest -q -p no:cacheprovider -rs \
  test_gpu_decode.py test_decode.py 2>&1) | tee "$logs/66-pytest.log" | tail -n 15
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
# (a skip of test_decode.py names test_gpu_decode.py in its reason)
grep -qE "^SKIPPED \[[0-9]+\] test_gpu_decode.py:" "$logs/66-pytest.log" &&
  { echo "test_gpu_decode.py skipped: this part needs the GPU and nvJPEG"; rc=1; }

if [[ ${PL_GPU_TESTS_ONLY:-0} == 0 ]]; then
  export PYTHONPATH=$pytarget${PYTHONPATH:+:$PYTHONPATH}
  echo "== bench/images_vs_torch.py --decode cpu,auto,gpu (all cores)"
  timeout 300 python3 bench/images_vs_torch.py --require-torchvision --decode cpu,auto,gpu \
    --batches 160 --out "$out" --name images-cuda-decode 2>&1 | tail -n 12 || rc=1
  echo "== the same on 4 cores (taskset -c 0-3, 4 workers)"
  timeout 300 taskset -c 0-3 python3 bench/images_vs_torch.py --require-torchvision \
    --decode cpu,auto,gpu --workers 4 --batches 160 --out "$out" --name images-cuda-decode-4cores \
    2>&1 | tail -n 12 || rc=1
fi
exit $rc
