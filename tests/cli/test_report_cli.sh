#!/usr/bin/env bash
# `pinloader run --report [--json]`: a step of 50 ms (--step-ms) over a
# data set that costs nothing to read is named the bottleneck ("consumer"),
# in text and JSON; bad --workers / --prefetch values are refused; auto
# workers and a replay run to the end with their report. Names the stage,
# never a time. Usage: test_report_cli.sh PATH-TO-pinloader (77: no CLI).
set -euo pipefail
cli=${1:-}
if [[ -z $cli || ! -x $cli ]]; then
  echo "skip: no CLI binary at '$cli'"
  exit 77
fi
unset RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE \
  OMPI_COMM_WORLD_LOCAL_RANK PMI_RANK PMI_SIZE
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

head -c $((3073 * 64)) /dev/zero >"$dir/c.bin"
ds="cifar10:$dir/c.bin"
base=(run --dataset "$ds" --batch-size 4 --device cpu --quiet)

out=$("$cli" "${base[@]}" --workers 2 --step-ms 50 --max-batches 8 --report)
grep -q '^bound: consumer$' <<<"$out" || fail "text: $out"
grep -q 'your training step is the bottleneck' <<<"$out" || fail "text: $out"
json=$("$cli" "${base[@]}" --workers 2 --step-ms 50 --max-batches 8 --report --json | tail -n 1)
[[ $json == '{"bound": "consumer",'* ]] || fail "json: $json"

out=$("$cli" "${base[@]}" --workers auto --prefetch auto --epochs 3 --report)
grep -q '^report: cpu, [0-9]* workers\? (auto), prefetch [0-9]* (auto)' <<<"$out" || fail "auto: $out"
out=$("$cli" "${base[@]}" --workers 1 --replay 2 --replay-after 3 --epochs 2 --report)
grep -q '^loaded: 128 samples in 32 batches' <<<"$out" || fail "replay: $out"
grep -q 'of the ceiling' <<<"$out" || fail "replay: $out"

for bad in "--workers autox" "--prefetch -2" "--cpu-budget -1" "--replay 70000" "--step-ms -1"; do
  rc=0
  "$cli" "${base[@]}" $bad 2>"$dir/err" >/dev/null || rc=$?
  [[ $rc == 2 && -s $dir/err ]] || fail "$bad: exit $rc: $(cat "$dir/err")"
done
grep -q 'step-ms needs a number of milliseconds' "$dir/err" || fail "step-ms: $(cat "$dir/err")"
echo "test_report_cli: ok"
