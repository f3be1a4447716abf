#!/usr/bin/env bash
# GPU part 35: the differential conformance suite (python/tests/
# test_differential.py, docs/testing.md) with device="cuda" in its draws and
# a budget of 800 configurations (PINLOADER_DIFF_N; each shard at most
# PL_DIFF_SHARD_S = 200 s) (CI runs a few hundred on the
# CPU). PL_DIFF_BASE: the first case's number (default 0), so that a longer
# run can draw cases the default run did not; PL_DIFF_SHARDS: how many
# shards run at once (default half the cores). Uses part 30's build of the Python package (CUDA backend) when it is
# there, else builds one.
set -uo pipefail
cd "$(dirname "$0")/../.."
target=${PINLOADER_PY_TARGET:-/tmp/pinloader-gpu-py}
if [[ ! -d $target/pinloader ]]; then
  mkdir -p "$target"
  PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install -q --no-index --no-build-isolation \
    --no-deps --target "$target" .
fi
export PYTHONPATH="$target${PYTHONPATH:+:$PYTHONPATH}"
python3 -c 'import pinloader, sys; sys.exit(0 if pinloader.cuda_available() else 1)' ||
  { echo "35-differential: this build has no usable CUDA device"; exit 1; }
cd python/tests
# The budget in shards run at once (cases are numbered; each is drawn from
# its own number, so shards are disjoint ranges): half as many as cores.
total=${PINLOADER_DIFF_N:-800}
shards=${PL_DIFF_SHARDS:-$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))}
base=${PL_DIFF_BASE:-0}
per=$(( (total + shards - 1) / shards ))
logs=${PL_GPU_LOGS:-/tmp}
pids=()
for ((k = 0; k < shards; k++)); do
  PINLOADER_DIFF_FIRST=$((base + k * per)) PINLOADER_DIFF_N=$per \
    timeout "${PL_DIFF_SHARD_S:-200}" python3 -m pytest -q -p no:cacheprovider -rf \
      test_differential.py >"$logs/35-shard-$k.log" 2>&1 &
  pids+=($!)
done
rc=0
for ((k = 0; k < shards; k++)); do
  wait "${pids[$k]}" || rc=1
  echo "shard $k (cases $((base + k * per))..$((base + (k + 1) * per - 1))): $(tail -n 1 "$logs/35-shard-$k.log")"
done
grep -h "REPRODUCE" "$logs"/35-shard-*.log | head -40
exit $rc
