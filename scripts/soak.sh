#!/usr/bin/env bash
# Soak: build bench/soak.c against the library and run many epochs over
# Fashion-MNIST (workers 8, prefetch 4 by default), printing a Markdown table
# of resident memory per epoch. Flat after warm-up, or exit 1.
#   scripts/soak.sh [soak options...]     e.g. --epochs 100 --device cpu
# Env: BUILD_DIR (default build-soak; configured RelWithDebInfo if absent),
#      SOAK_NVSMI=1 also samples device memory with nvidia-smi every 5 s
#      into $BUILD_DIR/soak-nvsmi.csv (used by scripts/gpu/50-soak.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-soak}
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$build" --target pinloader_static -j"$(nproc)" >/dev/null

# The static library may need the CUDA runtime (a CUDA build).
libs=(-lz -lpthread -lm)
# (grep without -q: nm must not die of SIGPIPE under pipefail)
if nm "$build/libpinloader.a" 2>/dev/null | grep ' U cuda' >/dev/null; then
  cudalib=$(grep -o 'CUDA_cudart_static_LIBRARY:FILEPATH=.*' "$build/CMakeCache.txt" | cut -d= -f2)
  libs+=("${cudalib:-/usr/local/cuda/lib64/libcudart_static.a}" -ldl -lrt)
fi
${CC:-cc} -O2 -std=c11 -Wall -Wextra -I"$root/include" -DPL_STATIC_DEFINE \
  "$root/bench/soak.c" "$build/libpinloader.a" "${libs[@]}" -o "$build/soak"

sampler=
if [ "${SOAK_NVSMI:-0}" = 1 ] && command -v nvidia-smi >/dev/null; then
  (while sleep 5; do
     nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader
   done) >"$build/soak-nvsmi.csv" 2>/dev/null &
  sampler=$!
fi
echo "machine: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); $(date -u +%Y-%m-%dT%H:%MZ)"
echo "command: $build/soak $*"
echo
status=0
"$build/soak" "$@" || status=$?
if [ -n "$sampler" ]; then
  kill "$sampler" 2>/dev/null || true
  echo; echo "device memory (nvidia-smi, every 5 s):"
  cat "$build/soak-nvsmi.csv"
fi
exit $status
