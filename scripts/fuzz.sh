#!/usr/bin/env bash
# Build the libFuzzer targets with clang and run each for a while.
#   scripts/fuzz.sh [seconds-per-target] [target...]   (default 20 s, all)
# Env: BUILD_DIR (default build-fuzz), FUZZ_JOBS (targets run at once,
# default: the number of cores), FUZZ_MAX_LEN (default 16384).
# Seeds come from tests/fuzz/corpus/TARGET (never written to); the growing
# corpus lives in $BUILD_DIR/corpus/TARGET, crashes in
# $BUILD_DIR/artifacts/TARGET/, logs in $BUILD_DIR/logs/TARGET.log.
# Exits 1 if any target found a crash (copy the input into
# tests/fuzz/regressions/TARGET/ once fixed: ctest replays it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
shift || true
build=${BUILD_DIR:-$root/build-fuzz}
jobs=${FUZZ_JOBS:-$(nproc)}
maxlen=${FUZZ_MAX_LEN:-16384}

CC=${CC:-clang} cmake -S "$root" -B "$build" -DPL_FUZZ=ON -DPL_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_all -j"$(nproc)" >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$root"/tests/fuzz/fuzz_*.c; do
    t=$(basename "$f" .c); targets+=("${t#fuzz_}")
  done
fi

run_one() {
  local t=$1
  mkdir -p "$build/corpus/$t" "$build/artifacts/$t" "$build/logs"
  # -rss_limit_mb: a decompression bomb or a huge allocation is a finding.
  "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -max_len="$maxlen" \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$build/artifacts/$t/" \
    "$build/corpus/$t" "$root/tests/fuzz/corpus/$t" \
    >"$build/logs/$t.log" 2>&1
}

status=0
running=0
pids=()
names=()
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!); names+=("$t"); running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait "${pids[0]}" || { echo "fuzz_${names[0]}: FAILED (see $build/logs/${names[0]}.log)"; status=1; }
    pids=("${pids[@]:1}"); names=("${names[@]:1}"); running=$((running - 1))
  fi
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "fuzz_${names[$i]}: FAILED (see $build/logs/${names[$i]}.log)"; status=1; }
done

for t in "${targets[@]}"; do
  log=$build/logs/$t.log
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{print $2}')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | awk '{print $2}')
  crashes=$(find "$build/artifacts/$t" -type f | wc -l)
  echo "fuzz_$t: ${secs}s execs=${execs:-?} cov=${cov:-?} artifacts=$crashes"
done
exit $status
