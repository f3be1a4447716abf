#!/usr/bin/env bash
# GPU part 20: the benchmark. `pinloader bench` at full size (bandwidth,
# overlap, the seeds' loader experiment and the worker sweep), then
# bench/vs_torch.py (the same experiments through torch's DataLoader, with
# pinloader/PyTorch ratios).
#
# Into $OUT (3 files): bench.json, bench.svg, vs_torch.json. The CSV goes to
# $PL_GPU_LOGS (packed into logs.tar.gz by scripts/gpu-check.sh) when set.
# Uses $PL_CLI or build-gpu/pinloader, or builds the latter (Release). Budget: under 4 minutes
# on the H200: each step runs under a timeout that keeps the sum below it.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
logs=${PL_GPU_LOGS:-$out}
mkdir -p "$out" "$logs"
cli=${PL_CLI:-build-gpu/pinloader} # PL_CLI: a CLI built elsewhere
t0=$(date +%s)

if [ ! -x "$cli" ]; then
  echo "== building $cli (Release)"
  if ! { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DPL_BUILD_TESTS=OFF &&
         cmake --build build-gpu -j"$(nproc)" --target pinloader_cli; } >"$logs/20-build.log" 2>&1; then
    echo "build failed:"; tail -n 40 "$logs/20-build.log"; exit 1
  fi
  cli=build-gpu/pinloader
fi
bt=$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$(dirname "$cli")/CMakeCache.txt" 2>/dev/null)
[ "$bt" = Debug ] && echo "warning: $cli is a Debug build: loader numbers are not representative"
nvidia-smi --query-gpu=name,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader 2>/dev/null

rc=0
echo "== pinloader bench (full)"
timeout 110 "$cli" bench --quiet --json "$out/bench.json" --csv "$logs/bench.csv" \
  --plot "$out/bench.svg"
r=$?
if [ $r -ne 0 ]; then echo "pinloader bench: exit $r (124 = over its 110 s)"; rc=1; fi
echo "bench done at +$(( $(date +%s) - t0 )) s"

echo "== the bandwidth table against plain cudaMemcpyAsync (bench/plain_copy.c), same run"
cuda=${CUDA_HOME:-/usr/local/cuda}
if gcc -O2 -I"$cuda/include" bench/plain_copy.c -o "$logs/plain_copy" -L"$cuda/lib64" \
     -lcudart_static -lpthread -ldl -lrt 2>"$logs/plain_copy_build.log" &&
   "$logs/plain_copy" >"$logs/plain_copy.txt"; then
  python3 - "$out/bench.json" "$logs/plain_copy.txt" <<'PY' || rc=1
import json, sys
rows = {r["bytes"]: r for r in json.load(open(sys.argv[1]))["bandwidth"]["rows"]}
worst = 0
print("%10s %14s %14s %7s | %14s %14s %7s" % ("bytes", "bench pinned", "plain pinned", "diff",
                                              "bench pageable", "plain pageable", "diff"))
for line in open(sys.argv[2]):
    n, pin, page = line.split(); n = int(n); pin = float(pin); page = float(page)
    r = rows.get(n)
    if not r:
        continue
    dp = r["h2d_pinned_async"] / pin - 1
    dg = r["h2d_pageable"] / page - 1
    worst = max(worst, abs(dp))
    print("%10d %14.2f %14.2f %+6.1f%% | %14.2f %14.2f %+6.1f%%" % (
        n, r["h2d_pinned_async"], pin, 100 * dp, r["h2d_pageable"], page, 100 * dg))
print("pinned: largest difference %.1f%% (within 5%%: %s); pageable copies vary run to run"
      % (100 * worst, "yes" if worst <= 0.05 else "NO"))
sys.exit(0 if worst <= 0.05 else 1)
PY
else
  echo "plain_copy: build or run failed"; cat "$logs/plain_copy_build.log"; rc=1
fi

echo "== bench/vs_torch.py"
# Through the Python package, as its users run it: build it (CUDA backend)
# into a scratch directory first.
pytarget=$(mktemp -d /tmp/pinloader-py.XXXXXX)
if PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-build-isolation \
     --no-deps --target "$pytarget" . >"$logs/20-pip.log" 2>&1; then
  export PYTHONPATH="$pytarget${PYTHONPATH:+:$PYTHONPATH}"
else
  echo "python package build failed (see 20-pip.log): vs_torch.py falls back to the CLI"
fi
if python3 -c 'import torch, numpy' 2>/dev/null; then
  timeout 150 python3 bench/vs_torch.py --cli "$cli" --out "$out"
  r=$?
  if [ $r -ne 0 ]; then echo "vs_torch.py: exit $r (124 = over its 150 s)"; rc=1; fi
else
  echo "python3 has no torch: vs_torch.py skipped"
fi
echo "20-bench total $(( $(date +%s) - t0 )) s"
exit $rc
