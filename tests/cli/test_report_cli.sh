#!/usr/bin/env bash
# `pinloader run --report [--json]`: a step of 50 ms (--step-ms) over a
# data set that costs nothing to read is named the bottleneck ("consumer"),
# in text and JSON (--json: stdout is JSON only, in bench --json's schema); bad --workers / --prefetch values are refused; auto
# workers and a replay run to the end with their report. Names the stage,
# never a time. Usage: test_report_cli.sh PATH-TO-pinloader (77: no CLI).
set -euo pipefail
. "$(dirname "$0")/prologue.sh"

head -c $((3073 * 64)) /dev/zero >"$dir/c.bin"
ds="cifar10:$dir/c.bin"
base=(run --dataset "$ds" --batch-size 4 --device cpu --quiet)

out=$("$cli" "${base[@]}" --workers 2 --step-ms 50 --max-batches 8 --report)
grep -q '^bound: consumer$' <<<"$out" || fail "text: $out"
grep -q 'your training step is the bottleneck' <<<"$out" || fail "text: $out"
# --json: stdout is one JSON object and nothing else (it parses whole), in
# `bench --json`'s schema (docs/bench.md): the same top-level and `loader`
# keys, the run's row under loader.run, the report under "report".
"$cli" "${base[@]}" --workers 2 --step-ms 50 --max-batches 8 --report --json \
  --checksum >"$dir/run.json" 2>"$dir/err" || fail "--report --json: $(cat "$dir/err")"
python3 -m json.tool "$dir/run.json" >/dev/null || fail "--report --json is not JSON: $(cat "$dir/run.json")"
"$cli" "${base[@]}" --workers 2 --max-batches 3 --json >"$dir/plain.json" 2>"$dir/err" ||
  fail "--json: $(cat "$dir/err")"
python3 -m json.tool "$dir/plain.json" >/dev/null || fail "--json is not JSON: $(cat "$dir/plain.json")"
"$cli" bench loader --quick --device cpu --data "$dir/c.bin" --batch-size 4 \
  --workers 2 --epochs 1 --sweep 2 --no-plot --quiet --json "$dir/bench.json" \
  >/dev/null 2>"$dir/err" || fail "bench --json: $(cat "$dir/err")"
python3 - "$dir" <<'EOF' || fail "--json keys"
import json, sys
d = sys.argv[1]
run = json.load(open(f"{d}/run.json"))
plain = json.load(open(f"{d}/plain.json"))
bench = json.load(open(f"{d}/bench.json"))
top = ["pinloader_version", "cpus", "total_s", "loader"]
assert list(run) == top + ["report"], list(run)
assert list(plain) == top, list(plain)
assert set(top) <= set(bench), sorted(bench)
shared = ["ran", "on_gpu", "device", "data", "note", "records", "batch_size",
          "workers", "work_ms", "work"]
L = run["loader"]
assert list(L) == shared + ["run"], list(L)
assert shared == [k for k in bench["loader"] if k in shared], list(bench["loader"])
for k in ["ran", "on_gpu", "device", "records", "batch_size", "workers", "work"]:
    assert L[k] == bench["loader"][k], (k, L[k], bench["loader"][k])
assert L["data"] == f"cifar10:{d}/c.bin" and L["work_ms"] == 50, L
R = L["run"]
assert list(R) == ["pin", "non_blocking", "batches", "samples", "bytes",
                   "pinned_fallbacks", "seconds", "samples_per_s", "gb_per_s",
                   "checksum", "checksum_s", "stats"], list(R)
assert R["batches"] == 8 and R["samples"] == 32 and R["bytes"] == 32 * 3073, R
assert R["pin"] is False and R["non_blocking"] is False, R  # the CPU: no copies
assert len(R["checksum"]) == 16 and int(R["checksum"], 16) >= 0, R
assert plain["loader"]["run"]["checksum"] is None
# the names bench's rows use for the same measurements
sweep = bench["loader"]["sweep"][0]
seed = bench["loader"]["seed"][0]
assert {"samples_per_s", "gb_per_s"} <= set(sweep) and {"pin", "non_blocking",
        "batches", "pinned_fallbacks"} <= set(seed), (sweep, seed)
assert list(R["stats"]) == ["batches_copied", "bytes_copied", "batches_direct",
                            "pinned_bytes", "batch_buffers", "consumer_wait_s",
                            "worker_busy_s", "copy_s"], R["stats"]
rep = run["report"]
assert rep["bound"] == "consumer", rep
assert list(rep)[:5] == ["bound", "wait_fraction", "speedup", "device", "findings"], list(rep)
EOF

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
