#!/usr/bin/env bash
# Builds pinloader and runs every test: the C suite (ctest), the Python
# package's tests, both again built without CUDA, the suite again under AddressSanitizer + UBSan (with the
# test-only fault injection) and under ThreadSanitizer, and a short fuzzing
# pass over every parser. GPU tests skip themselves where no GPU is usable.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
PY=/usr/bin/python3 # Debian's, with python3-torch / numpy / pytest

scripts/setup.sh

step() { printf '\n==== %s\n' "$*"; }

step "build and test (release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs"
python3 scripts/check-layers.py build

if [ -f pyproject.toml ]; then
  step "python package"
  scripts/python-test.sh "$PY"
fi

# The builds without CUDA: the library's stand-in (src/backend/no_cuda.c)
# instead of src/backend/cuda/. Release only, not the sanitizer matrix.
step "build and test without CUDA (CMake -DPL_CUDA=OFF)"
cmake -S . -B build-nocuda -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPL_CUDA=OFF >/dev/null
cmake --build build-nocuda -j"$jobs"
ctest --test-dir build-nocuda --output-on-failure -j"$jobs" -LE gpu

if [ -f pyproject.toml ]; then
  step "python package without CUDA (PINLOADER_NO_CUDA=1)"
  # torch's own DataLoader suite and the differential suite ran with the
  # first build (they test the front end, the same in both builds).
  # The differential suite too (PINLOADER_DIFF_N=0: none of its cases).
  PINLOADER_NO_CUDA=1 PINLOADER_SKIP_TORCH_SUITE=1 PINLOADER_DIFF_N=0 scripts/python-test.sh "$PY"
fi

step "installation: cmake --install, the README's C example, pip and a wheel in fresh venvs"
scripts/install-test.sh build

step "AddressSanitizer + UBSan, with fault injection"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPL_SANITIZE=address \
  -DPL_FAULT_INJECTION=ON >/dev/null
cmake --build build-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan --output-on-failure -j"$jobs" -LE gpu

step "ThreadSanitizer"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DPL_SANITIZE=thread >/dev/null
cmake --build build-tsan -j"$jobs"
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  ctest --test-dir build-tsan --output-on-failure -j"$jobs" -LE gpu

if [ -x scripts/fuzz.sh ]; then
  step "fuzzing (short)"
  scripts/fuzz.sh 15
fi

step "all tests passed"
