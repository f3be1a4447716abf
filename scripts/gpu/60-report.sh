#!/usr/bin/env bash
# GPU part 60 (issue 15): the bottleneck report and autotuning.
#   1. tests/gpu/test_gpu_report (the copy-bound case) and test_report.
#   2. What per-stage timing costs: bench/timing_cost.py, two loaders over
#      native CIFAR uint8 (batch 1024, 8 workers, shuffled, to the GPU), one
#      with timings and one without, taking turns of 2,000 batches in one
#      process, 60 rounds: the median on/off ratio with a 95% interval
#      (goal: the cost is under 1%). Separate runs differ by 5-10% on the
#      VM, which hid the effect (bench/results/h200-f72e409-2026-12-01).
#   3. `pinloader run --report` on CIFAR with the step bound (--step-ms 20)
#      and the copy bound (no step), text and JSON, and a replay run.
#   4. bench/autotune.py ($PL_AUTOTUNE_ARGS passed on): auto against a
#      sweep of fixed settings over CIFAR uint8, a Python augmentation
#      dataset and an image folder (goal: auto >= 0.90 of the best fixed).
# Into $OUT: report-timing-cost.txt, timing-cost.json, report-cases.txt,
# autotune.json, autotune.txt. Budget: about 8 minutes on the H200.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/gpu-out}
logs=${PL_GPU_LOGS:-$out}
mkdir -p "$out" "$logs"
PY=${PYTHON:-python3}
rc=0

echo "== build (Release, with tests)"
if ! { cmake -S . -B build-report -DCMAKE_BUILD_TYPE=Release &&
       cmake --build build-report -j"$(nproc)"; } >"$logs/60-build.log" 2>&1; then
  echo "build failed:"; tail -n 40 "$logs/60-build.log"; exit 1
fi
cli=build-report/pinloader

echo "== tests"
ctest --test-dir build-report --output-on-failure -R 'test_(gpu_)?report' || rc=1

data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$PY" - "$data" <<'PYEOF'
import sys, numpy as np
rng = np.random.default_rng(0)
for i in range(5):
    rec = rng.integers(0, 256, (10000, 3073), dtype=np.uint8)
    rec[:, 0] %= 10
    rec.tofile("%s/data_batch_%d.bin" % (sys.argv[1], i + 1))
PYEOF
spec="cifar10:$(ls "$data"/data_batch_*.bin | paste -sd,)"
common=(--dataset "$spec" --batch-size 1024 --workers 8 --shuffle --quiet)

echo "== report cases" | tee "$out/report-cases.txt"
{
  echo "-- step-bound (--step-ms 20)"
  timeout 60 "$cli" run "${common[@]}" --max-batches 100 --step-ms 20 --report
  echo "-- no step (copy or workers)"
  timeout 60 "$cli" run "${common[@]}" --epochs 5 --report
  timeout 60 "$cli" run "${common[@]}" --epochs 5 --report --json | tail -n 1
  echo "-- auto workers and prefetch"
  timeout 60 "$cli" run "${common[@]}" --workers auto --prefetch auto --epochs 10 --report
  echo "-- replay: 200 loaded, then 8 kept and replayed (the ceiling)"
  timeout 60 "$cli" run "${common[@]}" --max-batches 600 --step-ms 1 --replay 8 --replay-after 200 --report
} 2>&1 | tee -a "$out/report-cases.txt"

echo "== Python module"
pytarget=$(mktemp -d)
if "$PY" -m pip install -q --no-index --no-build-isolation --no-deps --target "$pytarget" . >"$logs/60-pip.log" 2>&1; then
  echo "== bench/timing_cost.py"
  PYTHONPATH="$pytarget" timeout 120 "$PY" bench/timing_cost.py --rounds 60 --turn-batches 2000 \
    --json "$out/timing-cost.json" 2>&1 | tee "$out/report-timing-cost.txt" || rc=1
  echo "== bench/autotune.py"
  PYTHONPATH="$pytarget" timeout 420 "$PY" bench/autotune.py --json "$out/autotune.json" ${PL_AUTOTUNE_ARGS:-} \
    2>&1 | tee "$out/autotune.txt" || rc=1
else
  echo "python build failed:"; tail -n 30 "$logs/60-pip.log"; rc=1
fi
rm -rf "$pytarget"
exit $rc
